/**
 * The Pi / OMP runtime safety decision (P5), kept pure so every case is a unit test.
 *
 * A runtime may be released only when the provider's own state says nothing is running, queued or
 * pending, and the adapter itself owes the runtime nothing. Any field that is missing, or of a
 * value not known to be safe, retains the runtime: an unknown is never read as idle.
 */
import type { SessionState } from "./rpcTypes.ts"

/** Which dialect of the RPC mode the CLI speaks. */
export type PiVariant = "pi" | "omp"

/** What the adapter knows that the CLI does not report. */
export interface LocalState {
  readonly variant: PiVariant
  /** A `prompt` was accepted and its terminal `agent_end` has not arrived. */
  readonly turnInFlight: boolean
  /** Commands that change the conversation (`prompt`, `steer`, `abort`) sent and not yet answered. */
  readonly commandsInFlight: number
  /** Steer / follow-up messages the adapter accepted and has not yet handed to the CLI. */
  readonly unsentMessages: number
}

/** Whether the adapter itself owes the runtime anything; checked before the CLI is asked. */
export const localBusy = (local: LocalState): boolean =>
  local.turnInFlight || local.commandsInFlight !== 0 || local.unsentMessages !== 0

/**
 * Whether the runtime may be released.
 *
 * - Pi: `isStreaming === false`, `isCompacting === false`, and the message queue is empty
 *   (`pendingMessageCount`, or OMP's `queuedMessageCount`; whichever are present must be 0 and at
 *   least one must be present).
 * - OMP: additionally `isSettled === true` and `hasPendingAsyncWork === false`.
 */
export const canStop = (state: SessionState, local: LocalState): boolean => {
  if (localBusy(local)) return false
  if (state.isStreaming !== false) return false
  if (state.isCompacting !== false) return false
  const counts = [state.pendingMessageCount, state.queuedMessageCount].filter((count) => count !== undefined)
  if (counts.length === 0 || counts.some((count) => count !== 0)) return false
  if (local.variant === "omp") {
    if (state.isSettled !== true) return false
    if (state.hasPendingAsyncWork !== false) return false
  }
  return true
}
