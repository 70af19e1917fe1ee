/**
 * OpenTelemetry export of a daemon's or a hub's traces, logs and metrics over OTLP/HTTP, with
 * effect's own exporters. Built from the `OTEL_*` environment (`otlpSettings.ts`): with no endpoint
 * set it is the empty layer, so no exporter fiber runs and nothing is sent. The logs go beside the
 * console and the home's log file, the metrics beside `/metrics`, from the same registry.
 */
import { Context, Duration, Effect, Layer, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import { OtlpExporter, OtlpLogger, OtlpMetrics, OtlpSerialization, OtlpTracer } from "effect/observability"
import { packageVersion } from "../../domain/version.ts"
import { type OtlpSettings, otlpSettings, type TelemetrySettingInvalid } from "./otlpSettings.ts"

const interval = (millis: number | undefined) => millis === undefined ? undefined : Duration.millis(millis)

/** The exporters the settings name, one per signal that has a URL. */
const exporters = (settings: OtlpSettings): Layer.Layer<OtlpExporter.Flusher> => {
  const resource = { serviceName: settings.serviceName, serviceVersion: packageVersion, attributes: settings.attributes }
  const common = { resource, headers: settings.headers }
  const { traces, logs, metrics } = settings.signals
  return Layer.mergeAll(
    traces === undefined ? Layer.empty : OtlpTracer.layer({ ...common, url: traces, exportInterval: interval(settings.tracesInterval) }),
    logs === undefined ? Layer.empty : OtlpLogger.layer({ ...common, url: logs, exportInterval: interval(settings.logsInterval) }),
    metrics === undefined ? Layer.empty : OtlpMetrics.layer({ ...common, url: metrics, exportInterval: interval(settings.metricsInterval) })
  ).pipe(
    Layer.provide(settings.protocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson),
    Layer.provide(FetchHttpClient.layer)
  )
}

/**
 * The OTLP exporters configured by the environment, or the empty layer when none is; a malformed
 * `OTEL_*` value fails with `TelemetrySettingInvalid`. `serviceName` is used unless
 * `OTEL_SERVICE_NAME` (or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) names the service.
 */
export const layer = (serviceName: string): Layer.Layer<never, TelemetrySettingInvalid> =>
  Layer.unwrap(Effect.map(otlpSettings(serviceName), Option.match({
    onNone: () => Layer.empty,
    // The tracer and the loggers are kept (they are what the exporters install); the flusher is
    // not offered: the exporters flush when the daemon's or the hub's scope closes.
    onSome: (settings) =>
      Layer.effectContext(Effect.map(Layer.build(exporters(settings)), Context.omit(OtlpExporter.Flusher)))
  })))
