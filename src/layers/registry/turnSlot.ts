/**
 * The turn owner's part of one live runtime: its one turn slot, the prompts queued behind it and
 * the callers waiting for it to be idle. Its fields are written by the turn owner's dispatch
 * (`turnDispatch.ts`: the turn, the queue, the foreground mutations) and by the helpers here (the
 * wake signal, the idle waiters); the residency reads them (its baseline blockers) and, when it
 * takes the runtime down or loses it, calls {@link wakeQueued} and {@link settleIdleWaiters}.
 */
import { Deferred, Exit, Semaphore } from "effect"
import type { TurnHandle, TurnOutcome } from "./turnHandle.ts"

/** The one turn a runtime runs at a time, and the prompts steered into it. */
export interface ActiveTurn {
  readonly turnId: string
  readonly handle: TurnHandle
  /** Prompts the provider took into this turn: they share its outcome. */
  readonly joined: Array<TurnHandle>
  /** An interrupt was asked for while it ran: a failure it ends with is an interruption. */
  interruptRequested: boolean
  /** Set once it ended, for a steer the provider accepted as the turn was ending. */
  outcome: TurnOutcome | undefined
}

/** One runtime's turn slot: what the turn owner keeps per live runtime. */
export interface TurnSlot {
  /** Serializes prompt dispatch so that prompts reach the provider in the order admitted. */
  readonly dispatch: Semaphore.Semaphore
  /** The running turn: from the moment it is handed to the provider until its end is processed. */
  turn: ActiveTurn | undefined
  /** Accepted prompts waiting for the running turn to end (the provider cannot steer them in). */
  queued: number
  /** Completed (and replaced) when the turn slot frees up or the runtime is being taken down. */
  wake: Deferred.Deferred<void>
  /** Prompts and out-of-band commands admitted and not yet handed to the provider. */
  foregroundMutations: number
  /** Waiting until no turn runs and nothing is queued (`awaitIdle`). */
  idleWaiters: Array<Deferred.Deferred<void>> | undefined
}

/** An empty slot, for a runtime just loaded. */
export const makeTurnSlot = (): TurnSlot => ({
  dispatch: Semaphore.makeUnsafe(1),
  turn: undefined,
  queued: 0,
  wake: Deferred.makeUnsafe(),
  foregroundMutations: 0,
  idleWaiters: undefined
})

/** Wakes the prompts queued behind the running turn: the slot freed, or the runtime is going away. */
export const wakeQueued = (slot: TurnSlot): void => {
  const woken = slot.wake
  slot.wake = Deferred.makeUnsafe<void>()
  Deferred.doneUnsafe(woken, Exit.void)
}

/** A new waiter for the slot's next change (a turn ends, a dispatch is over, the runtime goes). */
export const idleWaiter = (slot: TurnSlot): Deferred.Deferred<void> => {
  const waiter = Deferred.makeUnsafe<void>()
  ;(slot.idleWaiters ??= []).push(waiter)
  return waiter
}

/** Answers everyone waiting for the slot to be idle; they look again. */
export const settleIdleWaiters = (slot: TurnSlot): void => {
  const waiters = slot.idleWaiters
  slot.idleWaiters = undefined
  if (waiters !== undefined) for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
}

/** Whether no turn runs, nothing is queued and nothing admitted waits to be handed over. */
export const isIdle = (slot: TurnSlot): boolean =>
  slot.turn === undefined && slot.queued === 0 && slot.foregroundMutations === 0
