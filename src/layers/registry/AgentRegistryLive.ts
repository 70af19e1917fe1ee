/**
 * The live `AgentRegistry`: the owner of every agent's record and live runtime, which creates,
 * resumes, releases and closes runtimes one lane per agent, carries prompts through the durable
 * turn journal, and offers its live runtimes to the collector as candidates.
 *
 * @module
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, PubSub, Queue, Schedule, Scope, Semaphore, Stream } from "effect"
import * as fs from "node:fs"
import {
  type AgentRecord,
  internalAgentLabel,
  labelsOfNewAgent,
  parentAgentIdOf,
  type PersistenceHandle
} from "../../domain/agent.ts"
import { type Blocker, noBlockers } from "../../domain/blocker.ts"
import type { RuntimeCandidate } from "../../domain/candidate.ts"
import {
  AgentBusy,
  AgentNotFound,
  AgentNotResumable,
  type AgentStoreError,
  PermissionNotPending,
  RuntimeCloseFailed,
  RuntimePersistFailed,
  ShuttingDown
} from "../../domain/errors.ts"
import { type FinishKind, type FinishOutcome, maxReplyLength } from "../../domain/finish.ts"
import { type AgentClient, type SessionConfig, type SessionEvent, type StopAnswer, stopWorkUnknown } from "../../domain/provider.ts"
import type { DaemonRetiring, RetirementBlocker } from "../../domain/retirement.ts"
import { maxEndedTurnsPerAgent } from "../../domain/turn.ts"
import { AgentRegistry, type AgentView, type CreateAgent, type ResumeError } from "../../services/AgentRegistry.ts"
import { ActivityClock } from "../../services/ActivityClock.ts"
import { AgentStore } from "../../services/AgentStore.ts"
import { ProcessInspection } from "../../services/ProcessInspection.ts"
import { ProviderRegistry } from "../../services/ProviderRegistry.ts"
import { RuntimeCandidates } from "../../services/RuntimeCandidates.ts"
import { RuntimeLedger } from "../../services/RuntimeLedger.ts"
import { TurnJournal } from "../../services/TurnJournal.ts"
import { WarmReserve } from "../../services/WarmReserve.ts"
import { AgentPlacement } from "../../services/AgentPlacement.ts"
import { randomId } from "../../platform/ids.ts"

/** A finish watch here: answered by the first finish journaled past `after`, or by the next one without it. */
interface FinishWaiter {
  readonly after: number | undefined
  readonly answer: Deferred.Deferred<FinishOutcome>
}
import { baselineBlockers, type LiveAgent } from "./LiveAgent.ts"
import { makePrompts } from "./prompts.ts"
import { makeRuntimeRecords } from "./runtimeRecords.ts"

/** Tuning for the registry: the prompt size bound, turn retention, the shutdown probe and a shared store. */
export interface AgentRegistryOptions {
  /**
   * The largest prompt accepted, JSON-encoded, in bytes. Default 512 KiB: well below the 1 MiB
   * line the plugin protocol allows, so an accepted prompt always reaches its provider whole.
   */
  readonly maxPromptBytes?: number | undefined
  /** How long ended turns stay in the journal (a repeat of an older client id is a new turn). Default 168h. */
  readonly turnRetention?: Duration.Input | undefined
  /**
   * How long a provider is asked at shutdown what its runtime still runs, for the shutdown's
   * summary. Default 1 s; zero does not ask (the summary then names turns, permissions and
   * subagents only).
   */
  readonly shutdownProbeTimeout?: Duration.Input | undefined
  /**
   * The store is shared with other daemons (a cluster's runners). The journal's unfinished turns
   * are then taken over per agent, when `adopt` starts hosting it, not all at start: the other
   * runners' turns are theirs.
   */
  readonly sharedStore?: boolean | undefined
}


/** The default bound on a prompt, JSON-encoded. */
export const defaultMaxPromptBytes = 512 * 1024

interface Lane {
  readonly semaphore: Semaphore.Semaphore
  /** Lifecycle operations holding or awaiting the lane. */
  busy: number
}

interface QueuedEvent {
  readonly agent: LiveAgent
  readonly event: SessionEvent
}

/**
 * Builds the registry service: loads the stored agents, ends what a previous daemon's runtimes
 * left running, takes over its journal (per agent instead when the store is shared), and closes
 * every live runtime when the scope closes. {@link layer} and {@link layerWith} wrap it.
 */
export const makeAgentRegistry = Effect.fnUntraced(function*(options: AgentRegistryOptions = {}): Effect.fn.Return<
  AgentRegistry["Service"],
  AgentStoreError,
  AgentStore | TurnJournal | RuntimeLedger | ProviderRegistry | Scope.Scope
> {
  const store = yield* AgentStore
  const journal = yield* TurnJournal
  // Optional: hosts with a daemon idle timer learn of every activity here.
  const activity = yield* Effect.serviceOption(ActivityClock)
  const noteActivity = yield* ActivityClock.noter
  const runtimeRecords = makeRuntimeRecords(yield* RuntimeLedger)
  const providers = yield* ProviderRegistry
  // The empty default unless the host composed a warm reserve under the registry.
  const reserve = yield* WarmReserve
  // Optional: hosts that can read process memory report what each release gives back.
  const inspection = yield* Effect.serviceOption(ProcessInspection)
  const scope = yield* Effect.scope
  // The fibers that carry prompts to their runtimes, and those that wait for running turns, live in
  // scopes of their own: at shutdown the carriers stop first (a prompt not yet handed over stays
  // `accepted` for the next start), the runtimes close, and the turns they cut short are recorded
  // by this process before the waiters' scope closes.
  const carryScope = yield* Scope.fork(scope)
  const turnScope = yield* Scope.fork(scope)

  const records = new Map<string, AgentRecord>()
  for (const record of yield* store.list) records.set(record.agentId, record)
  const live = new Map<string, LiveAgent>()
  /** Agents this daemon stopped hosting (`relinquish`), until `adopt` hosts them here again. */
  const departed = new Set<string>()
  const placement = yield* AgentPlacement
  /** Whether nothing may resume the agent here: it moved away, or lives on another runner. */
  const hostedElsewhere = (agentId: string) => departed.has(agentId) || !placement.hostsHere(agentId)
  /** Each runtime registered (true) or gone (false), for `residency`. */
  const residencyChanges = yield* PubSub.unbounded<{ readonly agentId: string; readonly resident: boolean }>()
  const liveChildren = new Map<string, Set<string>>()
  const lanes = new Map<string, Lane>()
  const events = yield* Queue.unbounded<QueuedEvent>()
  let shuttingDown = false
  let paused: DaemonRetiring | undefined
  let creating = 0
  // Keyed by agent, not runtime: a watch outlives releases and resumes. A waiter with a position
  // (`after`) is owed the first finish journaled past it; one without, the next finish announced.
  const finishWaiters = new Map<string, Array<FinishWaiter>>()
  /** Finishes announced and not yet journaled, in order: one writer journals them. */
  const finishesToJournal = yield* Queue.unbounded<{ readonly agentId: string; readonly outcome: FinishOutcome }>()
  const lastReplies = new Map<string, string>()
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

  /** Answers the agent's waiters that `owed` picks, and forgets them. */
  const answerWaiters = (agentId: string, outcome: FinishOutcome, owed: (waiter: FinishWaiter) => boolean) => {
    const waiters = finishWaiters.get(agentId)
    if (waiters === undefined) return
    const remaining = waiters.filter((waiter) => !owed(waiter))
    if (remaining.length === 0) finishWaiters.delete(agentId)
    else finishWaiters.set(agentId, remaining)
    for (const waiter of waiters) if (owed(waiter)) Deferred.doneUnsafe(waiter.answer, Effect.succeed(outcome))
  }

  /**
   * A finish: the waiters without a position are answered now; the finish is then journaled,
   * and the waiters whose position it passes are answered with it (see `awaitFinish`).
   */
  const announceFinish = (agentId: string, kind: FinishKind) => {
    const outcome: FinishOutcome = { kind, lastReply: lastReplies.get(agentId) ?? null }
    answerWaiters(agentId, outcome, (waiter) => waiter.after === undefined)
    Queue.offerUnsafe(finishesToJournal, { agentId, outcome })
  }

  yield* Effect.forever(
    Effect.gen(function*() {
      const { agentId, outcome } = yield* Queue.take(finishesToJournal)
      const recorded = yield* journal.recordFinish(agentId, outcome).pipe(
        Effect.retry({ schedule: Schedule.exponential("100 millis"), times: 5 }),
        Effect.tapError((error) =>
          Effect.logWarning("Journaling an agent's finish failed; telling only the watches waiting now").pipe(
            Effect.annotateLogs({ agentId, error: error.message })
          )
        ),
        Effect.option
      )
      // Not journaled: those waiting now are told all the same (a watch that reaches a host
      // later would miss it).
      answerWaiters(agentId, outcome, (waiter) =>
        waiter.after !== undefined && (recorded._tag === "None" || waiter.after < recorded.value))
    })
  ).pipe(Effect.forkScoped)

  // ---- lanes -------------------------------------------------------------------------------

  const laneOf = (agentId: string): Lane => {
    let lane = lanes.get(agentId)
    if (lane === undefined) {
      lane = { semaphore: Semaphore.makeUnsafe(1), busy: 0 }
      lanes.set(agentId, lane)
    }
    return lane
  }

  /** Runs a lifecycle mutation in the agent's lane, one at a time per agent: activity, begun and ended. */
  const inLane = <A, E, R>(agentId: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const lane = laneOf(agentId)
      lane.busy++
      return noteActivity.pipe(
        Effect.andThen(lane.semaphore.withPermits(1)(effect)),
        Effect.ensuring(Effect.andThen(
          Effect.sync(() => {
            // Nobody holds or waits for it: the next operation makes a new one, so the map holds
            // only the lanes in use (it would otherwise grow with every agent ever seen).
            if (--lane.busy === 0 && lanes.get(agentId) === lane) lanes.delete(agentId)
          }),
          noteActivity
        ))
      )
    })

  const isLive = (agent: LiveAgent) => live.get(agent.agentId) === agent
  const blockersOf = (agent: LiveAgent) =>
    baselineBlockers(agent, isLive(agent), (lanes.get(agent.agentId)?.busy ?? 0) > 0)

  // ---- session events ----------------------------------------------------------------------

  const touch = (agent: LiveAgent, now: number) => {
    agent.lastActivityAt = now
    agent.activityCount++
    if (activity._tag === "Some") activity.value.touch(now)
  }

  const settleWaiters = (waiters: Array<Deferred.Deferred<void>> | undefined) => {
    if (waiters !== undefined) for (const waiter of waiters) Deferred.doneUnsafe(waiter, Effect.void)
  }

  const applyEvent = (agent: LiveAgent, event: SessionEvent, now: number) => {
    switch (event._tag) {
      case "PermissionRequested":
        ;(agent.permissions ??= new Set()).add(event.id)
        announceFinish(agent.agentId, "needs-permission")
        break
      case "PermissionResolved":
        agent.permissions?.delete(event.id)
        break
      case "SubagentStarted":
        ;(agent.subagents ??= new Set()).add(event.id)
        break
      case "SubagentFinished":
        agent.subagents?.delete(event.id)
        break
      case "Activity":
        break
      case "Reply":
        lastReplies.set(
          agent.agentId,
          event.text.length > maxReplyLength ? `…${event.text.slice(-maxReplyLength)}` : event.text
        )
        break
    }
    touch(agent, now)
  }

  // One consumer for every session's events; each agent counts its own until processed.
  yield* Effect.forever(
    Effect.gen(function*() {
      const { agent, event } = yield* Queue.take(events)
      applyEvent(agent, event, yield* Clock.currentTimeMillis)
      if (--agent.pendingEvents === 0) {
        const waiters = agent.drainWaiters
        agent.drainWaiters = undefined
        settleWaiters(waiters)
      }
    })
  ).pipe(Effect.forkScoped)

  const drainEvents = (agent: LiveAgent): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (agent.pendingEvents === 0) return Effect.void
      const waiter = Deferred.makeUnsafe<void>()
      ;(agent.drainWaiters ??= []).push(waiter)
      return Deferred.await(waiter)
    })

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
    prompts.wake(agent)
    settleWaiters(agent.turnWaiters)
    settleWaiters(agent.drainWaiters)
  }

  interface Target {
    agent: LiveAgent | undefined
    /** Events the session reported while it was still opening. */
    readonly early: Array<SessionEvent>
  }

  const enqueueEvent = (agent: LiveAgent, event: SessionEvent) => {
    agent.pendingEvents++
    Queue.offerUnsafe(events, { agent, event })
  }

  /** The session config for one runtime; its events land in the shared queue. */
  const sessionConfig = (record: AgentRecord, target: Target, runtimeMarker: string): SessionConfig => ({
    agentId: record.agentId,
    cwd: record.cwd,
    labels: record.labels,
    runtimeMarker,
    onEvent: (event) => {
      if (target.agent === undefined) target.early.push(event)
      else enqueueEvent(target.agent, event)
    }
  })

  /**
   * A runtime that ends on its own (crash, OOM kill) is gone: the agent becomes released, so the
   * next prompt resumes it from its saved session instead of talking to a dead process.
   */
  const watchForDeath = (agent: LiveAgent, exited: Effect.Effect<void>) =>
    exited.pipe(
      // A runtime the registry is closing (or closed) itself: its close does the rest.
      Effect.andThen(Effect.suspend(() => !isLive(agent) || agent.closedByDaemon ? Effect.void : inLane(
        agent.agentId,
        Effect.gen(function*() {
          if (!isLive(agent)) return
          unregister(agent)
          yield* runtimeRecords.forget(agent)
          const previous = records.get(agent.agentId)!
          const record: AgentRecord = {
            ...previous,
            lifecycle: "closed",
            lastActivityAt: Math.max(previous.lastActivityAt, agent.lastActivityAt),
            closedAt: yield* Clock.currentTimeMillis
          }
          records.set(agent.agentId, record)
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
   * Opens the runtime's session (a new one without a handle): on a warm process of the provider
   * when the reserve has one and the agent's cwd still exists (a new process is what reports a
   * missing one), else on a new process. A warm process that died before it took the session is
   * replaced by a new process; any other failure of the bind is the open's failure. Only the opens themselves can
   * be interrupted, so a taken warm process is always bound or closed.
   */
  const openSession = (
    record: AgentRecord,
    client: AgentClient,
    handle: PersistenceHandle | null,
    target: Target,
    restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  ) =>
    Effect.gen(function*() {
      const cold = Effect.gen(function*() {
        const marker = yield* randomId("runtime")
        const config = sessionConfig(record, target, marker)
        const session = yield* restore(handle === null ? client.create(config) : client.resume(handle, config))
        return { session, marker, handOver: Option.none<Effect.Effect<void>>() }
      })
      const warm = fs.existsSync(record.cwd) ? yield* reserve.take(record.provider) : Option.none()
      if (Option.isNone(warm)) return yield* cold
      const { handOver, marker, process } = warm.value
      const config = sessionConfig(record, target, marker)
      const bound = yield* Effect.exit(restore(handle === null ? process.create(config) : process.resume(handle, config)))
      if (Exit.isSuccess(bound)) return { session: bound.value, marker, handOver: Option.some(handOver) }
      // A provider that refused the session would refuse it on a new process too: only a warm
      // process that died (before the reserve saw it go) is replaced by a new one.
      const died = !process.running()
      yield* process.close
      if (!died || Exit.hasInterrupts(bound)) return yield* Effect.failCause(bound.cause)
      yield* Effect.logWarning("A warm process exited before it took the session; starting a new one").pipe(
        Effect.annotateLogs({ agentId: record.agentId, provider: record.provider, error: Cause.pretty(bound.cause) })
      )
      target.early.length = 0
      return yield* cold
    })

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
    const target: Target = { agent: undefined, early: [] }
    const { handOver, marker, session } = yield* openSession(record, client, handle, target, restore)
    const persistence = (yield* session.persistence) ?? record.persistence
    const agent: LiveAgent = {
      agentId: record.agentId,
      identity: {},
      session,
      parentAgentId: parentAgentIdOf(record.labels),
      internal: record.labels[internalAgentLabel] === "true",
      provider: record.provider,
      marker,
      sessionId: persistence?.sessionId ?? null,
      dispatch: Semaphore.makeUnsafe(1),
      lastActivityAt: yield* Clock.currentTimeMillis,
      activityCount: 0,
      turn: undefined,
      queued: 0,
      wake: Deferred.makeUnsafe(),
      gone: Deferred.makeUnsafe(),
      foregroundMutations: 0,
      releasing: false,
      barred: false,
      takingDown: false,
      closedByDaemon: false,
      pendingReplacement: false,
      pendingEvents: 0,
      drainWaiters: undefined,
      permissions: undefined,
      permissionResponses: 0,
      subagents: undefined,
      turnWaiters: undefined
    }
    target.agent = agent
    register(agent)
    const recorded = yield* runtimeRecords.record(agent)
    // The reserve's entry goes once the agent's covers the process; until then it stays.
    if (recorded && Option.isSome(handOver)) yield* handOver.value
    for (const event of target.early) enqueueEvent(agent, event)
    if (session.exited !== undefined) yield* watchForDeath(agent, session.exited)
    const active: AgentRecord = {
      ...record,
      persistence,
      lifecycle: "active",
      lastActivityAt: agent.lastActivityAt,
      closedAt: null
    }
    records.set(record.agentId, active)
    return { agent, record: active }
  })

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
  const takeDown = (agent: LiveAgent) =>
    Effect.suspend(() => {
      agent.barred = true
      agent.takingDown = true
      // Prompts queued behind the running turn let go of the dispatch permit; they resume it later.
      prompts.wake(agent)
      return agent.dispatch.withPermits(1)(
        drainEvents(agent).pipe(Effect.andThen(closeRuntime(agent)))
      ).pipe(Effect.ensuring(Effect.sync(() => {
        agent.barred = false
        agent.takingDown = false
      })))
    })

  /**
   * Closes the runtime and persists a closed, resumable record (C2, C10). Uninterruptible: once
   * begun it finishes. A failed close keeps the runtime registered; a failed persist after a
   * successful close is reported while the in-memory record stays resumable.
   */
  const closeRuntime = (agent: LiveAgent): Effect.Effect<void, RuntimeCloseFailed | RuntimePersistFailed> =>
    Effect.uninterruptible(Effect.gen(function*() {
      const persistence = yield* agent.session.persistence
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
        closedAt: now
      }
      records.set(agent.agentId, record)
      yield* saveRecord(record).pipe(
        Effect.mapError((error) => new RuntimePersistFailed({ agentId: agent.agentId, message: error.message }))
      )
    }))

  const resume = Effect.fnUntraced(function*(agentId: string) {
    const record = records.get(agentId)
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
    inLane(
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

  // ---- prompts -----------------------------------------------------------------------------

  const prompts = makePrompts({
    journal,
    carryScope,
    turnScope,
    maxPromptBytes: options.maxPromptBytes ?? defaultMaxPromptBytes,
    recordOf: (agentId) => records.get(agentId),
    isDeleting: (agentId) => deleting.has(agentId),
    hasDeparted: hostedElsewhere,
    liveOf: (agentId) => live.get(agentId),
    isLive,
    isShuttingDown: () => shuttingDown,
    admissionPaused: () => paused,
    requireProvider: (provider) => Effect.asVoid(providers.get(provider)),
    // One synchronous step: a prompt either finds a live runtime that is not being released and
    // marks it busy, or it does not touch it at all (C9).
    admit: (agentId, now) => {
      const agent = live.get(agentId)
      if (agent === undefined || agent.barred || shuttingDown) return undefined
      touch(agent, now)
      agent.foregroundMutations++
      return agent
    },
    ensureResident,
    touch,
    afterTurn: (agent) => refreshPersistence(agent).pipe(Effect.andThen(drainEvents(agent))),
    announceFinish
  })

  // ---- lifecycle ---------------------------------------------------------------------------

  const create = Effect.fn("AgentRegistry.create")(function*(input: CreateAgent) {
    if (shuttingDown) return yield* ShuttingDown.of("creating an agent")
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
        const made = yield* refreshRecord(agentId).pipe(Effect.andThen(Effect.sync(() => records.get(agentId))))
        if (made !== undefined) return made
      }
      const loaded = yield* loadSession(draft, client, null, restore)
      // Nothing half-created: a record that cannot be saved takes its runtime down with it.
      yield* store.put(loaded.record).pipe(
        Effect.tapError(() =>
          loaded.agent.session.close.pipe(
            Effect.catch((error) =>
              Effect.logWarning("Closing the runtime of an agent that could not be saved failed").pipe(
                Effect.annotateLogs({ agentId, error: error.message })
              )
            ),
            Effect.andThen(Effect.sync(() => {
              unregister(loaded.agent)
              records.delete(agentId)
            })),
            Effect.andThen(runtimeRecords.forget(loaded.agent))
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
    yield* inLane(agentId, Effect.andThen(Effect.sync(() => departed.delete(agentId)), refreshRecord(agentId)))
    // On a shared store, the agent's unfinished turns are this daemon's to take over once it hosts the agent.
    if (options.sharedStore === true) yield* prompts.recover(agentId)
  })

  /** `adopt` for a caller that holds the agent's lane. */
  const refreshRecord = (agentId: string) =>
    Effect.gen(function*() {
      // Live here, or newer here than in the store (it refused the last save): this copy is the truth.
      if (live.has(agentId) || unsaved.has(agentId)) return
      const stored = yield* store.get(agentId)
      if (Option.isSome(stored)) records.set(agentId, stored.value)
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

  const requireKnown = (agentId: string) =>
    records.has(agentId) ? Effect.void : Effect.fail(AgentNotFound.of(agentId))

  const close = Effect.fn("AgentRegistry.close")(function*(agentId: string, options?: { readonly unlessBlocked?: boolean | undefined }) {
    yield* requireKnown(agentId)
    return yield* inLane(agentId, Effect.gen(function*() {
      // Deleted while this close waited for the lane.
      if (!records.has(agentId)) return yield* AgentNotFound.of(agentId)
      const agent = live.get(agentId)
      if (agent === undefined) return noBlockers
      yield* drainEvents(agent)
      // What the close ends, as it stands once nothing more is admitted: work admitted since the
      // caller looked (a prompt's turn, a permission) is in it; this close's own hold on the lane
      // is not. Unless blocked, any of it keeps the runtime; otherwise the close ends it.
      const found = baselineBlockers(agent, isLive(agent), false)
      if (found.length > 0 && options?.unlessBlocked === true) return found
      yield* takeDown(agent)
      announceFinish(agentId, "closed")
      return found
    }))
  })

  const remove = Effect.fn("AgentRegistry.delete")(function*(agentId: string, options?: { readonly unlessBlocked?: boolean | undefined }) {
    yield* requireKnown(agentId)
    return yield* inLane(agentId, Effect.gen(function*() {
      // Deleted by another call while this one waited for the lane.
      if (!records.has(agentId)) return yield* AgentNotFound.of(agentId)
      deleting.add(agentId)
      return yield* Effect.gen(function*() {
        const unfinished = prompts.carried().find((record) => record.agentId === agentId)
        if (unfinished !== undefined) return yield* AgentBusy.of(agentId, unfinished.turnId, unfinished.state)
        // Admitted before the delete began and not yet a turn: it will be one, so it refuses too.
        if (prompts.acceptingFor(agentId) > 0) return yield* AgentBusy.accepting(agentId)
        const agent = live.get(agentId)
        let found: ReadonlyArray<Blocker> = noBlockers
        if (agent !== undefined) {
          yield* drainEvents(agent)
          // What the delete ends, as the close reads it: unless blocked, any of it keeps the agent.
          found = baselineBlockers(agent, isLive(agent), false)
          if (found.length > 0 && options?.unlessBlocked === true) return found
          yield* takeDown(agent)
        }
        // The turns first: a record left behind by a failure here is still a whole agent.
        yield* journal.removeAgent(agentId)
        yield* store.remove(agentId)
        records.delete(agentId)
        lastReplies.delete(agentId)
        unsaved.delete(agentId)
        announceFinish(agentId, "closed")
        yield* Effect.logInfo("Agent deleted").pipe(Effect.annotateLogs({ agentId }))
        return found
      }).pipe(Effect.ensuring(Effect.sync(() => deleting.delete(agentId))))
    }))
  })

  const reload = Effect.fn("AgentRegistry.reload")(function*(agentId: string) {
    yield* requireKnown(agentId)
    yield* inLane(agentId, Effect.gen(function*() {
      const agent = live.get(agentId)
      if (agent !== undefined) {
        agent.pendingReplacement = true
        yield* takeDown(agent).pipe(Effect.ensuring(Effect.sync(() => (agent.pendingReplacement = false))))
      }
      yield* resume(agentId)
    }))
  })

  const interrupt = Effect.fn("AgentRegistry.interrupt")(function*(agentId: string) {
    yield* requireKnown(agentId)
    const agent = live.get(agentId)
    if (agent?.turn === undefined) return
    // A failure the turn ends with from now on is the interruption, not the turn's own error.
    agent.turn.interruptRequested = true
    yield* agent.session.interrupt
  })

  const respondToPermission = Effect.fn("AgentRegistry.respondToPermission")(
    function*(agentId: string, permissionId: string, allow: boolean) {
      yield* requireKnown(agentId)
      const agent = live.get(agentId)
      if (agent === undefined) return yield* PermissionNotPending.of(agentId, permissionId)
      // Events already reported are applied first, so a request that just arrived is known.
      yield* drainEvents(agent)
      if (agent.permissions?.has(permissionId) !== true) {
        return yield* PermissionNotPending.of(agentId, permissionId, true)
      }
      agent.permissionResponses++
      touch(agent, yield* Clock.currentTimeMillis)
      yield* agent.session.respondToPermission(permissionId, allow).pipe(
        Effect.ensuring(Effect.sync(() => agent.permissionResponses--))
      )
    }
  )

  const awaitFinish = (agentId: string, options?: { readonly after?: number | undefined }) =>
    Effect.suspend(() => {
      if (!records.has(agentId)) return Effect.fail(AgentNotFound.of(agentId))
      const waiter: FinishWaiter = { after: options?.after, answer: Deferred.makeUnsafe<FinishOutcome>() }
      const waiters = finishWaiters.get(agentId)
      if (waiters === undefined) finishWaiters.set(agentId, [waiter])
      else waiters.push(waiter)
      const after = waiter.after
      // Waiting first, then reading the journal: a finish journaled after the read answers the
      // waiter when it is journaled, and one journaled before is in what the read returns.
      const journaled = after === undefined ? Effect.void : journal.lastFinish(agentId).pipe(
        Effect.tap((last) =>
          Effect.sync(() => {
            if (Option.isSome(last) && last.value.position > after) {
              answerWaiters(agentId, last.value.outcome, (other) => other === waiter)
            }
          })
        ),
        Effect.catch((error) =>
          Effect.logWarning("Reading an agent's journaled finish failed; waiting for its next").pipe(
            Effect.annotateLogs({ agentId, error: error.message })
          )
        )
      )
      return journaled.pipe(
        Effect.andThen(Deferred.await(waiter.answer)),
        Effect.onInterrupt(() =>
          Effect.sync(() => {
            const remaining = finishWaiters.get(agentId)?.filter((other) => other !== waiter)
            if (remaining === undefined || remaining.length === 0) finishWaiters.delete(agentId)
            else finishWaiters.set(agentId, remaining)
          })
        )
      )
    })

  const awaitIdle = (agentId: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const agent = live.get(agentId)
      if (agent === undefined || (agent.turn === undefined && agent.queued === 0 && agent.foregroundMutations === 0)) {
        return Effect.void
      }
      const waiter = Deferred.makeUnsafe<void>()
      ;(agent.turnWaiters ??= []).push(waiter)
      // The slot freed; a queued prompt may take it next, so look again.
      return Deferred.await(waiter).pipe(Effect.andThen(Effect.yieldNow), Effect.andThen(awaitIdle(agentId)))
    })

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
      Effect.orElseSucceed(() => [...records.values()])
    )
    return yield* viewsOf(stored.map((record) => (live.has(record.agentId) ? records.get(record.agentId) : undefined) ?? record))
  })

  const view = (record: AgentRecord, configuredProviders: ReadonlySet<string>): AgentView => {
    const agent = live.get(record.agentId)
    return {
      record,
      resident: agent !== undefined,
      pid: agent?.session.pid ?? null,
      pendingPermissions: agent?.permissions === undefined ? [] : [...agent.permissions],
      providerAvailable: configuredProviders.has(record.provider)
    }
  }

  // ---- collection candidates ---------------------------------------------------------------

  const candidateOf = (agent: LiveAgent, activityCount = agent.activityCount): RuntimeCandidate => ({
    identity: agent.identity,
    agentId: agent.agentId,
    parentAgentId: agent.parentAgentId,
    provider: agent.provider,
    sessionId: agent.sessionId,
    lastActivityAt: agent.lastActivityAt,
    blockers: Effect.sync(() => blockersOf(agent)),
    residentBytes: agent.session.pid === undefined || Option.isNone(inspection)
      ? undefined
      : Effect.map(inspection.value.sample(agent.session.pid), (sample) => Option.getOrUndefined(sample)?.rssBytes),
    process: agent.session.pid === undefined ? undefined : { pid: agent.session.pid },
    canStopRuntime: agent.session.canStopRuntime,
    closeIfEligible: (revalidate) =>
      Effect.suspend(() => {
        if (!isLive(agent) || agent.sessionId === null || agent.barred) return Effect.succeed(false)
        // Bar admission before entering the lane: a prompt from now on waits for the outcome.
        agent.barred = true
        agent.releasing = true
        return inLane(
          agent.agentId,
          Effect.gen(function*() {
            if (!isLive(agent)) return false
            yield* drainEvents(agent)
            if (!(yield* revalidate)) return false
            // The collector compares timestamps; the owner also compares its own activity count,
            // which tells apart two activities in the same millisecond.
            if (agent.activityCount !== activityCount) return false
            yield* closeRuntime(agent)
            yield* Effect.logDebug("Released agent runtime").pipe(Effect.annotateLogs({ agentId: agent.agentId }))
            return true
          })
        ).pipe(Effect.ensuring(Effect.sync(() => {
          agent.barred = false
          agent.releasing = false
        })))
      })
  })

  const candidates = RuntimeCandidates.of({
    capture: Effect.gen(function*() {
      const out: Array<RuntimeCandidate> = []
      for (const agent of live.values()) {
        if (agent.sessionId === null) yield* refreshPersistence(agent)
        out.push(candidateOf(agent))
      }
      return out
    }),
    captureFamily: (agentId) =>
      Effect.sync(() => {
        const root = live.get(agentId)
        if (root === undefined) return []
        const out = [candidateOf(root)]
        const seen = new Set([agentId])
        for (let i = 0; i < out.length; i++) {
          for (const childId of liveChildren.get(out[i]!.agentId) ?? []) {
            const child = live.get(childId)
            if (child === undefined || seen.has(childId)) continue
            seen.add(childId)
            out.push(candidateOf(child))
          }
        }
        return out
      })
  })

  const stopAdmission = Effect.suspend(() => {
    shuttingDown = true
    return prompts.stopWaiting
  })

  // Before anything is admitted: what a previous daemon's runtimes left running is ended, and its
  // journal is taken over.
  yield* runtimeRecords.endPrevious
  if (options.sharedStore !== true) yield* prompts.recover()

  // Ended turns are kept for the retention, and at most so many per agent.
  const retention = Duration.toMillis(Duration.fromInputUnsafe(options.turnRetention ?? Duration.hours(168)))
  const pruneJournal = Effect.gen(function*() {
    const removed = yield* journal.prune((yield* Clock.currentTimeMillis) - retention, maxEndedTurnsPerAgent)
    if (removed > 0) yield* Effect.logDebug("Pruned the turn journal").pipe(Effect.annotateLogs({ removed }))
  }).pipe(Effect.catch((error) => Effect.logWarning("Pruning the turn journal failed").pipe(
    Effect.annotateLogs({ error: error.message })
  )))
  yield* pruneJournal.pipe(
    Effect.andThen(Effect.sleep("1 hour")),
    Effect.forever,
    Effect.forkIn(scope)
  )

  /**
   * What stopping this runtime now ends, in words (H3): `work` is what a stop cuts off — its
   * running turn, a pending permission, subagents, background work its provider names — and
   * `unpermitted` the provider's refusal that names no work: a veto that cannot rule work out
   * (an OMP before 18.3 never permits), or no answer (asked once, briefly). An unknown is never
   * taken as idle, nor reported as work the stop interrupted.
   */
  const shutdownProbeTimeout = Duration.fromInputUnsafe(options.shutdownProbeTimeout ?? "1 second")
  const whatStopEnds = (agent: LiveAgent) =>
    Effect.gen(function*() {
      const work: Array<string> = []
      let unpermitted: string | undefined
      if (agent.turn !== undefined) work.push(`turn ${agent.turn.turnId} was running`)
      if (agent.permissions !== undefined && agent.permissions.size > 0) work.push("a permission was pending")
      if (agent.subagents !== undefined && agent.subagents.size > 0) work.push(`${agent.subagents.size} subagent(s) were running`)
      if (agent.session.canStopRuntime !== undefined && Duration.isGreaterThan(shutdownProbeTimeout, Duration.zero)) {
        const unknown = (reason: string): StopAnswer => stopWorkUnknown(`background work unknown (${reason})`)
        const answer = yield* agent.session.canStopRuntime.pipe(
          Effect.timeoutOption(shutdownProbeTimeout),
          Effect.map(Option.getOrElse(() => unknown("the provider did not answer in time"))),
          // Whatever went wrong asking (a defect too), this runtime's close and the others' go on.
          Effect.catch((error) => Effect.succeed(unknown(error.message))),
          Effect.catchCause(() => Effect.succeed(unknown("the provider failed asking")))
        )
        if (!answer.canStop && answer.workUnknown === true) unpermitted = answer.reason
        else if (!answer.canStop) work.push(answer.reason)
      }
      // Work seen: the refusal that named none adds nothing to it.
      return { work, unpermitted: work.length === 0 ? unpermitted : undefined }
    })

  // On shutdown admission closes first (and every waiting caller is answered); then every live
  // runtime is closed in its lane and saved as resumable, all at once (so the host's deadline is
  // one close grace, not one per runtime), and the turns they ran are recorded. What each close
  // interrupted is said by name, and a close its provider did not permit without naming work, apart;
  // the shutdown ends with one summary line. Failures are logged.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      yield* stopAdmission
      yield* Scope.close(carryScope, Exit.void)
      let released = 0
      const interrupted: Array<string> = []
      const unpermitted: Array<string> = []
      // Idle warm processes close alongside the runtimes, within the same shutdown deadline.
      const closingReserve = yield* Effect.forkChild(reserve.close)
      yield* Effect.forEach([...live.keys()], (agentId) =>
        inLane(
          agentId,
          Effect.suspend(() => {
            const agent = live.get(agentId)
            if (agent === undefined) return Effect.void
            const annotated = Effect.annotateLogs({ agentId, provider: agent.provider })
            return whatStopEnds(agent).pipe(
              Effect.tap(({ unpermitted: reason, work }) =>
                work.length > 0
                  ? Effect.logWarning(`Stopping agent ${agentId} interrupts: ${work.join("; ")}`).pipe(annotated)
                  : reason !== undefined
                  ? Effect.logWarning(`Stopping agent ${agentId} without its provider's permission: ${reason}`).pipe(annotated)
                  : Effect.void
              ),
              Effect.flatMap(({ unpermitted: reason, work }) =>
                takeDown(agent).pipe(Effect.tap(() =>
                  Effect.sync(() => {
                    released++
                    if (work.length > 0) interrupted.push(`${agentId} (${work.join("; ")})`)
                    else if (reason !== undefined) unpermitted.push(`${agentId} (${reason})`)
                  })
                ))
              )
            )
          })
        ).pipe(
          Effect.catch((error) =>
            Effect.logWarning("Closing agent runtime at shutdown failed").pipe(
              Effect.annotateLogs({ agentId, error: error.message })
            )
          )
        ), { concurrency: "unbounded", discard: true })
      yield* Fiber.join(closingReserve)
      // A daemon that had nothing resident has nothing to summarize.
      if (released > 0 || interrupted.length > 0) {
        yield* Effect.logInfo(
          `Shutdown released ${released} runtime${released === 1 ? "" : "s"} resumable; ` +
            (interrupted.length === 0 ? "no work was interrupted" : `interrupted: ${interrupted.join(", ")}`) +
            (unpermitted.length === 0 ? "" : `; closed without the provider's permission: ${unpermitted.join(", ")}`)
        ).pipe(Effect.annotateLogs({ released, interrupted: interrupted.length, unpermitted: unpermitted.length }))
      }
      // Closing the runtimes ended their turns; their outcomes are written before the store closes.
      yield* Effect.forEach(prompts.running(), (handle) => Deferred.await(handle.ended), { discard: true }).pipe(
        Effect.timeoutOption("5 seconds")
      )
    })
  )

  return AgentRegistry.of({
    create,
    adopt,
    relinquish: (agentId) => Effect.sync(() => void departed.add(agentId)),
    release: (agentId) =>
      inLane(agentId, Effect.gen(function*() {
        const agent = live.get(agentId)
        if (agent === undefined) return false
        yield* takeDown(agent)
        return true
      })),
    residency,
    prompt: prompts.prompt,
    turn: prompts.turn,
    turns: prompts.turns,
    stopAdmission,
    retryWrites: Effect.gen(function*() {
      yield* prompts.retryWrites
      for (const agentId of [...unsaved.keys()]) {
        const record = records.get(agentId)
        if (record !== undefined) yield* Effect.ignore(saveRecord(record))
      }
    }),
    pauseAdmission: (refusal) => Effect.sync(() => (paused = refusal)),
    resumeAdmission: Effect.sync(() => (paused = undefined)),
    retirementBlockers: Effect.sync(() => {
      const blockers: Array<RetirementBlocker> = []
      for (const record of prompts.carried()) {
        blockers.push({ category: `turn-${record.state}`, agentId: record.agentId, detail: record.turnId })
      }
      for (const [agentId, lane] of lanes) {
        if (lane.busy > 0 && !live.has(agentId)) blockers.push({ category: "lifecycle-operation", agentId })
      }
      const failing = prompts.failingWrite()
      if (failing !== undefined) blockers.push({ category: "store-failing", detail: `turn ${failing.turnId}: ${failing.message}` })
      for (const [agentId, message] of unsaved) blockers.push({ category: "store-failing", agentId, detail: message })
      if (prompts.accepting() > 0) blockers.push({ category: "prompt-accepting", detail: `${prompts.accepting()} in progress` })
      if (creating > 0) blockers.push({ category: "agent-creating", detail: `${creating} in progress` })
      return blockers
    }),
    interrupt,
    respondToPermission,
    close,
    delete: remove,
    laneCount: Effect.sync(() => lanes.size),
    reload,
    awaitFinish,
    awaitIdle,
    get: (agentId) =>
      Effect.suspend(() => {
        const record = records.get(agentId)
        return record === undefined
          ? Effect.fail(AgentNotFound.of(agentId))
          : Effect.map(providers.providers, (ids) => view(record, new Set(ids)))
      }),
    list: options.sharedStore === true ? sharedList : Effect.suspend(() => viewsOf([...records.values()])),
    residents: Effect.suspend(() => viewsOf([...live.keys()].flatMap((agentId) => records.get(agentId) ?? []))),
    candidates
  })
})

/** The registry over the store, the turn journal and the providers. */
export const layer: Layer.Layer<AgentRegistry, AgentStoreError, AgentStore | TurnJournal | RuntimeLedger | ProviderRegistry> = Layer.effect(
  AgentRegistry,
  makeAgentRegistry()
)

/** The registry with options (prompt bound, journal retention). */
export const layerWith = (
  options: AgentRegistryOptions
): Layer.Layer<AgentRegistry, AgentStoreError, AgentStore | TurnJournal | RuntimeLedger | ProviderRegistry> =>
  Layer.effect(AgentRegistry, makeAgentRegistry(options))

/** The registry's live runtimes as the collector's candidates. */
export const candidatesLayer: Layer.Layer<RuntimeCandidates, never, AgentRegistry> = Layer.effect(
  RuntimeCandidates,
  Effect.gen(function*() {
    return (yield* AgentRegistry).candidates
  })
)
