/**
 * effect's OTLP/HTTP exporters for the signals the settings name. Loaded only when an endpoint is
 * set (`OtlpExport.ts` imports it dynamically), so a daemon without OpenTelemetry neither loads nor
 * runs them.
 */
import { Context, Duration, Effect, Layer, Tracer } from "effect"
import { FetchHttpClient } from "effect/http"
import { OtlpExporter, OtlpLogger, OtlpMetrics, OtlpSerialization, OtlpTracer } from "effect/observability"
import { packageVersion } from "../../domain/version.ts"
import type { OtlpSettings } from "./otlpSettings.ts"
import { isAlwaysOn, sampledTracer } from "./sampler.ts"

const interval = (millis: number | undefined) => millis === undefined ? undefined : Duration.millis(millis)

/** effect's OTLP tracer, behind the settings' sampler unless that is the default (every trace). */
const tracerLayer = (options: Parameters<typeof OtlpTracer.make>[0], settings: OtlpSettings) =>
  isAlwaysOn(settings.sampler) ? OtlpTracer.layer(options) : Layer.effect(Tracer.Tracer)(
    Effect.map(OtlpTracer.make(options), (tracer) => sampledTracer(tracer, settings.sampler))
  ).pipe(Layer.provideMerge(OtlpExporter.layerFlusher))

/** One exporter per signal that has a URL, over `fetch`, encoded as the settings say. */
const exporters = (settings: OtlpSettings): Layer.Layer<OtlpExporter.Flusher> => {
  const resource = { serviceName: settings.serviceName, serviceVersion: packageVersion, attributes: settings.attributes }
  const common = { resource, headers: settings.headers }
  const { traces, logs, metrics } = settings.signals
  return Layer.mergeAll(
    traces === undefined ? Layer.empty : tracerLayer({ ...common, url: traces, exportInterval: interval(settings.tracesInterval) }, settings),
    logs === undefined ? Layer.empty : OtlpLogger.layer({ ...common, url: logs, exportInterval: interval(settings.logsInterval) }),
    metrics === undefined ? Layer.empty : OtlpMetrics.layer({ ...common, url: metrics, exportInterval: interval(settings.metricsInterval) })
  ).pipe(
    Layer.provide(settings.protocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson),
    Layer.provide(FetchHttpClient.layer)
  )
}

/**
 * The exporters' layer: the tracer and the loggers they install are kept; the flusher is not
 * offered (the exporters flush when the daemon's or the hub's scope closes).
 */
export const exportersLayer = (settings: OtlpSettings): Layer.Layer<never> =>
  Layer.effectContext(Effect.map(Layer.build(exporters(settings)), Context.omit(OtlpExporter.Flusher)))
