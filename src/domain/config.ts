import { Duration, Effect, Schema } from "effect"
import { ByteSize } from "./byteSize.ts"
import { formatGoDuration, GoDuration } from "./goDuration.ts"
import { defaultTurnRetention } from "./turn.ts"
import { WarmReserveSize } from "./warmReserve.ts"

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

const byteSize = (description: string) =>
  Schema.optionalKey(ByteSize.pipe(Schema.annotate({ description: `${description} e.g. "4GiB", "512MiB".` })))

/**
 * `agents.memory`: a memory budget the resident runtimes stay under (docs/collector.md). When a
 * watermark is crossed the collector releases the safest runtimes, least recently active first.
 */
export const MemoryBudgetConfig = Schema.Struct({
  high: byteSize(
    "Start releasing when the resident runtimes' total RSS reaches this (with `low`)."
  ),
  low: byteSize("Release until the resident runtimes' total RSS is at most this (with `high`, below it)."),
  minAvailable: byteSize(
    "Start releasing when the host's available memory falls below this: MemAvailable, and inside a cgroup v2 memory.max - memory.current, whichever is smaller; release until it is a quarter above it."
  ),
  minIdle: duration("2m", "Under memory pressure, the idle period shrinks to this; nothing else is relaxed."),
  sampleInterval: duration("5s", "How often the memory budget is sampled.")
}).check(Schema.makeFilter((memory) =>
  (memory.high === undefined) === (memory.low === undefined)
    ? memory.high === undefined || memory.low === undefined || memory.low < memory.high ||
      "agents.memory.low must be below agents.memory.high"
    : "agents.memory.high and agents.memory.low go together: set both, or neither"
))
export type MemoryBudgetConfig = typeof MemoryBudgetConfig.Type

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
  ),
  memory: Schema.optionalKey(MemoryBudgetConfig.pipe(Schema.annotate({
    description:
      "A memory budget: under pressure the collector releases runtimes that are safe right now, least recently active first. Off by default."
  }))),
  maxResident: Schema.optionalKey(PositiveInt.pipe(Schema.annotate({
    description:
      "At most this many resident runtimes: beyond it the collector releases the safe ones, least recently active first, as under memory pressure. Off by default."
  }))),
  turnRetention: duration(
    defaultTurnRetention,
    "How long ended turns stay in the journal: a prompt repeating an older clientMessageId starts a new turn (at most 1000 ended turns are kept per agent)."
  )
})

/** The largest request body the HTTP API reads by default: 1 MiB. */
export const defaultMaxRequestBytes = 1_048_576

/** `daemon` in `<home>/config.json`: where the HTTP API listens, and what it accepts. */
export const DaemonConfig = Schema.Struct({
  port: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 65535 })).pipe(
    Schema.annotate({
      description: "TCP port of the HTTP API; 0 takes any free port (daemon.json records which). Default 7377."
    }),
    Schema.withDecodingDefaultKey(Effect.succeed(7377))
  ),
  host: Schema.String.pipe(
    Schema.annotate({ description: "Address to listen on. Default 127.0.0.1 (loopback)." }),
    Schema.withDecodingDefaultKey(Effect.succeed("127.0.0.1"))
  ),
  maxRequestBytes: PositiveInt.pipe(
    Schema.annotate({
      description:
        `The largest request body the HTTP API reads, in bytes; a larger one is answered 413. Default ${defaultMaxRequestBytes} (1 MiB).`
    }),
    Schema.withDecodingDefaultKey(Effect.succeed(defaultMaxRequestBytes))
  ),
  idleTimeout: Schema.optionalKey(GoDuration.pipe(Schema.annotate({
    description:
      "Retire the daemon after this long of proven inactivity (every agent stays resumable), e.g. \"1h\". \"0s\" disables the timer; omitted, a daemon run directly has none. The flag --daemon-idle-timeout wins over it."
  })))
})

const launchFields = (command: string | undefined) => ({
  command: command === undefined
    ? Schema.NonEmptyString.pipe(Schema.annotate({ description: "The executable (a path, or a name looked up on PATH)." }))
    : Schema.NonEmptyString.pipe(
      Schema.annotate({ description: `The executable (a path, or a name looked up on PATH). Default "${command}".` }),
      Schema.withDecodingDefaultKey(Effect.succeed(command))
    ),
  args: Schema.optionalKey(Schema.Array(Schema.String).pipe(
    Schema.annotate({
      description:
        "The whole argument list, replacing the adapter's default (which selects the CLI's protocol mode, e.g. [\"app-server\"] for Codex)."
    })
  )),
  env: Schema.Record(Schema.String, Schema.String).pipe(
    Schema.annotate({ description: "Variables added to the daemon's environment for the runtime's processes." }),
    Schema.withDecodingDefaultKey(Effect.succeed({}))
  ),
  closeGrace: Schema.optionalKey(PositiveGoDuration.pipe(Schema.annotate({
    description: "How long a closing runtime gets after SIGTERM before its process groups are killed, e.g. \"5s\". Default \"2s\"."
  }))),
  requestTimeout: Schema.optionalKey(PositiveGoDuration.pipe(Schema.annotate({
    description: "How long one request to the runtime may wait for its answer, e.g. \"1m\". Default \"30s\"."
  })))
})

const nativeProvider = <K extends string>(kind: K, command: string, description: string) =>
  Schema.Struct({ kind: Schema.Literal(kind), ...launchFields(command) }).pipe(Schema.annotate({ description }))

/** Only for providers whose process can take its session after it started (H4). */
const warmReserveField = {
  warmReserve: Schema.optionalKey(WarmReserveSize.pipe(Schema.annotate({
    description:
      "How many started processes without a session to keep ready, so creating or resuming an agent binds one instead of starting a process. Default 0. Live: `quiesce warm-reserve` or `quiesce config reload` changes it."
  })))
}

/**
 * One entry of `providers`: which adapter serves the provider id, and how it launches its runtimes.
 * Native adapters know their CLI's protocol; `acp` and `plugin` run any agent speaking ACP or the
 * plugin protocol.
 */
export const ProviderConfig = Schema.Union([
  Schema.Struct({ kind: Schema.Literal("shell"), ...warmReserveField }).pipe(
    Schema.annotate({ description: "The reference shell provider that ships with Quiesce: prompts are shell commands." })
  ),
  nativeProvider("claude", "claude", "Claude Code, over stream-json on stdio."),
  Schema.Struct({ kind: Schema.Literal("codex"), ...launchFields("codex"), ...warmReserveField }).pipe(
    Schema.annotate({ description: "Codex, through `codex app-server` (JSON-RPC on stdio)." })
  ),
  Schema.Struct({
    kind: Schema.Literal("opencode"),
    ...launchFields("opencode"),
    startTimeout: Schema.optionalKey(PositiveGoDuration.pipe(Schema.annotate({
      description: "How long a starting server may take to answer its health check. Default \"60s\"."
    }))),
    trustMissingInventories: Schema.Boolean.pipe(
      Schema.annotate({
        description:
          "Treat the inventories this OpenCode release does not serve (session inbox, shell list) as empty instead of unknown. Without it an OpenCode runtime is never released. Default false."
      }),
      Schema.withDecodingDefaultKey(Effect.succeed(false))
    )
  }).pipe(Schema.annotate({ description: "OpenCode, through `opencode serve` (HTTP on loopback), one server per runtime." })),
  nativeProvider("pi", "pi", "Pi, through `pi --mode rpc` (JSON lines on stdio)."),
  nativeProvider("omp", "omp", "Oh My Pi, through `omp --mode rpc` (JSON lines on stdio)."),
  Schema.Struct({ kind: Schema.Literal("acp"), ...launchFields(undefined), ...warmReserveField }).pipe(
    Schema.annotate({ description: "Any agent speaking the Agent Client Protocol on stdio." })
  ),
  Schema.Struct({ kind: Schema.Literal("plugin"), ...launchFields(undefined), ...warmReserveField }).pipe(
    Schema.annotate({ description: "Any process speaking the Quiesce plugin protocol (docs/plugin-protocol.md)." })
  )
])
export type ProviderConfig = typeof ProviderConfig.Type

const providerId = /^[a-z][a-z0-9-]{0,63}$/

/** Provider ids are checked on the record, so the JSON Schema keeps the entries' schema. */
const Providers = Schema.Record(Schema.String, ProviderConfig).check(
  Schema.makeFilter((providers) => {
    const bad = Object.keys(providers).find((id) => !providerId.test(id))
    return bad === undefined || `provider id "${bad}" must be lower-case letters, digits and dashes, starting with a letter`
  })
)

/**
 * `cluster` in `<home>/config.json` (X6): this daemon is one runner of a cluster whose runners
 * share one PostgreSQL database. Without it the daemon is alone, on its SQLite file.
 */
export const ClusterConfig = Schema.Struct({
  storage: Schema.Struct({
    kind: Schema.Literal("postgres"),
    url: Schema.String.check(Schema.isPattern(/^postgres(ql)?:\/\/./)).pipe(Schema.annotate({
      description:
        "The shared database, e.g. \"postgres://quiesce@db.internal:5432/quiesce\". Agent records, turns and finish subscriptions live there, beside the cluster's own tables."
    }))
  }).pipe(Schema.annotate({ description: "Where the runners keep what they share." })),
  runner: Schema.Struct({
    host: Schema.NonEmptyString.pipe(Schema.annotate({ description: "The address the other runners reach this one at." })),
    port: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 65535 })).pipe(
      Schema.annotate({ description: "The port this runner serves the other runners on (not the HTTP API's)." })
    )
  }),
  group: Schema.String.check(Schema.isPattern(/^[a-z][a-z0-9]{0,31}$/)).pipe(
    Schema.annotate({
      description:
        "The shard group this runner hosts: the agents created through it belong to it, and only runners of the same group host them (pin a group to the machines that have its working directories and session files). Lower-case letters and digits. Default \"default\"."
    }),
    Schema.withDecodingDefaultKey(Effect.succeed("default"))
  ),
  groups: Schema.Array(Schema.String.check(Schema.isPattern(/^[a-z][a-z0-9]{0,31}$/))).pipe(
    Schema.annotate({ description: "Every shard group of the cluster; the same list on every runner. Default [\"default\"]." }),
    Schema.withDecodingDefaultKey(Effect.succeed(["default"]))
  ),
  shardsPerGroup: PositiveInt.pipe(
    Schema.annotate({ description: "Shards the agents are spread over; every runner must say the same. Default 300." }),
    Schema.withDecodingDefaultKey(Effect.succeed(300))
  ),
  shardLockExpiration: Schema.optionalKey(PositiveGoDuration.pipe(Schema.annotate({
    description: "How long a runner that died keeps its agents' shards before another runner takes them, e.g. \"35s\" (the default)."
  }))),
  shardLockRefreshInterval: Schema.optionalKey(PositiveGoDuration.pipe(Schema.annotate({
    description: "How often a runner renews its shard locks, well below the expiration. Default \"10s\"."
  }))),
  pluginHome: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^\//)).pipe(Schema.annotate({
    description:
      "An absolute path: the folder the shell and plugin providers keep their sessions in, instead of the home's plugins/ (created, private to the user, if missing). Runners that share it (on one machine, or on a shared file system) can resume each other's agents of those providers."
  })))
}).check(Schema.makeFilter((cluster) =>
  cluster.groups.includes(cluster.group) || `cluster.group "${cluster.group}" must be one of cluster.groups (${cluster.groups.join(", ")})`
)).pipe(Schema.annotate({ title: "Cluster runner", description: "This daemon is one runner of a cluster on one PostgreSQL database (docs/cluster.md)." }))
export type ClusterConfig = typeof ClusterConfig.Type

/** The whole configuration file. Unknown keys are errors, so a typo never goes unnoticed. */
export const QuiesceConfig = Schema.Struct({
  $schema: Schema.optionalKey(Schema.String.pipe(Schema.annotate({ description: "The JSON Schema this file follows, for editors." }))),
  agents: AgentsConfig.pipe(Schema.withDecodingDefaultKey(Effect.succeed({}))),
  daemon: DaemonConfig.pipe(Schema.withDecodingDefaultKey(Effect.succeed({}))),
  cluster: Schema.optionalKey(ClusterConfig),
  providers: Providers.pipe(
    Schema.annotate({
      description:
        "The providers agents can name, by id. Default: only the reference `shell` provider. When given, exactly these are served."
    }),
    Schema.withDecodingDefaultKey(Effect.succeed({ shell: { kind: "shell" as const } }))
  )
}).pipe(Schema.annotate({ title: "Quiesce configuration" }))
export type QuiesceConfig = typeof QuiesceConfig.Type

/** A duration the way a person would write it in the file: "1h", "1h30m", "10s" (not "1h0m0s"). */
const shortDuration = (duration: Duration.Duration) => formatGoDuration(duration).replace(/(?<=[hm])0m0s$|(?<=[hm])0s$/, "")

/** A decoded value as `path value` pairs: objects by their dotted paths, durations as written in the file. */
const settingsOf = (prefix: string, value: unknown): Array<readonly [string, string]> =>
  Duration.isDuration(value)
    ? [[prefix, shortDuration(value)]]
    : Array.isArray(value)
    ? [[prefix, value.map(String).join(", ")]]
    : typeof value === "object" && value !== null
    ? Object.entries(value).flatMap(([key, inner]) => settingsOf(prefix === "" ? key : `${prefix}.${key}`, inner))
    : [[prefix, String(value)]]

/**
 * What a decoded configuration amounts to, for people: every setting it has (the file's, else the
 * default) as `path value` pairs, and the optional settings it leaves unset, which are off.
 */
export const describeConfig = (config: QuiesceConfig) => {
  const { $schema: _, ...rest } = config
  const sections = { agents: AgentsConfig.fields, daemon: DaemonConfig.fields } as const
  const unset = [
    ...Object.keys(QuiesceConfig.fields).filter((key) => key !== "$schema" && !(key in config)),
    ...Object.entries(sections).flatMap(([section, fields]) =>
      Object.keys(fields).filter((key) => !(key in config[section as keyof typeof sections])).map((key) => `${section}.${key}`)
    )
  ]
  return { settings: settingsOf("", rest), unset }
}

/** The close grace of a provider entry that sets none (every adapter's default). */
export const defaultCloseGrace = Duration.seconds(2)

/** The kinds whose process can take its session after it started, so they can keep a warm reserve (H4). */
export const warmReserveKinds: ReadonlyArray<ProviderConfig["kind"]> = ["shell", "plugin", "codex", "acp"]

/** Whether the provider entry's kind can keep a warm reserve. */
export const keepsWarmReserve = (entry: ProviderConfig): boolean => warmReserveKinds.includes(entry.kind)

/** Each provider's configured warm reserve, for the ones that keep one. */
export const warmReserveTargets = (config: QuiesceConfig): Record<string, number> =>
  Object.fromEntries(Object.entries(config.providers).flatMap(([id, entry]) =>
    "warmReserve" in entry && entry.warmReserve !== undefined ? [[id, entry.warmReserve]] : []
  ))

/** The longest close grace any configured provider gives its runtimes: what a shutdown's deadline is derived from (H3). */
export const largestCloseGrace = (config: QuiesceConfig): Duration.Duration =>
  Object.values(config.providers).reduce(
    (largest, entry) => Duration.max(largest, "closeGrace" in entry && entry.closeGrace !== undefined ? entry.closeGrace : defaultCloseGrace),
    defaultCloseGrace
  )

const strict = { onExcessProperty: "error" } as const

/** Decodes configuration JSON text; the error message names the path of the problem. */
export const decodeConfigJson = Schema.decodeUnknownEffect(Schema.fromJsonString(QuiesceConfig), strict)
/** Decodes an already parsed configuration object, with the same defaults and strictness as `decodeConfigJson`. */
export const decodeConfig = Schema.decodeUnknownEffect(QuiesceConfig, strict)

/** Objects in the configuration accept no other keys, as decoding does. */
const closeObjects = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(closeObjects)
  if (typeof node !== "object" || node === null) return node
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(node)) out[key] = closeObjects(value)
  // Structs come out open (`true`); records carry their entries' schema there and stay as they are.
  if (out["type"] === "object" && out["additionalProperties"] === true) out["additionalProperties"] = false
  return out
}

/** The JSON Schema of a strictly decoded file's Schema (its objects closed, as decoding is). */
export const closedJsonSchema = (schema: Schema.Top): unknown => {
  const document = Schema.toJsonSchemaDocument(schema)
  return closeObjects({ $schema: "https://json-schema.org/draft/2020-12/schema", ...document.schema, $defs: document.definitions })
}

/** The JSON Schema of the configuration file, generated from the same Schema. */
export const configJsonSchema = (): unknown => closedJsonSchema(QuiesceConfig)

// ---- reload -------------------------------------------------------------------------------------

/** What `quiesce config reload` applied, and what takes a restart. */
export const ConfigReloaded = Schema.Struct({
  /** Each provider whose warm reserve was set, and to what. */
  applied: Schema.Array(Schema.Struct({ provider: Schema.String, warmReserve: Schema.Number })),
  /** Configuration paths that differ from the running daemon's and take a restart (`daemon.port`, `providers.codex`). */
  needsRestart: Schema.Array(Schema.String)
})
export type ConfigReloaded = typeof ConfigReloaded.Type

/** The reload could not be applied: the file is invalid, or a reserve refused its size. Nothing changed. */
export class ConfigReloadFailed extends Schema.TaggedError<ConfigReloadFailed>()("ConfigReloadFailed", {
  message: Schema.String
}) {}
