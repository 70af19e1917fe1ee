/**
 * The prompt path of the registry: acceptance into the durable journal, dispatch to the runtime
 * (one turn at a time per runtime, queued behind the running one unless the provider can steer
 * into it), the turn's outcome, and the recovery of a previous process's journal at start.
 *
 * Every accepted prompt is carried by one fiber in the registry's scope, never by its caller: a
 * caller that goes away (a client abort) stops waiting and nothing else. What a caller waits for
 * is a `TurnHandle`; a repeat of a client message id waits for the same one, or reads the journal.
 */
import { Cause, Clock, Deferred, Effect, Exit, Option, type Scope } from "effect"
import type { AgentRecord } from "../../domain/agent.ts"
import {
  AgentNotFound,
  AgentNotResumable,
  type AgentStoreError,
  isRefusal,
  type ProviderNotFound,
  PromptTooLarge,
  ShuttingDown,
  TurnNotFound
} from "../../domain/errors.ts"
import type { FinishKind } from "../../domain/finish.ts"
import type { DaemonRetiring } from "../../domain/retirement.ts"
import type { TurnEnd } from "../../domain/provider.ts"
import { type Disposition, isFinal, isRetryable, type TurnError, type TurnRecord } from "../../domain/turn.ts"
import type { PromptError, PromptOptions, PromptReceipt } from "../../services/AgentRegistry.ts"
import type { TurnJournal } from "../../services/TurnJournal.ts"
import { randomId } from "../../platform/ids.ts"
import type { ActiveTurn, LiveAgent } from "./LiveAgent.ts"
import type { TurnHandle, TurnOutcome } from "./turnHandle.ts"

/** What the prompt path needs from the rest of the registry. */
export interface PromptHost {
  readonly journal: TurnJournal["Service"]
  /** Where the fibers that carry prompts to the provider run; closed first at shutdown. */
  readonly carryScope: Scope.Scope
  /** Where the fibers that wait for running turns run; closed after the runtimes are. */
  readonly turnScope: Scope.Scope
  /** The largest prompt accepted, measured JSON-encoded (as it travels to a provider). */
  readonly maxPromptBytes: number
  readonly recordOf: (agentId: string) => AgentRecord | undefined
  /** The agent is being deleted: no new prompt to it is admitted. */
  readonly isDeleting: (agentId: string) => boolean
  readonly liveOf: (agentId: string) => LiveAgent | undefined
  readonly isLive: (agent: LiveAgent) => boolean
  readonly isShuttingDown: () => boolean
  /** Set while a retirement is attempted: new prompts are refused with it. */
  readonly admissionPaused: () => DaemonRetiring | undefined
  readonly requireProvider: (provider: string) => Effect.Effect<void, ProviderNotFound>
  /**
   * Admission, one synchronous step: a live runtime that is not being released is marked busy
   * (a foreground mutation) and returned; otherwise nothing is touched.
   */
  readonly admit: (agentId: string, now: number) => LiveAgent | undefined
  /** Waits for any release in progress, then resumes the runtime unless someone already did. */
  readonly ensureResident: (agentId: string) => Effect.Effect<void, unknown>
  /** This process no longer hosts the agent (a cluster moved it): nothing resumes it here. */
  readonly hasDeparted: (agentId: string) => boolean
  readonly touch: (agent: LiveAgent, now: number) => void
  /** After a turn's end, before anyone hears of it: the events it reported are applied. */
  readonly afterTurn: (agent: LiveAgent) => Effect.Effect<void>
  readonly announceFinish: (agentId: string, kind: FinishKind) => void
}

const clientKey = (agentId: string, clientMessageId: string) => `${agentId}\u0000${clientMessageId}`

/** An error as a turn records it. */
const turnError = (error: unknown): TurnError =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string" &&
    "message" in error && typeof error.message === "string"
    ? { _tag: error._tag, message: error.message }
    : { _tag: "Defect", message: String(error) }

const causeError = (cause: Cause.Cause<unknown>): TurnError => {
  const failure = Cause.findErrorOption(cause)
  return Option.isSome(failure) ? turnError(failure.value) : { _tag: "Defect", message: Cause.pretty(cause) }
}

/** What the provider got of a prompt that ended without running (see `record`). */
type Reach = "taken" | "refused" | "unknown"

/** What a prompt resolved to: a turn in flight here, or a record that needs nobody. */
type Resolution = { readonly handle: TurnHandle } | { readonly record: TurnRecord }

export const makePrompts = (host: PromptHost) => {
  /**
   * Records the journal refused, newest per turn: written again after the next write that
   * succeeds. While any is left the store is failing, and the daemon may not retire (R2).
   */
  const unwritten = new Map<string, TurnRecord>()
  let lastWriteError = ""
  const writeAgain = Effect.suspend(() =>
    Effect.forEach([...unwritten.values()], (record) =>
      host.journal.update(record).pipe(
        Effect.andThen(Effect.sync(() => {
          if (unwritten.get(record.turnId) === record) unwritten.delete(record.turnId)
        })),
        Effect.ignore
      ), { discard: true })
  )
  // Every write goes through here, so that a failing store is known and nothing it refused is lost.
  const journal: TurnJournal["Service"] = {
    ...host.journal,
    update: (record) =>
      host.journal.update(record).pipe(
        Effect.tapError((error) =>
          Effect.sync(() => {
            unwritten.set(record.turnId, record)
            lastWriteError = error.message
          })
        ),
        Effect.tap(() => {
          unwritten.delete(record.turnId)
          return unwritten.size === 0 ? Effect.void : writeAgain
        })
      )
  }
  /** Prompts past admission and not yet carried (nor refused): a retirement waits for them. */
  let accepting = 0
  /** The same, per agent. */
  const acceptingFor = new Map<string, number>()
  const failingWrite = () =>
    unwritten.size === 0 ? undefined : { turnId: [...unwritten.keys()][0]!, message: lastWriteError }
  /** Turns in flight in this process, by turn id, and by client message id. */
  const handles = new Map<string, TurnHandle>()
  const byClient = new Map<string, TurnHandle>()
  /** Turns a provider has taken and not yet ended: the shutdown waits for their outcome. */
  const taken = new Set<TurnHandle>()
  /**
   * Turns this process claimed and has not ended: their next hand-over is written, not claimed
   * again (a write back to `accepted` the store refused would otherwise read as another's claim).
   */
  const claimedHere = new Set<string>()
  /** Client ids being looked up or accepted right now: a concurrent repeat waits for the same answer. */
  const resolving = new Map<string, Deferred.Deferred<Resolution, PromptError>>()
  /** Completed when the shutdown begins: every waiting caller is answered then. */
  const stopping = Deferred.makeUnsafe<void>()

  const receiptOf = (record: TurnRecord): PromptReceipt => ({
    agentId: record.agentId,
    turnId: record.turnId,
    sessionId: host.liveOf(record.agentId)?.sessionId ?? host.recordOf(record.agentId)?.persistence?.sessionId ?? null,
    state: record.state,
    disposition: record.disposition,
    joinedTurnId: record.joinedTurnId,
    resumed: record.resumed,
    error: record.error,
    ...(isFinal(record.state) ? { output: record.reply } : {})
  })

  const logWriteFailure = (record: TurnRecord, error: AgentStoreError) =>
    Effect.logWarning("Recording a turn failed").pipe(
      Effect.annotateLogs({ agentId: record.agentId, turnId: record.turnId, state: record.state, error: error.message })
    )

  /**
   * Records a final state and lets go of the handle; `announce` then answers whoever waits on it.
   * `reach` says what the provider got: `"taken"` (as recorded), `"refused"` (it certainly never
   * acted on the prompt, so a repeat may run it), or `"unknown"` (it may have: never run again).
   */
  const record = (handle: TurnHandle, outcome: TurnOutcome, reach: Reach = "taken") =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const final: TurnRecord = {
        ...handle.record,
        ...outcome,
        ...(reach === "refused" ? { disposition: null, joinedTurnId: null, dispatchedAt: null } : {}),
        ...(reach === "unknown" ? { dispatchedAt: handle.record.dispatchedAt ?? now } : {}),
        endedAt: now
      }
      handle.record = final
      taken.delete(handle)
      claimedHere.delete(final.turnId)
      // Durable first: a repeat that no longer finds the handle reads this from the journal.
      yield* journal.update(final).pipe(Effect.catch((error) => logWriteFailure(final, error)))
      handles.delete(final.turnId)
      if (final.clientMessageId !== null && byClient.get(clientKey(final.agentId, final.clientMessageId)) === handle) {
        byClient.delete(clientKey(final.agentId, final.clientMessageId))
      }
    })

  const announce = (handle: TurnHandle) => {
    const receipt = receiptOf(handle.record)
    Deferred.doneUnsafe(handle.dispatched, Exit.succeed(receipt))
    Deferred.doneUnsafe(handle.ended, Exit.succeed(receipt))
  }

  const settle = (handle: TurnHandle, outcome: TurnOutcome, reach: Reach = "taken") =>
    Effect.andThen(record(handle, outcome, reach), Effect.sync(() => announce(handle)))

  /**
   * Marks the prompt as being handed to the provider, durably, before it is: a crash from here on
   * can never run it a second time (a recovery finds it `running` and reports it interrupted).
   * False when the journal refused the write: the prompt then fails without reaching the provider.
   */
  const markRunning = (handle: TurnHandle, disposition: Disposition, joinedTurnId: string | null, resumed: boolean) =>
    Effect.gen(function*() {
      const record: TurnRecord = { ...handle.record, state: "running", disposition, joinedTurnId, resumed, dispatchedAt: null }
      const claimed = yield* Effect.exit(
        claimedHere.has(record.turnId) ? Effect.as(journal.update(record), true) : journal.claim(record)
      )
      if (Exit.isFailure(claimed)) {
        yield* settle(handle, { state: "failed", reply: null, error: causeError(claimed.cause) }, "refused")
        return false
      }
      if (!claimed.value) {
        yield* letGo(handle)
        return false
      }
      claimedHere.add(record.turnId)
      handle.record = record
      return true
    })

  /**
   * A turn another process claimed first, or that waits for a host this process no longer is: it
   * runs there, never here. Its callers are answered with the journal's record of it, and nothing
   * is written.
   */
  const letGo = (handle: TurnHandle) =>
    Effect.gen(function*() {
      const stored = yield* host.journal.get(handle.record.agentId, handle.record.turnId).pipe(Effect.orElseSucceed(Option.none))
      if (Option.isSome(stored)) handle.record = stored.value
      taken.delete(handle)
      // Only this handle's entry: a second handle of the same turn in this process keeps its own.
      if (handles.get(handle.record.turnId) === handle) handles.delete(handle.record.turnId)
      if (handle.record.clientMessageId !== null && byClient.get(clientKey(handle.record.agentId, handle.record.clientMessageId)) === handle) {
        byClient.delete(clientKey(handle.record.agentId, handle.record.clientMessageId))
      }
      yield* Effect.logWarning("This turn runs elsewhere (another process took it, or its agent moved); not run here").pipe(
        Effect.annotateLogs({ agentId: handle.record.agentId, turnId: handle.record.turnId, state: handle.record.state })
      )
      announce(handle)
    })

  /**
   * The provider has taken the prompt (`dispatchedAt`). Written after the fact, and not waited
   * for (the journal keeps writes in order, so the turn's end cannot be overtaken by it): a crash
   * before it is durable leaves a handover whose arrival is unknown, which a recovery tells apart
   * from a turn that ran.
   */
  const markTaken = (handle: TurnHandle) =>
    Effect.gen(function*() {
      const record: TurnRecord = { ...handle.record, dispatchedAt: yield* Clock.currentTimeMillis }
      handle.record = record
      yield* journal.update(record).pipe(
        Effect.catch((error) => logWriteFailure(record, error)),
        Effect.forkIn(host.turnScope, { startImmediately: true })
      )
    })

  /** Back to `accepted`: the provider did not take the prompt after all (it could not steer). */
  const markAccepted = (handle: TurnHandle) => {
    const record: TurnRecord = { ...handle.record, state: "accepted", disposition: null, joinedTurnId: null, dispatchedAt: null }
    handle.record = record
    return journal.update(record).pipe(Effect.catch((error) => logWriteFailure(record, error)))
  }

  const wake = (agent: LiveAgent) => {
    const woken = agent.wake
    agent.wake = Deferred.makeUnsafe<void>()
    Deferred.doneUnsafe(woken, Exit.void)
  }

  const settleTurnWaiters = (agent: LiveAgent) => {
    const waiters = agent.turnWaiters
    agent.turnWaiters = undefined
    if (waiters !== undefined) for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
  }

  /** How a turn ended, from the provider's word and what the daemon did to it. */
  const outcomeOf = (agent: LiveAgent, active: ActiveTurn, exit: Exit.Exit<TurnEnd, unknown>): TurnOutcome => {
    // Asked to stop, a turn's end is its interruption, however the provider words it (many end an
    // aborted turn like any other).
    const interrupted = active.interruptRequested || agent.closedByDaemon
    if (Exit.isSuccess(exit)) {
      const cut = interrupted || exit.value.interrupted === true
      return {
        state: cut ? "interrupted" : "completed",
        reply: exit.value.reply,
        error: cut ? { _tag: "TurnInterrupted", message: "The turn was interrupted" } : null
      }
    }
    return { state: interrupted ? "interrupted" : "failed", reply: null, error: causeError(exit.cause) }
  }

  /** Waits for the running turn's end (or its runtime's), then records it for everyone in it. */
  const finishTurn = (agent: LiveAgent, active: ActiveTurn, end: Effect.Effect<TurnEnd, unknown>) =>
    Effect.gen(function*() {
      const gone = Deferred.await(agent.gone).pipe(
        Effect.andThen(Effect.suspend(() =>
          Effect.fail({
            _tag: "RuntimeGone",
            message: agent.closedByDaemon ? "the runtime was closed during the turn" : "the runtime exited during the turn"
          })
        ))
      )
      const exit = yield* Effect.exit(Effect.raceFirst(end, gone))
      // What the daemon had done to the turn when it ended: a close or an interrupt that comes
      // while its end is processed does not change how it ended.
      const outcome = outcomeOf(agent, active, exit)
      host.touch(agent, yield* Clock.currentTimeMillis)
      yield* host.afterTurn(agent)
      active.outcome = outcome
      // Recorded before the next turn may start, and answered once the slot is free: whoever sees
      // the slot free sees this outcome, and whoever hears the outcome sees the slot free.
      const everyone = [active.handle, ...active.joined]
      for (const handle of everyone) yield* record(handle, outcome)
      if (agent.turn === active) agent.turn = undefined
      settleTurnWaiters(agent)
      wake(agent)
      for (const handle of everyone) announce(handle)
      host.announceFinish(agent.agentId, outcome.state === "failed" ? "errored" : "finished")
      if (outcome.state === "failed") {
        yield* Effect.logWarning("Agent turn failed").pipe(
          Effect.annotateLogs({ agentId: agent.agentId, turnId: active.turnId, error: outcome.error?.message })
        )
      }
    })

  /**
   * Starts the prompt as the runtime's next turn; the wait for its end runs in the registry's
   * scope. False when the runtime began to go away (or the daemon to stop) while the start was
   * being recorded: the prompt is `accepted` again, and the caller resumes the runtime for it.
   */
  const begin = (agent: LiveAgent, handle: TurnHandle, resumed: boolean) =>
    Effect.gen(function*() {
      if (!(yield* markRunning(handle, "turn", null, resumed))) return true
      if (!dispatchable(agent)) {
        yield* markAccepted(handle)
        return false
      }
      const active: ActiveTurn = { turnId: handle.record.turnId, handle, joined: [], interruptRequested: false, outcome: undefined }
      agent.turn = active
      const started = yield* Effect.exit(agent.session.startTurn(handle.record.text, handle.record.turnId))
      if (Exit.isFailure(started)) {
        agent.turn = undefined
        settleTurnWaiters(agent)
        wake(agent)
        // Refused: it never ran, and a repeat may try again. Otherwise (a timeout, a process that
        // died before answering) it may have run, and it is never run again.
        const reach = Option.exists(Cause.findErrorOption(started.cause), isRefusal) ? "refused" : "unknown"
        yield* settle(handle, { state: "failed", reply: null, error: causeError(started.cause) }, reach)
        return true
      }
      taken.add(handle)
      yield* markTaken(handle)
      yield* finishTurn(agent, active, started.value).pipe(Effect.forkIn(host.turnScope))
      return true
    })

  /** Whether a prompt may still be handed to this runtime now. */
  const dispatchable = (agent: LiveAgent) => host.isLive(agent) && !agent.takingDown && !host.isShuttingDown()

  /**
   * Hands an admitted prompt to the runtime, in admission order (the dispatch permit). True once
   * it is handled (whatever the outcome); false when the runtime went away first (an explicit
   * close or reload): the caller resumes it and tries again.
   */
  const dispatch = (agent: LiveAgent, handle: TurnHandle, resumed: boolean): Effect.Effect<boolean> =>
    agent.dispatch.withPermits(1)(Effect.gen(function*() {
      while (true) {
        // A shutdown leaves what is not yet handed over `accepted`, for the next start.
        if (!dispatchable(agent)) return false
        // Taken now, in the same step as the turn is read: a turn that ends while this prompt is
        // being steered wakes it, however long the steer takes.
        const woken = agent.wake
        const text = handle.record.text
        const command = agent.session.outOfBand(text)
        if (command !== undefined) {
          if (!(yield* markRunning(handle, "out-of-band", null, resumed))) return true
          const done = yield* Effect.exit(command)
          yield* markTaken(handle)
          yield* settle(
            handle,
            Exit.isSuccess(done)
              ? { state: "completed", reply: null, error: null }
              : { state: "failed", reply: null, error: causeError(done.cause) }
          )
          return true
        }
        const active = agent.turn
        if (active === undefined) return yield* begin(agent, handle, resumed)
        const steer = agent.session.steer
        if (steer !== undefined) {
          if (!(yield* markRunning(handle, "steer", active.turnId, resumed))) return true
          const steered = yield* Effect.exit(steer(text, active.turnId))
          if (Exit.isFailure(steered) && !Option.exists(Cause.findErrorOption(steered.cause), isRefusal)) {
            // It may have reached the turn: never sent a second time.
            yield* settle(handle, { state: "failed", reply: null, error: causeError(steered.cause) }, "unknown")
            return true
          }
          if (Exit.isSuccess(steered) && steered.value) {
            yield* markTaken(handle)
            if (active.outcome !== undefined) yield* settle(handle, active.outcome)
            else {
              active.joined.push(handle)
              taken.add(handle)
            }
            return true
          }
          yield* markAccepted(handle)
        }
        // The provider cannot take it into the running turn: it waits for the next one.
        agent.queued++
        yield* Deferred.await(woken).pipe(Effect.ensuring(Effect.sync(() => agent.queued--)))
      }
    })).pipe(Effect.ensuring(Effect.sync(() => {
      agent.foregroundMutations--
      settleTurnWaiters(agent)
    })))

  /** Carries one accepted prompt to its end: resumes the runtime as often as it must. */
  const carry = (handle: TurnHandle) =>
    Effect.gen(function*() {
      const agentId = handle.record.agentId
      let resumed = false
      while (true) {
        // Moved to another host: the prompt stays `accepted` for it, never run here.
        if (host.hasDeparted(agentId)) return yield* letGo(handle)
        const agent = host.admit(agentId, yield* Clock.currentTimeMillis)
        if (agent !== undefined && (yield* dispatch(agent, handle, resumed))) {
          // Answered once the dispatch is over (its foreground mutation ended), not before.
          Deferred.doneUnsafe(handle.dispatched, Exit.succeed(receiptOf(handle.record)))
          return
        }
        if (host.hasDeparted(agentId)) return yield* letGo(handle)
        const resident = yield* Effect.exit(host.ensureResident(agentId))
        if (Exit.isFailure(resident)) {
          // It moved away while this waited for its lane: left `accepted` for its host.
          if (host.hasDeparted(agentId)) return yield* letGo(handle)
          const error = causeError(resident.cause)
          // Left `accepted` in the journal: the next start dispatches it.
          if (error._tag === "ShuttingDown") return
          yield* settle(handle, { state: "failed", reply: null, error }, "refused")
          return
        }
        resumed = true
      }
    })

  /** Takes an accepted record into this process and starts carrying it. */
  const start = (record: TurnRecord) =>
    Effect.gen(function*() {
      const handle: TurnHandle = { record, dispatched: Deferred.makeUnsafe(), ended: Deferred.makeUnsafe() }
      handles.set(record.turnId, handle)
      if (record.clientMessageId !== null) byClient.set(clientKey(record.agentId, record.clientMessageId), handle)
      // Started at once: it reaches the runtime (or the lane it waits in) before the caller goes on.
      yield* carry(handle).pipe(Effect.forkIn(host.carryScope, { startImmediately: true }))
      return handle
    })

  /** What an existing record resolves to: the turn in flight, a retry of one that never ran, or the record. */
  const resolveExisting = (record: TurnRecord) =>
    Effect.gen(function*() {
      const inFlight = handles.get(record.turnId)
      if (inFlight !== undefined) return { handle: inFlight } satisfies Resolution
      if (!isRetryable(record)) return { record } satisfies Resolution
      return yield* admitted(record.agentId, record.text, Effect.gen(function*() {
        // It never reached the provider: running it now cannot run it twice. Same turn, same id.
        const retried: TurnRecord = { ...record, state: "accepted", error: null, endedAt: null }
        // Not through the retrying journal: a retry the caller was told failed is not run later.
        yield* host.journal.update(retried)
        return { handle: yield* start(retried) } satisfies Resolution
      }))
    })

  /** The checks a new prompt passes before it is accepted. */
  const admissible = (agentId: string, text: string) =>
    Effect.gen(function*() {
      if (host.isShuttingDown()) return yield* ShuttingDown.of(`a prompt to ${agentId}`)
      const paused = host.admissionPaused()
      if (paused !== undefined) return yield* paused
      const record = host.recordOf(agentId)
      if (record === undefined) return yield* AgentNotFound.of(agentId)
      const bytes = Buffer.byteLength(JSON.stringify(text))
      if (bytes > host.maxPromptBytes) return yield* PromptTooLarge.of(agentId, bytes, host.maxPromptBytes)
      yield* host.requireProvider(record.provider)
      if (host.liveOf(agentId) === undefined && record.persistence === null) return yield* AgentNotResumable.of(agentId)
    })

  /**
   * Runs `accept` for a prompt that passed admission, counted in `accepting` until it is carried
   * or refused. The admission state is read again in the step that counts it: a retirement that
   * paused admission either refuses this prompt or sees it.
   */
  const admitted = <A, E>(agentId: string, text: string, accept: Effect.Effect<A, E>) =>
    admissible(agentId, text).pipe(Effect.andThen(Effect.suspend((): Effect.Effect<A, E | ShuttingDown | DaemonRetiring | AgentNotFound> => {
      if (host.isShuttingDown()) return Effect.fail(ShuttingDown.of(`a prompt to ${agentId}`))
      const paused = host.admissionPaused()
      if (paused !== undefined) return Effect.fail(paused)
      // Counted per agent in the same step: a delete either refuses this prompt or waits it out.
      if (host.isDeleting(agentId) || host.recordOf(agentId) === undefined) return Effect.fail(AgentNotFound.of(agentId))
      accepting++
      acceptingFor.set(agentId, (acceptingFor.get(agentId) ?? 0) + 1)
      return accept.pipe(Effect.ensuring(Effect.sync(() => {
        accepting--
        const left = (acceptingFor.get(agentId) ?? 1) - 1
        if (left === 0) acceptingFor.delete(agentId)
        else acceptingFor.set(agentId, left)
      })))
    })))

  const resolve = (agentId: string, text: string, clientMessageId: string | null, messageIds: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      if (host.recordOf(agentId) === undefined) return yield* AgentNotFound.of(agentId)
      // The journal first: a repeat is answered whatever the admission state.
      if (clientMessageId !== null) {
        const found = yield* journal.byClientMessageId(agentId, clientMessageId)
        if (Option.isSome(found)) return yield* resolveExisting(found.value)
      }
      return yield* admitted(agentId, text, acceptNew(agentId, text, clientMessageId, messageIds))
    })

  const acceptNew = (agentId: string, text: string, clientMessageId: string | null, messageIds: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const record: TurnRecord = {
        turnId: yield* randomId("turn"),
        agentId,
        clientMessageId,
        text,
        state: "accepted",
        disposition: null,
        joinedTurnId: null,
        resumed: false,
        reply: null,
        error: null,
        acceptedAt: yield* Clock.currentTimeMillis,
        dispatchedAt: null,
        endedAt: null
      }
      const accepted = yield* journal.accept({ record, messageIds })
      if (accepted._tag === "Existing") return yield* resolveExisting(accepted.record)
      return { handle: yield* start(accepted.record) } satisfies Resolution
    })

  /** Waits for the handle as far as the caller asked; the shutdown answers every waiter at once. */
  const answer = (resolution: Resolution, wait: boolean): Effect.Effect<PromptReceipt, ShuttingDown> => {
    if ("record" in resolution) return Effect.succeed(receiptOf(resolution.record))
    const { handle } = resolution
    const target = wait ? handle.ended : handle.dispatched
    return Effect.suspend(() => {
      if (Deferred.isDoneUnsafe(target)) return Deferred.await(target)
      const shutDown = Effect.fail(ShuttingDown.waiting(handle.record.turnId))
      if (Deferred.isDoneUnsafe(stopping)) return shutDown
      return Effect.raceFirst(Deferred.await(target), Deferred.await(stopping).pipe(Effect.andThen(shutDown)))
    })
  }

  const prompt = Effect.fn("AgentRegistry.prompt")(function*(agentId: string, text: string, options?: PromptOptions) {
    const wait = options?.wait === true
    const clientMessageId = options?.clientMessageId ?? null
    const messageIds = options?.messageIds ?? []
    // Delivered messages are found again through their turn's client message id.
    if (messageIds.length > 0 && clientMessageId === null) {
      return yield* Effect.die(new Error("a prompt carrying delivered messages needs a client message id"))
    }
    // Uninterruptible: a caller that goes away mid-acceptance leaves an accepted turn behind, carried
    // to its end like any other; never half an acceptance.
    const accept = Effect.uninterruptible(resolve(agentId, text, clientMessageId, messageIds))
    if (clientMessageId === null) return yield* answer(yield* accept, wait)
    const key = clientKey(agentId, clientMessageId)
    const inFlight = byClient.get(key)
    if (inFlight !== undefined) return yield* answer({ handle: inFlight }, wait)
    const pending = resolving.get(key)
    if (pending !== undefined) return yield* answer(yield* Deferred.await(pending), wait)
    const resolution = Deferred.makeUnsafe<Resolution, PromptError>()
    resolving.set(key, resolution)
    const resolved = yield* accept.pipe(Effect.onExit((exit) =>
      Effect.sync(() => {
        resolving.delete(key)
        Deferred.doneUnsafe(resolution, exit)
      })
    ))
    return yield* answer(resolved, wait)
  })

  const turn = (agentId: string, turnId: string) =>
    Effect.gen(function*() {
      if (host.recordOf(agentId) === undefined) return yield* AgentNotFound.of(agentId)
      const inFlight = handles.get(turnId)
      if (inFlight !== undefined && inFlight.record.agentId === agentId) return inFlight.record
      const stored = yield* journal.get(agentId, turnId)
      if (Option.isNone(stored)) return yield* TurnNotFound.of(agentId, turnId)
      return stored.value
    })

  const turns = (agentId: string, limit: number) =>
    Effect.gen(function*() {
      if (host.recordOf(agentId) === undefined) return yield* AgentNotFound.of(agentId)
      const stored = yield* journal.recent(agentId, limit)
      // A turn this process carries is reported as `turn` reports it: its record as last written here.
      return stored.map((record) => handles.get(record.turnId)?.record ?? record)
    })

  /**
   * Takes over the journal a previous process left: a turn that was `running` had reached its
   * provider, which is gone now — it is recorded interrupted and never run again; an `accepted`
   * turn had not, and is dispatched now, in acceptance order. `agentId` limits it to one agent's
   * turns (a cluster's runner takes over an agent when it starts hosting it, not at its start).
   */
  const recover = Effect.fnUntraced(function*(agentId?: string) {
    const stored = yield* (agentId === undefined ? host.journal.unfinished : host.journal.unfinishedOf(agentId))
    const unfinished = stored.filter((record) => !handles.has(record.turnId))
    let interrupted = 0
    let redispatched = 0
    for (const record of unfinished) {
      const now = yield* Clock.currentTimeMillis
      if (host.recordOf(record.agentId) === undefined) {
        yield* host.journal.update({ ...record, state: "failed", error: turnError(AgentNotFound.of(record.agentId)), endedAt: now })
      } else if (record.state === "running") {
        interrupted++
        // A failing write fails the start, before anything is dispatched: nothing to write again later.
        yield* host.journal.update({
          ...record,
          state: "interrupted",
          error: {
            _tag: "DaemonStopped",
            message: record.dispatchedAt === null
              ? "The daemon stopped while handing this turn to its provider (whether it arrived is unknown); it was not run again"
              : "The daemon stopped while this turn was running; it was not run again"
          },
          endedAt: now
        })
      } else {
        redispatched++
        yield* start(record)
      }
    }
    if (interrupted + redispatched > 0) {
      yield* Effect.logInfo("Recovered the turn journal").pipe(
        Effect.annotateLogs({ interrupted, redispatched, ...(agentId === undefined ? {} : { agentId }) })
      )
    }
  })

  /** Every caller still waiting is answered `ShuttingDown` (their turns stay recorded). */
  const stopWaiting = Effect.sync(() => Deferred.doneUnsafe(stopping, Exit.void))

  /** Turns a provider is running for this process: the shutdown waits for their outcomes. */
  const running = (): ReadonlyArray<TurnHandle> => [...taken]

  /** Every turn this process carries, not yet ended (accepted, waiting for a runtime, or running). */
  const carried = (): ReadonlyArray<TurnRecord> => [...handles.values()].map((handle) => handle.record)

  return {
    prompt,
    turn,
    turns,
    recover,
    stopWaiting,
    running,
    carried,
    failingWrite,
    /** Writes again every record the journal refused (a retirement attempt calls it first). */
    retryWrites: writeAgain,
    accepting: () => accepting,
    acceptingFor: (agentId: string) => acceptingFor.get(agentId) ?? 0,
    wake
  }
}
