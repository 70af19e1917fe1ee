import { Duration, Effect, Schema } from "effect"
import { GoDuration } from "./goDuration.ts"

/** A duration that must be more than zero (to turn collection off, use `idleRuntimeCleanup: false`). */
const PositiveGoDuration = GoDuration.check(
  Schema.makeFilter((duration: Duration.Duration) =>
    Duration.toMillis(duration) > 0 || "must be greater than zero (set idleRuntimeCleanup to false to disable)"
  )
)

const duration = (fallback: string, description: string) =>
  PositiveGoDuration.pipe(
    Schema.annotate({ description: `${description} Go-style, e.g. "1h", "30m", "10s". Default "${fallback}".` }),
    Schema.withDecodingDefaultKey(Effect.succeed(fallback))
  )

const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))

/** `agents` in `<home>/config.json`: how idle runtimes are collected. */
export const AgentsConfig = Schema.Struct({
  idleRuntimeCleanup: Schema.Boolean.pipe(
    Schema.annotate({ description: "Release idle runtimes at all; read at startup. Default true." }),
    Schema.withDecodingDefaultKey(Effect.succeed(true))
  ),
  idlePeriod: duration("1h", "How long a runtime must stay idle before it is released, e.g. \"1h\", \"30m\"."),
  sweepInterval: duration("1m", "How often idle runtimes are swept."),
  probeTimeout: duration("10s", "How long a provider's safety probe may take."),
  probeConcurrency: PositiveInt.pipe(
    Schema.annotate({ description: "How many families are probed at once. Default 16." }),
    Schema.withDecodingDefaultKey(Effect.succeed(16))
  )
})

/** `daemon` in `<home>/config.json`: where the HTTP API listens. */
export const DaemonConfig = Schema.Struct({
  port: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 65535 })).pipe(
    Schema.annotate({ description: "TCP port of the HTTP API. Default 7377." }),
    Schema.withDecodingDefaultKey(Effect.succeed(7377))
  ),
  host: Schema.String.pipe(
    Schema.annotate({ description: "Address to listen on. Default 127.0.0.1 (loopback)." }),
    Schema.withDecodingDefaultKey(Effect.succeed("127.0.0.1"))
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

/** Objects in the configuration accept no other keys, as decoding does. */
const closeObjects = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(closeObjects)
  if (typeof node !== "object" || node === null) return node
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(node)) out[key] = closeObjects(value)
  if (out["type"] === "object" && "additionalProperties" in out) out["additionalProperties"] = false
  return out
}

/** The JSON Schema of the configuration file, generated from the same Schema. */
export const configJsonSchema = (): unknown => {
  const document = Schema.toJsonSchemaDocument(QuiesceConfig)
  return closeObjects({ $schema: "https://json-schema.org/draft/2020-12/schema", ...document.schema, $defs: document.definitions })
}
