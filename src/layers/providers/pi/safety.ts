/**
 * The Pi / OMP runtime safety decision (P5), kept pure so every case is a unit test.
 *
 * A runtime may be released only when the provider's own state says nothing is running, queued or
 * pending, and the adapter itself owes the runtime nothing. Any field that is missing, or of a
 * value not known to be safe, retains the runtime: an unknown is never read as idle. Every veto
 * says why, so a runtime that stays resident can be explained.
 */
import type { SessionState } from "./rpcTypes.ts"

/** Which dialect of the RPC mode the CLI speaks. */
export type PiVariant = "pi" | "omp"

/** What the adapter knows that the CLI does not report. */
export interface LocalState {
  readonly variant: PiVariant
  /** A `prompt` was accepted and the `agent_end` that ends its run has not arrived. */
  readonly turnInFlight: boolean
  /** Commands that change the conversation (`prompt`, `steer`, `abort`) sent and not yet answered. */
  readonly commandsInFlight: number
  /** Steer / follow-up messages the adapter accepted and has not yet handed to the CLI. */
  readonly unsentMessages: number
  /**
   * OMP ended its last run with `agent_end.isTerminal: false`: it has scheduled a continuation (an
   * async job's result, a queued message) that will start a run on its own. Cleared by the next
   * terminal `agent_end`.
   */
  readonly continuationPending: boolean
  /** A run the CLI started on its own (no prompt of ours) is between `agent_start` and `agent_end`. */
  readonly autonomousRun: boolean
  /** The daemon's id of the turn in flight, when the adapter knows it (names the veto). */
  readonly turnId?: string | undefined
}

export type Verdict = { readonly permit: true } | { readonly permit: false; readonly reason: string }

const permit: Verdict = { permit: true }
const veto = (reason: string): Verdict => ({ permit: false, reason })

/** Why the adapter itself keeps the runtime, if it does; checked before the CLI is asked. */
export const localVeto = (local: LocalState): Verdict => {
  if (local.turnInFlight) return veto(local.turnId === undefined ? "a turn is in flight" : `turn ${local.turnId} is in flight`)
  if (local.commandsInFlight !== 0) return veto(`${local.commandsInFlight} command(s) await their response`)
  if (local.unsentMessages !== 0) return veto(`${local.unsentMessages} message(s) not yet sent`)
  if (local.autonomousRun) return veto("the CLI is running a continuation of its own")
  if (local.continuationPending) return veto("the last run ended non-terminal: a continuation is scheduled")
  return permit
}

/** Whether the adapter itself owes the runtime anything. */
export const localBusy = (local: LocalState): boolean => !localVeto(local).permit

/** The reason an OMP without the settlement fields (before 18.3) always stays resident. */
export const missingSettlement = "OMP reports no isSettled / hasPendingAsyncWork (before 18.3), so its async work cannot be ruled out"

/**
 * Whether the runtime may be released, and if not, why.
 *
 * - Pi: `isStreaming === false`, `isCompacting === false`, and the message queue is empty
 *   (`pendingMessageCount`, or OMP's `queuedMessageCount`; whichever are present must be 0 and at
 *   least one must be present).
 * - OMP: additionally `isSettled === true` and `hasPendingAsyncWork === false`.
 */
export const verdict = (state: SessionState, local: LocalState): Verdict => {
  const own = localVeto(local)
  if (!own.permit) return own
  if (state.isStreaming !== false) return veto(`isStreaming is ${String(state.isStreaming)}`)
  if (state.isCompacting !== false) return veto(`isCompacting is ${String(state.isCompacting)}`)
  const counts = [state.pendingMessageCount, state.queuedMessageCount].filter((count) => count !== undefined)
  if (counts.length === 0) return veto("get_state reports no pending message count")
  if (counts.some((count) => count !== 0)) return veto(`${counts.join("/")} message(s) pending`)
  if (local.variant === "omp") {
    if (state.isSettled === undefined && state.hasPendingAsyncWork === undefined) return veto(missingSettlement)
    if (state.isSettled !== true) return veto(`isSettled is ${String(state.isSettled)}`)
    if (state.hasPendingAsyncWork !== false) return veto(`hasPendingAsyncWork is ${String(state.hasPendingAsyncWork)}`)
  }
  return permit
}

/** Whether the runtime may be released. */
export const canStop = (state: SessionState, local: LocalState): boolean => verdict(state, local).permit
