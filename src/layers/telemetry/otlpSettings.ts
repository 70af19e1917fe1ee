/**
 * The OpenTelemetry settings of a daemon or a hub, read from the standard `OTEL_*` environment
 * variables through effect's `Config`. Export is off unless an endpoint is set; a value that is set
 * but malformed is a typed error naming the variable, so a typo never silently turns tracing off.
 */
import { Config, Effect, Option, Schema } from "effect"
import { alwaysOn, type TraceSampler } from "./sampler.ts"

/** One signal's destination: the full URL its batches are posted to. */
export interface OtlpSignals {
  readonly traces: string | undefined
  readonly logs: string | undefined
  readonly metrics: string | undefined
}

/** What to export and where, once an endpoint is set. */
export interface OtlpSettings {
  readonly signals: OtlpSignals
  readonly serviceName: string
  readonly attributes: Readonly<Record<string, string>>
  readonly headers: Readonly<Record<string, string>>
  /** `http/json` (the default here) or `http/protobuf`. */
  readonly protocol: "http/json" | "http/protobuf"
  readonly tracesInterval: number | undefined
  readonly logsInterval: number | undefined
  readonly metricsInterval: number | undefined
  /** Which traces are exported (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`). */
  readonly sampler: TraceSampler
}

/** An `OTEL_*` variable is set to a value that cannot be used; the daemon or hub does not start. */
export class TelemetrySettingInvalid extends Schema.TaggedError<TelemetrySettingInvalid>()("TelemetrySettingInvalid", {
  variable: Schema.String,
  message: Schema.String
}) {}

const invalid = (variable: string, problem: string) =>
  new TelemetrySettingInvalid({ variable, message: `${variable} ${problem}` })

/** A variable's value, unset when absent or blank (as the OpenTelemetry specification reads an empty value). */
const variable = (name: string) =>
  Config.option(Config.String(name)).pipe(
    Effect.map(Option.map((value) => value.trim())),
    Effect.map(Option.filter((value) => value !== "")),
    Effect.mapError((error) => invalid(name, `cannot be read: ${error.message}`))
  )

const httpUrl = (name: string, value: string) =>
  Effect.suspend(() => {
    if (!URL.canParse(value)) return Effect.fail(invalid(name, `is not a URL: "${value}"`))
    const url = new URL(value)
    return url.protocol === "http:" || url.protocol === "https:"
      ? Effect.succeed(url)
      : Effect.fail(invalid(name, `must be an http:// or https:// URL, not "${value}"`))
  })

/** `key1=value1,key2=value2` with percent-encoded keys and values (resource attributes, headers). */
const parseKeyValues = (name: string, value: string): Effect.Effect<Record<string, string>, TelemetrySettingInvalid> =>
  Effect.suspend(() => {
    const pairs: Record<string, string> = {}
    for (const entry of value.split(",")) {
      if (entry.trim() === "") continue
      const equals = entry.indexOf("=")
      const key = equals < 0 ? "" : entry.slice(0, equals).trim()
      if (key === "") return Effect.fail(invalid(name, `has an entry without key=value: "${entry.trim()}"`))
      try {
        pairs[decodeURIComponent(key)] = decodeURIComponent(entry.slice(equals + 1).trim())
      } catch {
        return Effect.fail(invalid(name, `has malformed percent-encoding in "${entry.trim()}"`))
      }
    }
    return Effect.succeed(pairs)
  })

const milliseconds = (name: string) =>
  variable(name).pipe(Effect.flatMap(Option.match({
    onNone: () => Effect.succeed(undefined),
    onSome: (value) =>
      /^\d+$/.test(value) && Number(value) > 0
        ? Effect.succeed(Number(value))
        : Effect.fail(invalid(name, `must be a positive number of milliseconds, not "${value}"`))
  })))

/** Whether a signal is exported: `OTEL_<SIGNAL>_EXPORTER` is `otlp` (the default) or `none`. */
const signalExported = (signal: "traces" | "logs" | "metrics") => {
  const name = `OTEL_${signal.toUpperCase()}_EXPORTER`
  return variable(name).pipe(Effect.flatMap(Option.match({
    onNone: () => Effect.succeed(true),
    onSome: (value) =>
      value === "otlp" ? Effect.succeed(true)
      : value === "none" ? Effect.succeed(false)
      : Effect.fail(invalid(name, `must be otlp or none (the only exporters here), not "${value}"`))
  })))
}

const samplers: Readonly<Record<string, (ratio: number) => TraceSampler>> = {
  always_on: () => ({ ratio: 1, parentBased: false }),
  always_off: () => ({ ratio: 0, parentBased: false }),
  traceidratio: (ratio) => ({ ratio, parentBased: false }),
  parentbased_always_on: () => alwaysOn,
  parentbased_always_off: () => ({ ratio: 0, parentBased: true }),
  parentbased_traceidratio: (ratio) => ({ ratio, parentBased: true })
}

/** The trace sampler: `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`), its ratio in `OTEL_TRACES_SAMPLER_ARG` (default 1). */
const traceSampler = Effect.gen(function*() {
  const name = yield* variable("OTEL_TRACES_SAMPLER")
  const arg = yield* variable("OTEL_TRACES_SAMPLER_ARG")
  const ratio = Option.isNone(arg) ? 1 : Number(arg.value)
  if (Option.isSome(arg) && !(/^\d*\.?\d+(e-?\d+)?$/i.test(arg.value) && ratio >= 0 && ratio <= 1)) {
    return yield* invalid("OTEL_TRACES_SAMPLER_ARG", `must be a ratio from 0 to 1, not "${arg.value}"`)
  }
  if (Option.isNone(name)) return alwaysOn
  const make = samplers[name.value]
  if (make === undefined) {
    return yield* invalid("OTEL_TRACES_SAMPLER", `must be one of ${Object.keys(samplers).join(", ")}, not "${name.value}"`)
  }
  return make(ratio)
})

/** A signal's URL: its own variable as given, or `/v1/<signal>` below the shared endpoint; none when its exporter is `none`. */
const signalUrl = (signal: "traces" | "logs" | "metrics", base: URL | undefined) => {
  const name = `OTEL_EXPORTER_OTLP_${signal.toUpperCase()}_ENDPOINT`
  return Effect.flatMap(signalExported(signal), (exported) => !exported ? Effect.succeed(undefined) : variable(name).pipe(Effect.flatMap(Option.match({
    onSome: (value) => Effect.map(httpUrl(name, value), (url) => url.toString()),
    onNone: () => {
      if (base === undefined) return Effect.succeed(undefined)
      const url = new URL(base)
      url.pathname = `${url.pathname.replace(/\/$/, "")}/v1/${signal}`
      return Effect.succeed(url.toString())
    }
  }))))
}

const optionalKeyValues = (name: string): Effect.Effect<Record<string, string>, TelemetrySettingInvalid> =>
  variable(name).pipe(Effect.flatMap(Option.match({
    onNone: () => Effect.succeed({}),
    onSome: (value) => parseKeyValues(name, value)
  })))

/**
 * The settings from the environment, or none when no endpoint is set (or `OTEL_SDK_DISABLED` is
 * `true`): then nothing is exported and no exporter runs.
 */
export const otlpSettings = Effect.fn("otlpSettings")(function*(defaultServiceName: string) {
  const disabled = yield* variable("OTEL_SDK_DISABLED")
  if (Option.exists(disabled, (value) => value.toLowerCase() === "true")) return Option.none<OtlpSettings>()
  const base = yield* variable("OTEL_EXPORTER_OTLP_ENDPOINT").pipe(Effect.flatMap(Option.match({
    onNone: () => Effect.succeed(undefined),
    onSome: (value) => httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT", value)
  })))
  const signals: OtlpSignals = {
    traces: yield* signalUrl("traces", base),
    logs: yield* signalUrl("logs", base),
    metrics: yield* signalUrl("metrics", base)
  }
  if (signals.traces === undefined && signals.logs === undefined && signals.metrics === undefined) {
    return Option.none<OtlpSettings>()
  }
  const protocol = yield* variable("OTEL_EXPORTER_OTLP_PROTOCOL").pipe(Effect.flatMap(Option.match({
    onNone: () => Effect.succeed<OtlpSettings["protocol"]>("http/json"),
    onSome: (value): Effect.Effect<OtlpSettings["protocol"], TelemetrySettingInvalid> =>
      value === "http/json" || value === "http/protobuf"
        ? Effect.succeed(value)
        : Effect.fail(invalid("OTEL_EXPORTER_OTLP_PROTOCOL", `must be http/json or http/protobuf, not "${value}"`))
  })))
  const attributes = yield* optionalKeyValues("OTEL_RESOURCE_ATTRIBUTES")
  const serviceName = Option.getOrElse(yield* variable("OTEL_SERVICE_NAME"), () => attributes["service.name"] ?? defaultServiceName)
  const { ["service.name"]: _named, ...rest } = attributes
  return Option.some<OtlpSettings>({
    signals,
    serviceName,
    attributes: rest,
    headers: yield* optionalKeyValues("OTEL_EXPORTER_OTLP_HEADERS"),
    protocol,
    tracesInterval: yield* milliseconds("OTEL_BSP_SCHEDULE_DELAY"),
    logsInterval: yield* milliseconds("OTEL_BLRP_SCHEDULE_DELAY"),
    metricsInterval: yield* milliseconds("OTEL_METRIC_EXPORT_INTERVAL"),
    sampler: yield* traceSampler
  })
})
