/**
 * OpenTelemetry export of a daemon's or a hub's traces, logs and metrics over OTLP/HTTP, with
 * effect's own exporters. Built from the `OTEL_*` environment (`otlpSettings.ts`): with no endpoint
 * set it is the empty layer, so the exporters are not even loaded, no exporter fiber runs and
 * nothing is sent. The logs go beside the console and the home's log file, the metrics beside
 * `/metrics`, from the same registry.
 */
import { Effect, Layer, Option } from "effect"
import { otlpSettings, type TelemetrySettingInvalid } from "./otlpSettings.ts"

/**
 * The OTLP exporters configured by the environment, or the empty layer when none is; a malformed
 * `OTEL_*` value fails with `TelemetrySettingInvalid`. `serviceName` is used unless
 * `OTEL_SERVICE_NAME` (or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) names the service.
 */
export const layer = (serviceName: string): Layer.Layer<never, TelemetrySettingInvalid> =>
  Layer.unwrap(Effect.flatMap(otlpSettings(serviceName), Option.match({
    onNone: () => Effect.succeed(Layer.empty),
    onSome: (settings) =>
      Effect.map(Effect.promise(() => import("./otlpExporters.ts")), (exporters) => exporters.exportersLayer(settings))
  })))
