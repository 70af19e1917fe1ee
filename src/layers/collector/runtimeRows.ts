/**
 * The rows of the runtimes this daemon hosts (`GET /v1/runtimes`, and what a cluster's runner
 * reports to the others): each resident runtime explained by the collector, with the memory of
 * its process tree from one sampling query.
 */
import { Effect, Option } from "effect"
import { runtimeRow } from "../../api/views.ts"
import { type AgentDirectory, AgentRegistry, type AgentView } from "../../services/AgentRegistry.ts"
import { ProcessInspection, type ProcessSample } from "../../services/ProcessInspection.ts"
import { RuntimeCollector } from "../../services/RuntimeCollector.ts"

/** No pids: no samples, and no query. */
export const noSamples: ReadonlyMap<number, Option.Option<ProcessSample>> = new Map()

/** The rows of given residents (`rowsOf`), or of every resident now (`all`). */
export const makeRuntimeRows = Effect.gen(function*() {
  const registry: AgentDirectory = yield* AgentRegistry
  const collector = yield* RuntimeCollector
  const inspection = yield* ProcessInspection

  const rowsOf = (resident: ReadonlyArray<AgentView>) =>
    Effect.gen(function*() {
      const pids = resident.flatMap((view) => view.pid === null ? [] : [view.pid])
      const [samples, rows] = yield* Effect.all([
        pids.length === 0 ? Effect.succeed(noSamples) : inspection.sampleAll(pids),
        Effect.forEach(resident, (view) =>
          collector.explain(view.record.agentId).pipe(
            Effect.map((residency) => Option.some({ view, residency })),
            // Released between the listing and the explanation: no longer a resident runtime.
            Effect.catchTag("RuntimeNotFound", () => Effect.succeedNone)
          ), { concurrency: 16 })
      ], { concurrency: 2 })
      return rows.flatMap((row) => {
        if (Option.isNone(row)) return []
        const { residency, view } = row.value
        const sample = view.pid === null ? undefined : samples.get(view.pid)
        return [runtimeRow(view, residency, sample ?? Option.none())]
      })
    })

  return {
    rowsOf,
    all: Effect.flatMap(registry.residents, rowsOf)
  }
})
