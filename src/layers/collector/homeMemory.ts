/**
 * The home's memory, resident against released (`GET /v1/daemon`'s `memory`): every live runtime's
 * process tree measured now, in one sampling query, and what each released agent's release gave
 * back, from its record.
 */
import { Effect, Option } from "effect"
import { type AgentMemory, memoryTotals, type MemoryTotals } from "../../domain/memoryTotals.ts"
import { type AgentDirectory, AgentRegistry } from "../../services/AgentRegistry.ts"
import { ProcessInspection } from "../../services/ProcessInspection.ts"
import { noSamples } from "./runtimeRows.ts"

/** The home's memory totals, measured when asked. */
export const makeHomeMemory = Effect.gen(function*() {
  const registry: AgentDirectory = yield* AgentRegistry
  const inspection = yield* ProcessInspection
  return Effect.gen(function*(): Effect.fn.Return<MemoryTotals> {
    const agents = yield* registry.list
    const pids = agents.flatMap((view) => view.resident && view.pid !== null ? [view.pid] : [])
    const samples = pids.length === 0 ? noSamples : yield* inspection.sampleAll(pids)
    // Not resident here and not released: on a shared store, another runner's (it counts them).
    const counted = agents.filter((view) => view.resident || view.record.lifecycle === "closed")
    return memoryTotals(counted.map((view): AgentMemory => {
      const { labels, provider, release } = view.record
      if (!view.resident) return { provider, labels, resident: false, bytes: release?.rssBytes ?? null }
      const sample = view.pid === null ? undefined : samples.get(view.pid)
      return { provider, labels, resident: true, bytes: sample === undefined || Option.isNone(sample) ? null : sample.value.rssBytes }
    }))
  })
})
