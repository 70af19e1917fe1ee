import { Effect, Schema } from "effect"
import { GoDuration } from "./goDuration.ts"

const duration = (fallback: string, description: string) =>
  GoDuration.pipe(Schema.withDecodingDefaultKey(Effect.succeed(fallback)), Schema.annotate({ description }))

const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))

/** `agents` in `<home>/config.json`: how idle runtimes are collected. */
export const AgentsConfig = Schema.Struct({
  idleRuntimeCleanup: Schema.Boolean.pipe(
    Schema.withDecodingDefaultKey(Effect.succeed(true)),
    Schema.annotate({ description: "Release idle runtimes at all; read at startup (C3)." })
  ),
  idlePeriod: duration("1h", "How long a runtime must stay idle before it is released, e.g. \"1h\", \"30m\"."),
  sweepInterval: duration("1m", "How often idle runtimes are swept."),
  probeTimeout: duration("10s", "How long a provider's safety probe may take."),
  probeConcurrency: PositiveInt.pipe(
    Schema.withDecodingDefaultKey(Effect.succeed(16)),
    Schema.annotate({ description: "How many families are probed at once." })
  )
})

/** `daemon` in `<home>/config.json`: where the HTTP API listens. */
export const DaemonConfig = Schema.Struct({
  port: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 65535 })).pipe(
    Schema.withDecodingDefaultKey(Effect.succeed(7377)),
    Schema.annotate({ description: "TCP port of the HTTP API." })
  ),
  host: Schema.String.pipe(
    Schema.withDecodingDefaultKey(Effect.succeed("127.0.0.1")),
    Schema.annotate({ description: "Address to listen on; loopback unless set." })
  )
})

/** The whole configuration file. Unknown keys are errors, so a typo never goes unnoticed. */
export const QuiesceConfig = Schema.Struct({
  agents: AgentsConfig.pipe(Schema.withDecodingDefaultKey(Effect.succeed({}))),
  daemon: DaemonConfig.pipe(Schema.withDecodingDefaultKey(Effect.succeed({})))
}).pipe(Schema.annotate({ title: "Quiesce configuration" }))
export type QuiesceConfig = typeof QuiesceConfig.Type

const strict = { onExcessProperty: "error" } as const

/** Decodes configuration JSON text; the error message names the path of the problem. */
export const decodeConfigJson = Schema.decodeUnknownEffect(Schema.fromJsonString(QuiesceConfig), strict)
export const decodeConfig = Schema.decodeUnknownEffect(QuiesceConfig, strict)

/** The JSON Schema of the configuration file, generated from the same Schema. */
export const configJsonSchema = () => Schema.toJsonSchemaDocument(QuiesceConfig)
