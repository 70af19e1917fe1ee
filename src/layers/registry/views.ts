/**
 * The agents as the registry's readers see them (`AgentView`): a record, whether a runtime holds
 * it here, its pending permissions, and whether its provider is configured.
 */
import { Effect } from "effect"
import type { AgentRecord } from "../../domain/agent.ts"
import { AgentNotFound } from "../../domain/errors.ts"
import type { AgentView } from "../../services/AgentRegistry.ts"
import type { AgentStore } from "../../services/AgentStore.ts"
import type { ProviderRegistry } from "../../services/ProviderRegistry.ts"
import type { Residency } from "./residency.ts"

/** The views over the residency; on a shared store `list` lists the store's agents. */
export const makeViews = (
  residency: Residency,
  store: AgentStore["Service"],
  providers: ProviderRegistry["Service"],
  sharedStore: boolean
) => {
  const view = (record: AgentRecord, configuredProviders: ReadonlySet<string>): AgentView => {
    const agent = residency.liveOf(record.agentId)
    return {
      record,
      resident: agent !== undefined,
      pid: agent?.session.pid ?? null,
      pendingPermissions: agent?.permissions === undefined ? [] : [...agent.permissions],
      providerAvailable: configuredProviders.has(record.provider)
    }
  }

  /** The views of these records; providers are read each time (they may register after the registry). */
  const viewsOf = (of: ReadonlyArray<AgentRecord>) =>
    Effect.map(providers.providers, (ids) => {
      const configured = new Set(ids)
      return of.map((record) => view(record, configured))
    })

  /**
   * On a shared store, every agent the store has (another daemon may have made it), as this
   * daemon sees it: the record it holds for an agent it hosts, the stored one otherwise. A store
   * that cannot be read leaves the agents this daemon knows.
   */
  const sharedList = Effect.gen(function*() {
    const stored = yield* store.list.pipe(
      Effect.tapError((error) =>
        Effect.logWarning("Listing the shared store's agents failed; listing the ones this daemon knows").pipe(
          Effect.annotateLogs({ error: error.message })
        )
      ),
      Effect.orElseSucceed(() => residency.records())
    )
    return yield* viewsOf(stored.map((record) =>
      (residency.liveOf(record.agentId) !== undefined ? residency.recordOf(record.agentId) : undefined) ?? record
    ))
  })

  return {
    get: (agentId: string) =>
      Effect.suspend(() => {
        const record = residency.recordOf(agentId)
        return record === undefined
          ? Effect.fail(AgentNotFound.of(agentId))
          : Effect.map(providers.providers, (ids) => view(record, new Set(ids)))
      }),
    list: sharedStore ? sharedList : Effect.suspend(() => viewsOf(residency.records())),
    residents: Effect.suspend(() =>
      viewsOf(residency.liveAgents().flatMap((agent) => residency.recordOf(agent.agentId) ?? []))
    )
  }
}
