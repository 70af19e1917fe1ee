/**
 * The turn owner's dispatch: carries each accepted prompt to its runtime, one turn at a time per
 * runtime, in admission order (the slot's dispatch permit), queued behind the running turn unless
 * the provider can steer it in, and records the turn's end for everyone in it. A runtime is
 * reached only through the residency's port: admitted into a live one, or resumed.
 */
import { Cause, Clock, Deferred, Effect, Exit, Option, type Scope } from "effect"
import { isRefusal } from "../../domain/errors.ts"
import type { FinishKind } from "../../domain/finish.ts"
import { agentAttributes } from "../../domain/spans.ts"
import type { TurnEnd } from "../../domain/provider.ts"
import type { TurnRecord } from "../../domain/turn.ts"
import type { LiveAgent } from "./LiveAgent.ts"
import type { ResidencyPort } from "./residencyPort.ts"
import { causeError, type TurnBook } from "./turnBook.ts"
import type { TurnHandle, TurnOutcome } from "./turnHandle.ts"
import { type ActiveTurn, settleIdleWaiters, wakeQueued } from "./turnSlot.ts"

/** What the dispatch works with. */
export interface TurnDispatchConfig {
  readonly port: ResidencyPort
  readonly book: TurnBook
  /** Where the fibers that carry prompts to the provider run; closed first at shutdown. */
  readonly carryScope: Scope.Scope
  /** Where the fibers that wait for running turns run; closed after the runtimes are. */
  readonly turnScope: Scope.Scope
  readonly announceFinish: (agentId: string, kind: FinishKind) => void
}

/** A turn's span attributes: its agent, provider (when known) and id. */
const turnAttributes = (handle: TurnHandle, provider: string | undefined) => ({
  ...agentAttributes(handle.record.agentId, provider),
  "quiesce.turn.id": handle.record.turnId
})

/** The dispatch over the book and the port. */
export const makeTurnDispatch = ({ announceFinish, book, carryScope, port, turnScope }: TurnDispatchConfig) => {
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
      yield* Effect.annotateCurrentSpan("quiesce.turn.state", outcome.state)
      yield* port.turnEnded(agent)
      active.outcome = outcome
      // Recorded before the next turn may start, and answered once the slot is free: whoever sees
      // the slot free sees this outcome, and whoever hears the outcome sees the slot free.
      const everyone = [active.handle, ...active.joined]
      for (const handle of everyone) yield* book.record(handle, outcome)
      if (agent.slot.turn === active) agent.slot.turn = undefined
      settleIdleWaiters(agent.slot)
      wakeQueued(agent.slot)
      for (const handle of everyone) book.announce(handle)
      announceFinish(agent.agentId, outcome.state === "failed" ? "errored" : "finished")
      port.turnSettled(agent)
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
      if (!(yield* book.markRunning(handle, "turn", null, resumed))) return true
      if (!port.accepts(agent)) {
        yield* book.markAccepted(handle)
        return false
      }
      const active: ActiveTurn = { turnId: handle.record.turnId, handle, joined: [], interruptRequested: false, outcome: undefined }
      agent.slot.turn = active
      const started = yield* Effect.exit(agent.session.startTurn(handle.record.text, handle.record.turnId).pipe(
        Effect.withSpan("Turn.start", { attributes: turnAttributes(handle, agent.provider) })
      ))
      if (Exit.isFailure(started)) {
        agent.slot.turn = undefined
        settleIdleWaiters(agent.slot)
        wakeQueued(agent.slot)
        // Refused: it never ran, and a repeat may try again. Otherwise (a timeout, a process that
        // died before answering) it may have run, and it is never run again.
        const reach = Option.exists(Cause.findErrorOption(started.cause), isRefusal) ? "refused" : "unknown"
        yield* book.settle(handle, { state: "failed", reply: null, error: causeError(started.cause) }, reach)
        return true
      }
      book.noteTaken(handle)
      yield* book.markTaken(handle)
      yield* finishTurn(agent, active, started.value).pipe(
        Effect.withSpan("Turn.run", { attributes: turnAttributes(handle, agent.provider) }),
        Effect.forkIn(turnScope)
      )
      return true
    })

  /**
   * Hands an admitted prompt to the runtime, in admission order (the dispatch permit). True once
   * it is handled (whatever the outcome); false when the runtime went away first (an explicit
   * close or reload): the caller resumes it and tries again. The caller counted the prompt as a
   * foreground mutation of the slot when it was admitted; it is uncounted here, at the end.
   */
  const dispatch = (agent: LiveAgent, handle: TurnHandle, resumed: boolean): Effect.Effect<boolean> =>
    agent.slot.dispatch.withPermits(1)(Effect.gen(function*() {
      while (true) {
        // A shutdown leaves what is not yet handed over `accepted`, for the next start.
        if (!port.accepts(agent)) return false
        // Taken now, in the same step as the turn is read: a turn that ends while this prompt is
        // being steered wakes it, however long the steer takes.
        const woken = agent.slot.wake
        const text = handle.record.text
        const command = agent.session.outOfBand(text)
        if (command !== undefined) {
          if (!(yield* book.markRunning(handle, "out-of-band", null, resumed))) return true
          const done = yield* Effect.exit(command)
          yield* book.markTaken(handle)
          yield* book.settle(
            handle,
            Exit.isSuccess(done)
              ? { state: "completed", reply: null, error: null }
              : { state: "failed", reply: null, error: causeError(done.cause) }
          )
          return true
        }
        const active = agent.slot.turn
        if (active === undefined) return yield* begin(agent, handle, resumed)
        const steer = agent.session.steer
        if (steer !== undefined) {
          if (!(yield* book.markRunning(handle, "steer", active.turnId, resumed))) return true
          const steered = yield* Effect.exit(steer(text, active.turnId))
          if (Exit.isFailure(steered) && !Option.exists(Cause.findErrorOption(steered.cause), isRefusal)) {
            // It may have reached the turn: never sent a second time.
            yield* book.settle(handle, { state: "failed", reply: null, error: causeError(steered.cause) }, "unknown")
            return true
          }
          if (Exit.isSuccess(steered) && steered.value) {
            yield* book.markTaken(handle)
            if (active.outcome !== undefined) yield* book.settle(handle, active.outcome)
            else {
              active.joined.push(handle)
              book.noteTaken(handle)
            }
            return true
          }
          yield* book.markAccepted(handle)
        }
        // The provider cannot take it into the running turn: it waits for the next one.
        agent.slot.queued++
        yield* Deferred.await(woken).pipe(Effect.ensuring(Effect.sync(() => agent.slot.queued--)))
      }
    })).pipe(Effect.ensuring(Effect.sync(() => {
      agent.slot.foregroundMutations--
      settleIdleWaiters(agent.slot)
    })))

  /** Carries one accepted prompt to its end (its span over the whole way): resumes the runtime as often as it must. */
  const carry = (handle: TurnHandle) =>
    carryOnce(handle).pipe(Effect.withSpan("Turn.carry", {
      attributes: turnAttributes(handle, port.recordOf(handle.record.agentId)?.provider)
    }))

  const carryOnce = (handle: TurnHandle) =>
    Effect.gen(function*() {
      const agentId = handle.record.agentId
      let resumed = false
      while (true) {
        // Moved to another host: the prompt stays `accepted` for it, never run here.
        if (port.hostedElsewhere(agentId)) return yield* book.letGo(handle)
        const agent = port.admit(agentId, yield* Clock.currentTimeMillis)
        // Counted busy in the same synchronous step as it was admitted (C9).
        if (agent !== undefined) agent.slot.foregroundMutations++
        if (agent !== undefined && (yield* dispatch(agent, handle, resumed))) {
          // Answered once the dispatch is over (its foreground mutation ended), not before.
          Deferred.doneUnsafe(handle.dispatched, Exit.succeed(book.receiptOf(handle.record)))
          return
        }
        if (port.hostedElsewhere(agentId)) return yield* book.letGo(handle)
        const resident = yield* Effect.exit(port.ensureResident(agentId))
        if (Exit.isFailure(resident)) {
          // It moved away while this waited for its lane: left `accepted` for its host.
          if (port.hostedElsewhere(agentId)) return yield* book.letGo(handle)
          const error = causeError(resident.cause)
          // Left `accepted` in the journal: the next start dispatches it.
          if (error._tag === "ShuttingDown") return
          yield* book.settle(handle, { state: "failed", reply: null, error }, "refused")
          return
        }
        resumed = true
      }
    })

  /** Takes an accepted record into this process and starts carrying it. */
  const start = (record: TurnRecord) =>
    Effect.gen(function*() {
      const handle = book.track(record)
      // Started at once: it reaches the runtime (or the lane it waits in) before the caller goes on.
      yield* carry(handle).pipe(Effect.forkIn(carryScope, { startImmediately: true }))
      return handle
    })

  return { start }
}
