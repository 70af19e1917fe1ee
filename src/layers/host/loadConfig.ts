import { Duration, Effect, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { decodeConfig, type QuiesceConfig } from "../../domain/config.ts"
import { decodeGoDuration, formatGoDuration } from "../../domain/goDuration.ts"
import type { EffectiveIdleTimeout, IdleTimeoutSource } from "../../domain/retirement.ts"

/** The configuration is invalid; the message names the file and the path of the problem. */
export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", {
  message: Schema.String
}) {}

/** Values from flags and the environment, in the file's own shape; they win over the file. */
export interface ConfigOverrides {
  readonly idlePeriod?: string | undefined
  readonly sweepInterval?: string | undefined
  /** `agents.memory.high`, `.low`, `.minAvailable` (sizes such as "6GiB"), and `agents.maxResident`. */
  readonly memoryHigh?: string | undefined
  readonly memoryLow?: string | undefined
  readonly minAvailable?: string | undefined
  readonly maxResident?: number | undefined
  readonly port?: number | undefined
  readonly host?: string | undefined
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const withoutUndefined = (record: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined))

/**
 * Reads `<home>/config.json` (absent means all defaults), lays the overrides over it and decodes
 * the result with the one configuration Schema, so flags are validated exactly like the file.
 */
export const loadConfig = Effect.fn("loadConfig")(function*(configFile: string, overrides: ConfigOverrides = {}) {
  const raw = yield* Effect.try({
    try: (): unknown => (fs.existsSync(configFile) ? JSON.parse(fs.readFileSync(configFile, "utf8")) : {}),
    catch: (error) =>
      new ConfigInvalid({ message: `${configFile}: ${error instanceof Error ? error.message : String(error)}` })
  })
  if (!isRecord(raw)) return yield* new ConfigInvalid({ message: `${configFile}: expected a JSON object` })
  const agents = isRecord(raw["agents"]) ? raw["agents"] : raw["agents"] === undefined ? {} : raw["agents"]
  const daemon = isRecord(raw["daemon"]) ? raw["daemon"] : raw["daemon"] === undefined ? {} : raw["daemon"]
  const memoryFlags = withoutUndefined({ high: overrides.memoryHigh, low: overrides.memoryLow, minAvailable: overrides.minAvailable })
  const memory = Object.keys(memoryFlags).length === 0
    ? undefined
    : isRecord(agents) && isRecord(agents["memory"])
    ? { ...agents["memory"], ...memoryFlags }
    : memoryFlags
  const merged = {
    ...raw,
    agents: isRecord(agents)
      ? {
        ...agents,
        ...withoutUndefined({
          idlePeriod: overrides.idlePeriod,
          sweepInterval: overrides.sweepInterval,
          memory,
          maxResident: overrides.maxResident
        })
      }
      : agents,
    daemon: isRecord(daemon) ? { ...daemon, ...withoutUndefined({ port: overrides.port, host: overrides.host }) } : daemon
  }
  return yield* decodeConfig(merged).pipe(
    Effect.mapError((error) => new ConfigInvalid({ message: `${configFile} (with flags): ${error.message}` }))
  )
})

export type { QuiesceConfig }

const isExecutable = (file: string) => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return fs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** Where a command runs from: a path as given, or a name looked up on PATH; `undefined` when nowhere. */
export const findExecutable = (command: string): string | undefined =>
  command.includes("/")
    ? (isExecutable(command) ? command : undefined)
    : (process.env["PATH"] ?? "").split(path.delimiter).filter((dir) => dir !== "").map((dir) => path.join(dir, command))
      .find(isExecutable)

/** Each configured provider whose command cannot be found, in words naming its config path. */
export const missingProviderCommands = (config: QuiesceConfig): ReadonlyArray<string> =>
  Object.entries(config.providers).flatMap(([id, provider]) =>
    "command" in provider && findExecutable(provider.command) === undefined
      ? [`providers.${id}.command: "${provider.command}" is not ${provider.command.includes("/") ? "an executable file" : "found on PATH"}`]
      : []
  )

/**
 * The idle timeout the daemon arms (R1): the flag wins over `daemon.idleTimeout`; neither means no
 * timer (a daemon run directly stays resident), and `"0s"` is an explicit "no timer". A malformed
 * or negative flag is refused naming the flag, before anything opens.
 */
export const resolveIdleTimeout = Effect.fn("resolveIdleTimeout")(function*(
  flag: string | undefined,
  config: QuiesceConfig,
  flagSource: "flag" | "hub" = "flag"
) {
  const effective = (duration: Duration.Duration, source: IdleTimeoutSource): EffectiveIdleTimeout => {
    const millis = Duration.toMillis(duration)
    return { value: formatGoDuration(duration), millis: millis === 0 ? null : millis, source }
  }
  if (flag !== undefined) {
    const duration = yield* decodeGoDuration(flag).pipe(
      Effect.mapError((error) => new ConfigInvalid({ message: `--daemon-idle-timeout: ${error.message}` }))
    )
    return effective(duration, flagSource)
  }
  const configured = config.daemon.idleTimeout
  if (configured !== undefined) return effective(configured, "config")
  return { value: null, millis: null, source: "omitted" } satisfies EffectiveIdleTimeout
})
