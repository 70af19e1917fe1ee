/**
 * The lifecycle operations on one agent, each in the agent's lane: create, adopt, close, delete,
 * reload, and the answer to a permission. They work through the residency; the turn owner has
 * its say in a delete (`refuseDelete`: nothing accepted is lost) and in an adopt on a shared store
 * (`recover`: the agent's unfinished turns are taken over).
 */
import { Clock, Effect } from "effect"
import { type AgentRecord, labelsOfNewAgent } from "../../domain/agent.ts"
import { type Blocker, noBlockers } from "../../domain/blocker.ts"
import { type AgentBusy, AgentNotFound, type AgentStoreError, PermissionNotPending, ShuttingDown } from "../../domain/errors.ts"
import type { CreateAgent } from "../../services/AgentRegistry.ts"
import type { AgentStore } from "../../services/AgentStore.ts"
import type { ProviderRegistry } from "../../services/ProviderRegistry.ts"
import type { TurnJournal } from "../../services/TurnJournal.ts"
import type { Finishes } from "./finishes.ts"
import { randomId } from "../../platform/ids.ts"
import type { Lanes } from "./lanes.ts"
import { baselineBlockers } from "./LiveAgent.ts"
import type { Residency } from "./residency.ts"

/** What the lifecycle operations work with. */
export interface LifecycleDeps {
  readonly residency: Residency
  readonly lanes: Lanes
  readonly finishes: Finishes
  readonly store: AgentStore["Service"]
  readonly journal: TurnJournal["Service"]
  readonly providers: ProviderRegistry["Service"]
  /** The turn owner's veto of a delete: an unfinished or accepting turn of the agent. */
  readonly refuseDelete: (agentId: string) => Effect.Effect<void, AgentBusy>
  /** The agent's unfinished turns are taken over, when the store is shared (else a no-op). */
  readonly recover: (agentId: string) => Effect.Effect<void, AgentStoreError>
}

/** The lifecycle operations (see the module's comment). */
export const makeLifecycle = ({ finishes, journal, lanes, providers, recover, refuseDelete, residency, store }: LifecycleDeps) => {
  const { inLane } = lanes
  /** Agents past admission and not yet created: a retirement waits for them. */
  let creating = 0

  const create = Effect.fn("AgentRegistry.create")(function*(input: CreateAgent) {
    if (residency.isShuttingDown()) return yield* ShuttingDown.of("creating an agent")
    const paused = residency.admissionPaused()
    if (paused !== undefined) return yield* paused
    // Counted from admission on, so a retirement that begins meanwhile sees it.
    creating++
    return yield* createAdmitted(input).pipe(Effect.ensuring(Effect.sync(() => creating--)))
  })

  const createAdmitted = Effect.fnUntraced(function*(input: CreateAgent) {
    const labels = yield* labelsOfNewAgent(input)
    const client = yield* providers.get(input.provider)
    const agentId = input.agentId ?? (yield* randomId("agent"))
    const now = yield* Clock.currentTimeMillis
    const draft: AgentRecord = {
      agentId,
      provider: input.provider,
      cwd: input.cwd,
      labels,
      persistence: null,
      lifecycle: "active",
      createdAt: now,
      lastActivityAt: now,
      closedAt: null
    }
    // Only the provider's open can be interrupted: an agent whose runtime opened is saved, or taken down.
    return yield* inLane(agentId, Effect.uninterruptibleMask((restore) => Effect.gen(function*() {
      if (input.agentId !== undefined) {
        // A create that names its id is carried out once: a repeat (a retried cluster message) gets the agent made first.
        const made = yield* residency.refreshRecord(agentId).pipe(Effect.andThen(Effect.sync(() => residency.recordOf(agentId))))
        if (made !== undefined) return made
      }
      const loaded = yield* residency.loadSession(draft, client, null, restore)
      // Nothing half-created: a record that cannot be saved takes its runtime down with it.
      yield* store.put(loaded.record).pipe(
        Effect.tapError(() =>
          loaded.agent.session.close.pipe(
            Effect.catch((error) =>
              Effect.logWarning("Closing the runtime of an agent that could not be saved failed").pipe(
                Effect.annotateLogs({ agentId, error: error.message })
              )
            ),
            Effect.andThen(residency.unload(loaded.agent))
          )
        )
      )
      return loaded.record
    })))
  })

  /**
   * Reads the agent's record from the store again, unless its runtime is live here: another
   * daemon on the same store (a cluster's runner) may have hosted it since this one last looked.
   */
  const adopt = Effect.fn("AgentRegistry.adopt")(function*(agentId: string) {
    yield* inLane(agentId, Effect.andThen(Effect.sync(() => residency.host(agentId)), residency.refreshRecord(agentId)))
    // On a shared store, the agent's unfinished turns are this daemon's to take over once it hosts the agent.
    yield* recover(agentId)
  })

  const requireKnown = (agentId: string) =>
    residency.recordOf(agentId) !== undefined ? Effect.void : Effect.fail(AgentNotFound.of(agentId))

  const close = Effect.fn("AgentRegistry.close")(function*(agentId: string, options?: { readonly unlessBlocked?: boolean | undefined }) {
    yield* requireKnown(agentId)
    return yield* inLane(agentId, Effect.gen(function*() {
      // Deleted while this close waited for the lane.
      if (residency.recordOf(agentId) === undefined) return yield* AgentNotFound.of(agentId)
      const agent = residency.liveOf(agentId)
      if (agent === undefined) return noBlockers
      yield* residency.events.drain(agent)
      // What the close ends, as it stands once nothing more is admitted: work admitted since the
      // caller looked (a prompt's turn, a permission) is in it; this close's own hold on the lane
      // is not. Unless blocked, any of it keeps the runtime; otherwise the close ends it.
      const found = baselineBlockers(agent, residency.isLive(agent), false)
      if (found.length > 0 && options?.unlessBlocked === true) return found
      yield* residency.takeDown(agent, "close")
      finishes.announce(agentId, "closed")
      return found
    }))
  })

  const remove = Effect.fn("AgentRegistry.delete")(function*(agentId: string, options?: { readonly unlessBlocked?: boolean | undefined }) {
    yield* requireKnown(agentId)
    return yield* inLane(agentId, Effect.gen(function*() {
      // Deleted by another call while this one waited for the lane.
      if (residency.recordOf(agentId) === undefined) return yield* AgentNotFound.of(agentId)
      return yield* residency.whileDeleting(agentId, Effect.gen(function*() {
        yield* refuseDelete(agentId)
        const agent = residency.liveOf(agentId)
        let found: ReadonlyArray<Blocker> = noBlockers
        if (agent !== undefined) {
          yield* residency.events.drain(agent)
          // What the delete ends, as the close reads it: unless blocked, any of it keeps the agent.
          found = baselineBlockers(agent, residency.isLive(agent), false)
          if (found.length > 0 && options?.unlessBlocked === true) return found
          yield* residency.takeDown(agent, "close")
        }
        // The turns first: a record left behind by a failure here is still a whole agent.
        yield* journal.removeAgent(agentId)
        yield* store.remove(agentId)
        residency.forget(agentId)
        finishes.forget(agentId)
        finishes.announce(agentId, "closed")
        yield* Effect.logInfo("Agent deleted").pipe(Effect.annotateLogs({ agentId }))
        return found
      }))
    }))
  })

  const reload = Effect.fn("AgentRegistry.reload")(function*(agentId: string) {
    yield* requireKnown(agentId)
    yield* inLane(agentId, Effect.gen(function*() {
      const agent = residency.liveOf(agentId)
      if (agent !== undefined) {
        agent.pendingReplacement = true
        yield* residency.takeDown(agent, "reload").pipe(Effect.ensuring(Effect.sync(() => (agent.pendingReplacement = false))))
      }
      yield* residency.resume(agentId)
    }))
  })

  const respondToPermission = Effect.fn("AgentRegistry.respondToPermission")(
    function*(agentId: string, permissionId: string, allow: boolean) {
      yield* requireKnown(agentId)
      const agent = residency.liveOf(agentId)
      if (agent === undefined) return yield* PermissionNotPending.of(agentId, permissionId)
      // Events already reported are applied first, so a request that just arrived is known.
      yield* residency.events.drain(agent)
      if (agent.permissions?.has(permissionId) !== true) {
        return yield* PermissionNotPending.of(agentId, permissionId, true)
      }
      agent.permissionResponses++
      residency.touch(agent, yield* Clock.currentTimeMillis)
      yield* agent.session.respondToPermission(permissionId, allow).pipe(
        Effect.ensuring(Effect.sync(() => agent.permissionResponses--))
      )
    }
  )

  return {
    create,
    adopt,
    close,
    delete: remove,
    reload,
    respondToPermission,
    requireKnown,
    /** Agents past admission and not yet created. */
    creating: () => creating
  }
}
