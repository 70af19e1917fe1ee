/**
 * The owner of residency: every agent's record, its live runtime (at most one), the lanes its
 * lifecycle operations run in, the runtimes' session events, and loading, resuming and closing
 * runtimes. It writes the `LiveAgent` fields that are not the turn slot's, and offers the turn
 * owner its port (`port`); the lifecycle operations (`lifecycle.ts`), the candidates, the views
 * and the shutdown work through what it returns.
 */
import { Clock, Deferred, Effect, type Option, PubSub, Stream } from "effect"
import type { AgentRecord, PersistenceHandle, ReleaseReason } from "../../domain/agent.ts"
import type { AgentEvent } from "../../domain/agentEvent.ts"
import {
  AgentNotFound,
  AgentNotResumable,
  RuntimeCloseFailed,
  RuntimePersistFailed,
  ShuttingDown
} from "../../domain/errors.ts"
import type { AgentClient } from "../../domain/provider.ts"
import { agentAttributes } from "../../domain/spans.ts"
import type { DaemonRetiring } from "../../domain/retirement.ts"
import type { ResumeError } from "../../services/AgentRegistry.ts"
import type { ActivityClock } from "../../services/ActivityClock.ts"
import type { AgentPlacementService } from "../../services/AgentPlacement.ts"
import type { AgentStore } from "../../services/AgentStore.ts"
import type { ProviderRegistry } from "../../services/ProviderRegistry.ts"
import type { WarmReserveService } from "../../services/WarmReserve.ts"
import type { Finishes } from "./finishes.ts"
import type { Lanes } from "./lanes.ts"
import { baselineBlockers, type LiveAgent } from "./LiveAgent.ts"
import type { ResidencyPort } from "./residencyPort.ts"
import { openRuntime } from "./runtimeOpening.ts"
import type { makeRuntimeRecords } from "./runtimeRecords.ts"
import { makeSessionEvents } from "./sessionEvents.ts"
import { settleIdleWaiters, wakeQueued } from "./turnSlot.ts"

/** What the residency works with. */
export interface ResidencyDeps {
  readonly store: AgentStore["Service"]
  readonly providers: ProviderRegistry["Service"]
  /** The empty default unless the host composed a warm reserve under the registry. */
  readonly reserve: WarmReserveService
  readonly runtimeRecords: ReturnType<typeof makeRuntimeRecords>
  readonly placement: AgentPlacementService
  /** Optional: hosts with a daemon idle timer learn of every activity here. */
  readonly activity: Option.Option<ActivityClock["Service"]>
  readonly lanes: Lanes
  readonly finishes: Finishes
  /** The resident memory of a runtime's process tree now, when the host can read it: what its release gives back. */
  readonly measure: (agent: LiveAgent) => Effect.Effect<number | null>
  /** Shows the agent's live event stream an event (a no-op when the host keeps none). */
  readonly publish: (agentId: string, event: AgentEvent, now: number) => void
}

/** The residency (see the module's comment). */
export type Residency = Effect.Success<ReturnType<typeof makeResidency>>

/** Makes the residency over the store's agents; runtimes' death watches run in the scope. */
export const makeResidency = Effect.fnUntraced(function*(deps: ResidencyDeps) {
  const { finishes, lanes, providers, reserve, runtimeRecords, store } = deps
  const scope = yield* Effect.scope
  const records = new Map<string, AgentRecord>()
  for (const record of yield* store.list) records.set(record.agentId, record)
  const live = new Map<string, LiveAgent>()
  /** Agents this daemon stopped hosting (`relinquish`), until `adopt` hosts them here again. */
  const departed = new Set<string>()
  /** Whether nothing may resume the agent here: it moved away, or lives on another runner. */
  const hostedElsewhere = (agentId: string) => departed.has(agentId) || !deps.placement.hostsHere(agentId)
  /** Each runtime registered (true) or gone (false), for `residency`. */
  const residencyChanges = yield* PubSub.unbounded<{ readonly agentId: string; readonly resident: boolean }>()
  /** The agents whose turn just ended, for whoever asks their provider then (the collector's probe). */
  const turnEnds = yield* PubSub.unbounded<string>()
  const liveChildren = new Map<string, Set<string>>()
  let shuttingDown = false
  let paused: DaemonRetiring | undefined
  /** Agents whose record the store refused: saved again by `retryWrites`; until then the daemon may not retire. */
  const unsaved = new Map<string, string>()
  /** Agents a delete is removing: prompts to them are refused from the moment it begins. */
  const deleting = new Set<string>()

  /** Saves a record, remembering a refusal (so that it is tried again, and known, R2). */
  const saveRecord = (record: AgentRecord) =>
    store.put(record).pipe(
      Effect.tapError((error) => Effect.sync(() => void unsaved.set(record.agentId, error.message))),
      Effect.tap(() => Effect.sync(() => void unsaved.delete(record.agentId)))
    )

  const isLive = (agent: LiveAgent) => live.get(agent.agentId) === agent
  const blockersOf = (agent: LiveAgent) => baselineBlockers(agent, isLive(agent), lanes.busy(agent.agentId))

  const touch = (agent: LiveAgent, now: number) => {
    agent.lastActivityAt = now
    agent.activityCount++
    if (deps.activity._tag === "Some") deps.activity.value.touch(now)
  }

  const events = yield* makeSessionEvents(finishes, touch, deps.publish)

  // ---- loading and unloading runtimes ------------------------------------------------------

  const register = (agent: LiveAgent) => {
    live.set(agent.agentId, agent)
    PubSub.publishUnsafe(residencyChanges, { agentId: agent.agentId, resident: true })
    if (agent.parentAgentId !== undefined) {
      let siblings = liveChildren.get(agent.parentAgentId)
      if (siblings === undefined) liveChildren.set(agent.parentAgentId, siblings = new Set())
      siblings.add(agent.agentId)
    }
  }

  const unregister = (agent: LiveAgent) => {
    if (!isLive(agent)) return
    live.delete(agent.agentId)
    PubSub.publishUnsafe(residencyChanges, { agentId: agent.agentId, resident: false })
    if (agent.parentAgentId !== undefined) {
      const siblings = liveChildren.get(agent.parentAgentId)
      siblings?.delete(agent.agentId)
      if (siblings?.size === 0) liveChildren.delete(agent.parentAgentId)
    }
    // Whoever waits for this runtime's turn or events will never be answered by it.
    Deferred.doneUnsafe(agent.gone, Effect.void)
    wakeQueued(agent.slot)
    settleIdleWaiters(agent.slot)
    events.settle(agent)
  }

  /**
   * A runtime that ends on its own (crash, OOM kill) is gone: the agent becomes released, so the
   * next prompt resumes it from its saved session instead of talking to a dead process.
   */
  const watchForDeath = (agent: LiveAgent, exited: Effect.Effect<void>) =>
    exited.pipe(
      // A runtime the registry is closing (or closed) itself: its close does the rest.
      Effect.andThen(Effect.suspend(() => !isLive(agent) || agent.closedByDaemon ? Effect.void : lanes.inLane(
        agent.agentId,
        Effect.gen(function*() {
          if (!isLive(agent)) return
          unregister(agent)
          yield* runtimeRecords.forget(agent)
          const previous = records.get(agent.agentId)!
          const now = yield* Clock.currentTimeMillis
          const record: AgentRecord = {
            ...previous,
            lifecycle: "closed",
            lastActivityAt: Math.max(previous.lastActivityAt, agent.lastActivityAt),
            closedAt: now,
            // Its memory went with its process, unmeasured.
            release: { reason: "exited", rssBytes: null }
          }
          records.set(agent.agentId, record)
          deps.publish(agent.agentId, { _tag: "released", reason: "exited" }, now)
          yield* Effect.logWarning("Agent runtime ended on its own; the next prompt resumes it").pipe(
            Effect.annotateLogs({ agentId: agent.agentId, sessionId: agent.sessionId })
          )
          yield* saveRecord(record).pipe(
            Effect.catch((error) =>
              Effect.logWarning("Saving the record of an ended runtime failed").pipe(
                Effect.annotateLogs({ agentId: agent.agentId, error: error.message })
              )
            )
          )
        })
      ))),
      Effect.forkIn(scope),
      Effect.asVoid
    )

  /**
   * Starts a runtime for the record, creating (no handle) or resuming its session, and registers
   * it. Only the provider's open can be interrupted: an opened session is always registered.
   */
  const load = (record: AgentRecord, client: AgentClient, handle: PersistenceHandle | null) =>
    Effect.uninterruptibleMask((restore) => loadSession(record, client, handle, restore))

  const loadSession = Effect.fnUntraced(function*(
    record: AgentRecord,
    client: AgentClient,
    handle: PersistenceHandle | null,
    restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  ) {
    const { agent, early, handOver, persistence } = yield* openRuntime(reserve, record, client, handle, events.enqueue, restore)
    register(agent)
    const recorded = yield* runtimeRecords.record(agent)
    // The reserve's entry goes once the agent's covers the process; until then it stays.
    if (recorded && handOver._tag === "Some") yield* handOver.value
    for (const event of early) events.enqueue(agent, event)
    if (agent.session.exited !== undefined) yield* watchForDeath(agent, agent.session.exited)
    // Resident again: what its last release gave back is no longer released.
    const { release: _released, ...kept } = record
    const active: AgentRecord = {
      ...kept,
      persistence,
      lifecycle: "active",
      lastActivityAt: agent.lastActivityAt,
      closedAt: null
    }
    records.set(record.agentId, active)
    deps.publish(record.agentId, { _tag: "resumed" }, yield* Clock.currentTimeMillis)
    return { agent, record: active }
  })

  /** A runtime just loaded for a record that could not be saved: it goes, and the record with it. */
  const unload = (agent: LiveAgent) =>
    Effect.andThen(
      Effect.sync(() => {
        unregister(agent)
        records.delete(agent.agentId)
      }),
      runtimeRecords.forget(agent)
    )

  /**
   * Picks up a session id the provider reported after the runtime started (some providers only
   * know it after their first turn), and saves it: from then on the agent is resumable.
   */
  const refreshPersistence = (agent: LiveAgent): Effect.Effect<void> =>
    Effect.gen(function*() {
      if (agent.sessionId !== null || !isLive(agent)) return
      const handle = yield* agent.session.persistence
      const record = records.get(agent.agentId)
      if (handle === null || record === undefined) return
      agent.sessionId = handle.sessionId
      const updated: AgentRecord = { ...record, persistence: handle }
      records.set(agent.agentId, updated)
      yield* saveRecord(updated).pipe(
        Effect.catch((error) =>
          Effect.logWarning("Saving a new persistence handle failed; it is saved again at close").pipe(
            Effect.annotateLogs({ agentId: agent.agentId, error: error.message })
          )
        )
      )
    })

  /**
   * Takes a runtime down on purpose (close, reload): admission is barred, prompts already being
   * handed over finish first, and prompts behind them find the runtime gone and resume it.
   */
  const takeDown = (agent: LiveAgent, reason: ReleaseReason) =>
    Effect.suspend(() => {
      agent.barred = true
      agent.takingDown = true
      // Prompts queued behind the running turn let go of the dispatch permit; they resume it later.
      wakeQueued(agent.slot)
      return agent.slot.dispatch.withPermits(1)(
        events.drain(agent).pipe(Effect.andThen(closeRuntime(agent, reason)))
      ).pipe(Effect.ensuring(Effect.sync(() => {
        agent.barred = false
        agent.takingDown = false
      })))
    })

  /**
   * Closes the runtime and persists a closed, resumable record (C2, C10). Uninterruptible: once
   * begun it finishes. A failed close keeps the runtime registered; a failed persist after a
   * successful close is reported while the in-memory record stays resumable. The record notes why
   * it was released and the memory it held just before.
   */
  const closeRuntime = (agent: LiveAgent, reason: ReleaseReason): Effect.Effect<void, RuntimeCloseFailed | RuntimePersistFailed> =>
    Effect.uninterruptible(Effect.gen(function*() {
      const persistence = yield* agent.session.persistence
      // Sampled before the close: afterwards the memory is gone.
      const rssBytes = yield* deps.measure(agent)
      agent.closedByDaemon = true
      const closed = yield* Effect.result(agent.session.close)
      if (closed._tag === "Failure") {
        agent.closedByDaemon = false
        return yield* new RuntimeCloseFailed({ agentId: agent.agentId, message: closed.failure.message })
      }
      unregister(agent)
      yield* runtimeRecords.forget(agent)
      const now = yield* Clock.currentTimeMillis
      const previous = records.get(agent.agentId)!
      const record: AgentRecord = {
        ...previous,
        persistence: persistence ?? previous.persistence,
        lifecycle: "closed",
        lastActivityAt: Math.max(previous.lastActivityAt, agent.lastActivityAt),
        closedAt: now,
        release: { reason, rssBytes }
      }
      records.set(agent.agentId, record)
      deps.publish(agent.agentId, { _tag: "released", reason }, now)
      yield* saveRecord(record).pipe(
        Effect.mapError((error) => new RuntimePersistFailed({ agentId: agent.agentId, message: error.message }))
      )
    }))

  /**
   * Releases the runtime for the collector, if it is still the one `activityCount` saw and
   * `revalidate` still finds it idle: admission is barred before the lane is entered, so a prompt
   * from then on waits for the outcome.
   */
  const releaseIfIdle = (agent: LiveAgent, activityCount: number, revalidate: Effect.Effect<boolean>, reason: ReleaseReason) =>
    Effect.suspend(() => {
      if (!isLive(agent) || agent.sessionId === null || agent.barred) return Effect.succeed(false)
      // Bar admission before entering the lane: a prompt from now on waits for the outcome.
      agent.barred = true
      agent.releasing = true
      return lanes.inLane(
        agent.agentId,
        Effect.gen(function*() {
          if (!isLive(agent)) return false
          yield* events.drain(agent)
          if (!(yield* revalidate)) return false
          // The collector compares timestamps; the owner also compares its own activity count,
          // which tells apart two activities in the same millisecond.
          if (agent.activityCount !== activityCount) return false
          yield* closeRuntime(agent, reason)
          yield* Effect.logDebug("Released agent runtime").pipe(Effect.annotateLogs({ agentId: agent.agentId }))
          return true
        })
      ).pipe(
        Effect.ensuring(Effect.sync(() => {
          agent.barred = false
          agent.releasing = false
        })),
        Effect.tap((released) => Effect.annotateCurrentSpan("quiesce.released", released)),
        Effect.withSpan("Agent.release", { attributes: { ...agentAttributes(agent.agentId, agent.provider), "quiesce.release.reason": reason } })
      )
    })

  const resume = Effect.fn("Agent.resume")(function*(agentId: string) {
    const record = records.get(agentId)
    yield* Effect.annotateCurrentSpan(agentAttributes(agentId, record?.provider))
    if (record === undefined) return yield* AgentNotFound.of(agentId)
    const handle = record.persistence
    if (handle === null) return yield* AgentNotResumable.of(agentId)
    const client = yield* providers.get(record.provider)
    const started = yield* Clock.currentTimeMillis
    const loaded = yield* load(record, client, handle)
    const took = (yield* Clock.currentTimeMillis) - started
    yield* Effect.logInfo("Resumed agent runtime").pipe(
      Effect.annotateLogs({ agentId, provider: record.provider, sessionId: handle.sessionId, resumeTook: `${took}ms` })
    )
    // The runtime is live either way; the record is saved again when it closes.
    yield* saveRecord(loaded.record).pipe(
      Effect.catch((error) =>
        Effect.logWarning("Saving the record of a resumed agent failed").pipe(
          Effect.annotateLogs({ agentId, error: error.message })
        )
      )
    )
    return loaded.agent
  })

  /** Waits for any release in progress, then resumes the runtime unless someone already did. */
  const ensureResident = (agentId: string) =>
    lanes.inLane(
      agentId,
      Effect.suspend((): Effect.Effect<void, ResumeError> =>
        shuttingDown
          ? Effect.fail(ShuttingDown.of(`resuming agent ${agentId}`))
          : hostedElsewhere(agentId)
          ? Effect.fail(ShuttingDown.of(`resuming agent ${agentId}, which this daemon does not host,`))
          : live.has(agentId)
          ? Effect.void
          : Effect.asVoid(resume(agentId))
      )
    )

  /** `adopt` for a caller that holds the agent's lane. */
  const refreshRecord = (agentId: string) =>
    Effect.gen(function*() {
      // Live here, or newer here than in the store (it refused the last save): this copy is the truth.
      if (live.has(agentId) || unsaved.has(agentId)) return
      const stored = yield* store.get(agentId)
      if (stored._tag === "Some") records.set(agentId, stored.value)
      else records.delete(agentId)
    })

  const residency = (agentId: string): Stream.Stream<boolean> =>
    Stream.unwrap(Effect.gen(function*() {
      // Subscribed before the current state is read, so no change falls between the two.
      const subscription = yield* PubSub.subscribe(residencyChanges)
      return Stream.concat(
        Stream.succeed(live.has(agentId)),
        Stream.fromSubscription(subscription).pipe(
          Stream.filter((change) => change.agentId === agentId),
          Stream.map((change) => change.resident)
        )
      )
    }))

  // ---- the turn owner's port ---------------------------------------------------------------

  const port: ResidencyPort = {
    recordOf: (agentId) => records.get(agentId),
    liveOf: (agentId) => live.get(agentId),
    refusal: (agentId) =>
      shuttingDown
        ? ShuttingDown.of(`a prompt to ${agentId}`)
        : paused !== undefined
        ? paused
        : deleting.has(agentId) || !records.has(agentId)
        ? AgentNotFound.of(agentId)
        : undefined,
    requireRunnable: (record) =>
      Effect.andThen(
        providers.get(record.provider),
        Effect.suspend(() =>
          !live.has(record.agentId) && record.persistence === null ? Effect.fail(AgentNotResumable.of(record.agentId)) : Effect.void
        )
      ),
    // One synchronous step: a prompt either finds a live runtime that is not being released and
    // marks it busy, or it does not touch it at all (C9). The turn owner counts it in its slot.
    admit: (agentId, now) => {
      const agent = live.get(agentId)
      if (agent === undefined || agent.barred || shuttingDown) return undefined
      touch(agent, now)
      return agent
    },
    accepts: (agent) => isLive(agent) && !agent.takingDown && !shuttingDown,
    hostedElsewhere,
    ensureResident,
    turnEnded: (agent) =>
      Effect.gen(function*() {
        touch(agent, yield* Clock.currentTimeMillis)
        yield* refreshPersistence(agent)
        yield* events.drain(agent)
      }),
    turnSettled: (agent) => void PubSub.publishUnsafe(turnEnds, agent.agentId)
  }

  return {
    port,
    scope,
    recordOf: (agentId: string) => records.get(agentId),
    records: (): ReadonlyArray<AgentRecord> => [...records.values()],
    liveOf: (agentId: string) => live.get(agentId),
    liveAgents: (): ReadonlyArray<LiveAgent> => [...live.values()],
    liveChildrenOf: (agentId: string): ReadonlySet<string> => liveChildren.get(agentId) ?? new Set<string>(),
    isLive,
    blockersOf,
    touch,
    events,
    saveRecord,
    load,
    loadSession,
    unload,
    refreshPersistence,
    takeDown,
    closeRuntime,
    releaseIfIdle,
    resume,
    refreshRecord,
    residency,
    /** Subscribes to the agents whose turn ends from now on. */
    turnEnds: Effect.map(PubSub.subscribe(turnEnds), Stream.fromSubscription),
    isShuttingDown: () => shuttingDown,
    /** Nothing new is admitted from now on. */
    stopAdmission: () => void (shuttingDown = true),
    admissionPaused: () => paused,
    pauseAdmission: (refusal: DaemonRetiring | undefined) => void (paused = refusal),
    relinquish: (agentId: string) => void departed.add(agentId),
    /** Hosts the agent here again (`adopt`). */
    host: (agentId: string) => void departed.delete(agentId),
    /** Runs a delete's work with prompts to the agent refused from its first moment. */
    whileDeleting: <A, E, R>(agentId: string, effect: Effect.Effect<A, E, R>) =>
      Effect.suspend(() => {
        deleting.add(agentId)
        return effect.pipe(Effect.ensuring(Effect.sync(() => deleting.delete(agentId))))
      }),
    /** The agent is deleted: its record is gone, and nothing of it is saved again. */
    forget: (agentId: string) => {
      records.delete(agentId)
      unsaved.delete(agentId)
    },
    /** Writes again every record the store refused. */
    retrySaves: Effect.gen(function*() {
      for (const agentId of [...unsaved.keys()]) {
        const record = records.get(agentId)
        if (record !== undefined) yield* Effect.ignore(saveRecord(record))
      }
    }),
    unsaved: (): ReadonlyArray<readonly [string, string]> => [...unsaved]
  }
})

