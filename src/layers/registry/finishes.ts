/**
 * The agents' finishes: a turn's end, a permission asked for, an explicit close or delete. Each
 * is announced to the watches waiting for it (`awaitFinish`) and journaled, in order, by one
 * writer, with the agent's last reply. Keyed by agent, not runtime: a watch outlives releases and
 * resumes.
 */
import { Deferred, Effect, Option, Queue, Schedule, type Scope } from "effect"
import { type FinishKind, type FinishOutcome, maxReplyLength } from "../../domain/finish.ts"
import type { TurnJournal } from "../../services/TurnJournal.ts"

/** A finish watch here: answered by the first finish journaled past `after`, or by the next one without it. */
interface FinishWaiter {
  readonly after: number | undefined
  readonly answer: Deferred.Deferred<FinishOutcome>
}

/** The finishes of this registry's agents. */
export interface Finishes {
  /**
   * A finish: the waiters without a position are answered now; the finish is then journaled,
   * and the waiters whose position it passes are answered with it (see `await`).
   */
  readonly announce: (agentId: string, kind: FinishKind) => void
  /** Waits for the agent's next finish, or with `after` for the first journaled past it (`AgentRegistry.awaitFinish`). */
  readonly await: (agentId: string, options?: { readonly after?: number | undefined }) => Effect.Effect<FinishOutcome>
  /** The agent's runtime replied: the reply its next finish carries (its end kept when long). */
  readonly noteReply: (agentId: string, text: string) => void
  /** The agent is deleted: its last reply is forgotten. */
  readonly forget: (agentId: string) => void
}

/** Finishes over the journal; their writer runs in the scope. */
export const makeFinishes = Effect.fnUntraced(function*(journal: TurnJournal["Service"]): Effect.fn.Return<Finishes, never, Scope.Scope> {
  // A waiter with a position (`after`) is owed the first finish journaled past it; one without,
  // the next finish announced.
  const finishWaiters = new Map<string, Array<FinishWaiter>>()
  /** Finishes announced and not yet journaled, in order: one writer journals them. */
  const finishesToJournal = yield* Queue.unbounded<{ readonly agentId: string; readonly outcome: FinishOutcome }>()
  const lastReplies = new Map<string, string>()

  /** Answers the agent's waiters that `owed` picks, and forgets them. */
  const answerWaiters = (agentId: string, outcome: FinishOutcome, owed: (waiter: FinishWaiter) => boolean) => {
    const waiters = finishWaiters.get(agentId)
    if (waiters === undefined) return
    const remaining = waiters.filter((waiter) => !owed(waiter))
    if (remaining.length === 0) finishWaiters.delete(agentId)
    else finishWaiters.set(agentId, remaining)
    for (const waiter of waiters) if (owed(waiter)) Deferred.doneUnsafe(waiter.answer, Effect.succeed(outcome))
  }

  const announce = (agentId: string, kind: FinishKind) => {
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

  const awaitFinish = (agentId: string, options?: { readonly after?: number | undefined }) =>
    Effect.suspend(() => {
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

  return {
    announce,
    await: awaitFinish,
    noteReply: (agentId, text) =>
      void lastReplies.set(agentId, text.length > maxReplyLength ? `…${text.slice(-maxReplyLength)}` : text),
    forget: (agentId) => void lastReplies.delete(agentId)
  }
})
