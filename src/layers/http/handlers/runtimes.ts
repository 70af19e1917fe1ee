/** The runtimes group's handlers: the rows of the live runtimes (this runner's, or the cluster's), and the collector. */
import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { QuiesceApi } from "../../../api/QuiesceApi.ts"
import { collectResult, memoryView, sweepResult } from "../../../api/views.ts"
import { RuntimeNotFound } from "../../../domain/errors.ts"
import { type AgentDirectory, AgentRegistry } from "../../../services/AgentRegistry.ts"
import { ClusterRuntimes } from "../../../services/ClusterRuntimes.ts"
import { RuntimeCollector } from "../../../services/RuntimeCollector.ts"
import { makeRuntimeRows } from "../../collector/runtimeRows.ts"

/** The runtimes group. */
export const runtimesHandlers = HttpApiBuilder.group(
  QuiesceApi,
  "runtimes",
  Effect.fn(function*(handlers) {
    const registry: AgentDirectory = yield* AgentRegistry
    const collector = yield* RuntimeCollector
    const rows = yield* makeRuntimeRows
    const cluster = yield* ClusterRuntimes

    const explainRuntime = (agentId: string) =>
      Effect.gen(function*() {
        const view = yield* registry.get(agentId)
        const [row] = view.resident ? yield* rows.rowsOf([view]) : []
        if (row === undefined) return yield* RuntimeNotFound.of(agentId)
        return row
      })

    return handlers
      // A lone daemon is the whole cluster.
      .handle("list", ({ query }) => query.scope === "cluster" && cluster !== undefined ? cluster.list : rows.all)
      .handle("explain", ({ params }) => explainRuntime(params.id))
      .handle("collect", ({ params }) => Effect.map(collector.collectNow(params.id), collectResult))
      .handle("sweep", () => Effect.map(collector.sweep, sweepResult))
      .handle("memory", () => Effect.map(collector.memory, (status) => Option.isSome(status) ? memoryView(status.value) : null))
  })
)
