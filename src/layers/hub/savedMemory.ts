/**
 * What a home without a daemon (retired or force-stopped) gave back: each saved agent's size just
 * before its release, read from the home's saved store read-only (`savedStore.ts`), for the hub's
 * memory totals. A retired home's memory is all released, so this is where it shows.
 *
 * The figures are kept per home until its store files change (their size and change time): an
 * inventory that pages poll every second reads an unchanged store once.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import { memoryTotals, type MemoryTotals } from "../../domain/memoryTotals.ts"
import { databaseFileOf } from "../host/Home.ts"
import { readSavedStore } from "../store/savedStore.ts"

/** The size and change time of the store and its write-ahead log: equal stamps, equal figures. */
const storeStamp = (dir: string) =>
  [databaseFileOf(dir), `${databaseFileOf(dir)}-wal`].map((file) => {
    const stat = fs.statSync(file, { throwIfNoEntry: false })
    return stat === undefined ? "-" : `${stat.size}@${stat.mtimeMs}`
  }).join(" ")

/**
 * Reads the released memory of homes without a daemon: `undefined` while a process holds the
 * home (its daemon starting, which soon counts itself), or when the store cannot be read (logged
 * once per change of the store).
 */
export const makeSavedMemory = () => {
  const known = new Map<string, { readonly stamp: string; readonly totals: MemoryTotals | undefined }>()
  const keep = (dir: string, stamp: string, totals: MemoryTotals | undefined) =>
    Effect.sync(() => {
      known.set(dir, { stamp, totals })
      return totals
    })
  return (dir: string): Effect.Effect<MemoryTotals | undefined> =>
    Effect.suspend(() => {
      const stamp = storeStamp(dir)
      const cached = known.get(dir)
      if (cached !== undefined && cached.stamp === stamp) return Effect.succeed(cached.totals)
      return readSavedStore(dir, (reads) => reads.agents).pipe(
        Effect.map((agents) =>
          memoryTotals(agents.map((agent) => ({
            provider: agent.provider,
            labels: agent.labels,
            resident: false,
            bytes: agent.release?.rssBytes ?? null
          })))
        ),
        Effect.flatMap((totals) => keep(dir, stamp, totals)),
        Effect.catchTag("HomeHeld", () => Effect.succeed(undefined)),
        Effect.catchTag("AgentStoreError", (error) =>
          Effect.logWarning(`The released memory of ${dir} is not counted: ${error.message}`).pipe(
            Effect.andThen(keep(dir, stamp, undefined))
          ))
      )
    })
}
