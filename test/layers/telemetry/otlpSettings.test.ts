import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer, Logger, Option, Tracer } from "effect"
import * as OtlpExport from "../../../src/layers/telemetry/OtlpExport.ts"
import { otlpSettings } from "../../../src/layers/telemetry/otlpSettings.ts"

/** The settings as a daemon reads them from exactly `env`. */
const settingsOf = (env: Record<string, string>) =>
  otlpSettings("quiesce-daemon").pipe(
    Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))
  )

const failureOf = (env: Record<string, string>) => Effect.flip(settingsOf(env))

describe("otlpSettings", () => {
  it.effect("is off with no endpoint, a blank one, or the SDK disabled", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* settingsOf({})))
      assert.isTrue(Option.isNone(yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "  " })))
      assert.isTrue(Option.isNone(yield* settingsOf({ OTEL_SERVICE_NAME: "named", OTEL_RESOURCE_ATTRIBUTES: "a=b" })))
      assert.isTrue(Option.isNone(yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SDK_DISABLED: "true" })))
    }))

  it.effect("sends each signal to /v1/<signal> below the endpoint, as JSON, named quiesce-daemon by default", () =>
    Effect.gen(function*() {
      const settings = Option.getOrThrow(yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318/base/" }))
      assert.deepStrictEqual(settings.signals, {
        traces: "http://127.0.0.1:4318/base/v1/traces",
        logs: "http://127.0.0.1:4318/base/v1/logs",
        metrics: "http://127.0.0.1:4318/base/v1/metrics"
      })
      assert.strictEqual(settings.protocol, "http/json")
      assert.strictEqual(settings.serviceName, "quiesce-daemon")
      assert.deepStrictEqual(settings.attributes, {})
      assert.deepStrictEqual(settings.headers, {})
    }))

  it.effect("a signal's own endpoint is used as given; alone it exports that signal only", () =>
    Effect.gen(function*() {
      const both = Option.getOrThrow(yield* settingsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example/otlp"
      }))
      assert.strictEqual(both.signals.traces, "https://traces.example/otlp")
      assert.strictEqual(both.signals.logs, "http://127.0.0.1:4318/v1/logs")
      const alone = Option.getOrThrow(yield* settingsOf({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://127.0.0.1:9/m" }))
      assert.deepStrictEqual(alone.signals, { traces: undefined, logs: undefined, metrics: "http://127.0.0.1:9/m" })
    }))

  it.effect("reads the service name, resource attributes, headers, protocol and intervals", () =>
    Effect.gen(function*() {
      const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }
      const settings = Option.getOrThrow(yield* settingsOf({
        ...base,
        OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attributes, deployment.environment=prod,team=a%2Cb",
        OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20abc",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_BSP_SCHEDULE_DELAY: "200"
      }))
      assert.strictEqual(settings.serviceName, "from-attributes")
      assert.deepStrictEqual(settings.attributes, { "deployment.environment": "prod", team: "a,b" })
      assert.deepStrictEqual(settings.headers, { authorization: "Bearer abc" })
      assert.strictEqual(settings.protocol, "http/protobuf")
      assert.strictEqual(settings.tracesInterval, 200)
      assert.strictEqual(settings.metricsInterval, undefined)
      const named = Option.getOrThrow(yield* settingsOf({
        ...base,
        OTEL_SERVICE_NAME: "my-daemon",
        OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attributes"
      }))
      assert.strictEqual(named.serviceName, "my-daemon")
    }))

  it.effect("a malformed value is a typed error naming the variable", () =>
    Effect.gen(function*() {
      const notUrl = yield* failureOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" })
      assert.strictEqual(notUrl._tag, "TelemetrySettingInvalid")
      assert.strictEqual(notUrl.variable, "OTEL_EXPORTER_OTLP_ENDPOINT")
      assert.match(notUrl.message, /^OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL, not "localhost:4318"/)
      const garbage = yield* failureOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" })
      assert.match(garbage.message, /is not a URL: "not a url"/)
      const traces = yield* failureOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "::" })
      assert.strictEqual(traces.variable, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
      const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }
      assert.strictEqual((yield* failureOf({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).variable, "OTEL_EXPORTER_OTLP_PROTOCOL")
      assert.match((yield* failureOf({ ...base, OTEL_RESOURCE_ATTRIBUTES: "team" })).message, /without key=value: "team"/)
      assert.match((yield* failureOf({ ...base, OTEL_EXPORTER_OTLP_HEADERS: "a=%E0%A4%A" })).message, /malformed percent-encoding/)
      assert.strictEqual((yield* failureOf({ ...base, OTEL_BSP_SCHEDULE_DELAY: "soon" })).variable, "OTEL_BSP_SCHEDULE_DELAY")
      assert.match((yield* failureOf({ ...base, OTEL_LOGS_EXPORTER: "console" })).message, /^OTEL_LOGS_EXPORTER must be otlp or none/)
      assert.match((yield* failureOf({ ...base, OTEL_TRACES_SAMPLER: "sometimes" })).message, /^OTEL_TRACES_SAMPLER must be one of always_on, /)
      for (const ratio of ["1.5", "-0.1", "half", "0.1.2"]) {
        const error = yield* failureOf({ ...base, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: ratio })
        assert.strictEqual(error.variable, "OTEL_TRACES_SAMPLER_ARG", ratio)
      }
    }))

  it.effect("an exporter of none leaves its signal out; with none left, nothing is exported", () =>
    Effect.gen(function*() {
      const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }
      const noLogs = Option.getOrThrow(yield* settingsOf({ ...base, OTEL_LOGS_EXPORTER: "none", OTEL_METRICS_EXPORTER: "otlp" }))
      assert.deepStrictEqual(noLogs.signals, { traces: "http://127.0.0.1:4318/v1/traces", logs: undefined, metrics: "http://127.0.0.1:4318/v1/metrics" })
      const none = { ...base, OTEL_TRACES_EXPORTER: "none", OTEL_LOGS_EXPORTER: "none", OTEL_METRICS_EXPORTER: "none" }
      assert.isTrue(Option.isNone(yield* settingsOf(none)))
    }))

  it.effect("reads the trace sampler: every trace unless a caller did not sample it by default, else the named one", () =>
    Effect.gen(function*() {
      const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }
      const sampler = (env: Record<string, string>) => Effect.map(settingsOf({ ...base, ...env }), (settings) => Option.getOrThrow(settings).sampler)
      assert.deepStrictEqual(yield* sampler({}), { ratio: 1, parentBased: true })
      assert.deepStrictEqual(yield* sampler({ OTEL_TRACES_SAMPLER: "always_off" }), { ratio: 0, parentBased: false })
      assert.deepStrictEqual(yield* sampler({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.25" }), { ratio: 0.25, parentBased: false })
      assert.deepStrictEqual(yield* sampler({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: ".5" }), { ratio: 0.5, parentBased: true })
      assert.deepStrictEqual(yield* sampler({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio" }), { ratio: 1, parentBased: true })
    }))
})

describe("OtlpExport.layer", () => {
  const withEnv = (env: Record<string, string>) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.provideService(effect, ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))

  it.effect("off, it provides nothing: the tracer and loggers stay what they were", () =>
    Effect.gen(function*() {
      const before = { tracer: yield* Effect.tracer, loggers: yield* Logger.CurrentLoggers }
      const context = yield* Layer.build(OtlpExport.layer("quiesce-daemon"))
      assert.strictEqual(Context.getOrUndefined(context, Tracer.Tracer), undefined)
      const inside = yield* Effect.all({ tracer: Effect.tracer, loggers: Logger.CurrentLoggers }).pipe(Effect.provideContext(context))
      assert.strictEqual(inside.tracer, before.tracer)
      assert.strictEqual(inside.loggers, before.loggers)
    }).pipe(Effect.scoped, withEnv({})))

  // Live: closing the exporters flushes them within a real timeout.
  it.live("on, it replaces the tracer and adds a logger beside the others", () =>
    Effect.gen(function*() {
      const before = { tracer: yield* Effect.tracer, loggers: yield* Logger.CurrentLoggers }
      const context = yield* Layer.build(OtlpExport.layer("quiesce-daemon"))
      const inside = yield* Effect.all({ tracer: Effect.tracer, loggers: Logger.CurrentLoggers }).pipe(Effect.provideContext(context))
      assert.notStrictEqual(inside.tracer, before.tracer)
      assert.strictEqual(inside.loggers.size, before.loggers.size + 1)
      for (const logger of before.loggers) assert.isTrue(inside.loggers.has(logger))
    }).pipe(Effect.scoped, withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" })))

  it.effect("a malformed value fails the layer with the typed error", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Layer.build(OtlpExport.layer("quiesce-daemon")))
      assert.strictEqual(error._tag, "TelemetrySettingInvalid")
    }).pipe(Effect.scoped, withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://collector" })))
})
