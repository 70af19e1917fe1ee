/**
 * `quiesce config reload`: reads the configuration file again and applies what can change in a
 * running daemon — each provider's warm reserve — and names every other change, which takes a
 * restart. An invalid file changes nothing.
 */
import { Effect, Equal } from "effect"
import { ConfigReloaded, ConfigReloadFailed, keepsWarmReserve, type QuiesceConfig, warmReserveTargets } from "../../domain/config.ts"
import { type ConfigInvalid, type ConfigOverrides, loadConfig } from "../host/loadConfig.ts"
import { WarmReserve } from "../../services/WarmReserve.ts"

const withoutWarmReserve = (entry: QuiesceConfig["providers"][string]) => {
  if (!("warmReserve" in entry)) return entry
  const { warmReserve: _, ...rest } = entry
  return rest
}


/**
 * Where two configurations differ beyond the warm reserves, as configuration paths; compared
 * structurally (durations by length, records whatever their key order).
 */
export const restartChanges = (running: QuiesceConfig, next: QuiesceConfig): ReadonlyArray<string> => {
  const changes: Array<string> = []
  for (const section of ["agents", "daemon"] as const) {
    const keys = new Set([...Object.keys(running[section]), ...Object.keys(next[section])])
    for (const key of [...keys].sort()) {
      if (!Equal.equals(Reflect.get(running[section], key), Reflect.get(next[section], key))) changes.push(`${section}.${key}`)
    }
  }
  const clusterKeys = new Set([...Object.keys(running.cluster ?? {}), ...Object.keys(next.cluster ?? {})])
  if ((running.cluster === undefined) !== (next.cluster === undefined)) changes.push("cluster")
  else {
    for (const key of [...clusterKeys].sort()) {
      if (!Equal.equals(Reflect.get(running.cluster ?? {}, key), Reflect.get(next.cluster ?? {}, key))) changes.push(`cluster.${key}`)
    }
  }
  const ids = new Set([...Object.keys(running.providers), ...Object.keys(next.providers)])
  for (const id of [...ids].sort()) {
    const before = running.providers[id]
    const after = next.providers[id]
    if (before === undefined || after === undefined || !Equal.equals(withoutWarmReserve(before), withoutWarmReserve(after))) {
      changes.push(`providers.${id}`)
    }
  }
  return changes
}

/**
 * The reload of one daemon: `configFile` read with the flags it started with, compared with the
 * configuration it runs. The reserve of each provider the daemon serves is set to the file's
 * (0 when unset, or when the file no longer has the provider); a provider whose kind changed
 * keeps its reserve until the restart that changes it.
 */
export const makeConfigReload = (configFile: string, overrides: ConfigOverrides, started: QuiesceConfig) =>
  Effect.gen(function*() {
    const reserve = yield* WarmReserve
    return Effect.gen(function*() {
      const next = yield* loadConfig(configFile, overrides).pipe(
        Effect.mapError((error: ConfigInvalid) => new ConfigReloadFailed({ message: error.message }))
      )
      const targets = warmReserveTargets(next)
      const applied: Array<{ provider: string; warmReserve: number }> = []
      for (const [provider, entry] of Object.entries(started.providers)) {
        // Providers the file adds are served only after a restart: nothing to size yet.
        const after = next.providers[provider]
        if (!keepsWarmReserve(entry) || (after !== undefined && after.kind !== entry.kind)) continue
        const target = targets[provider] ?? 0
        yield* reserve.resize(provider, target).pipe(
          Effect.mapError((error) => new ConfigReloadFailed({ message: `providers.${provider}.warmReserve: ${error.message}` }))
        )
        applied.push({ provider, warmReserve: target })
      }
      const reloaded: ConfigReloaded = { applied, needsRestart: restartChanges(started, next) }
      yield* Effect.logInfo("Configuration reloaded").pipe(
        Effect.annotateLogs({
          applied: applied.map(({ provider, warmReserve }) => `${provider}=${warmReserve}`).join(", ") || "none",
          needsRestart: reloaded.needsRestart.join(", ") || "none"
        })
      )
      return reloaded
    })
  })
