import { Effect, Schema } from "effect"
import * as fs from "node:fs"
import { decodeConfig, type QuiesceConfig } from "../../domain/config.ts"

/** The configuration is invalid; the message names the file and the path of the problem. */
export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", {
  message: Schema.String
}) {}

/** Values from flags and the environment, in the file's own shape; they win over the file. */
export interface ConfigOverrides {
  readonly idlePeriod?: string | undefined
  readonly sweepInterval?: string | undefined
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
  const merged = {
    ...raw,
    agents: isRecord(agents)
      ? { ...agents, ...withoutUndefined({ idlePeriod: overrides.idlePeriod, sweepInterval: overrides.sweepInterval }) }
      : agents,
    daemon: isRecord(daemon) ? { ...daemon, ...withoutUndefined({ port: overrides.port, host: overrides.host }) } : daemon
  }
  return yield* decodeConfig(merged).pipe(
    Effect.mapError((error) => new ConfigInvalid({ message: `${configFile} (with flags): ${error.message}` }))
  )
})

export type { QuiesceConfig }
