import type { Deferred } from "effect"
import type { TurnError, TurnRecord } from "../../domain/turn.ts"
import type { PromptReceipt } from "../../services/AgentRegistry.ts"

/**
 * An accepted prompt this process is carrying: its record as last written, and the two moments
 * callers wait for. Neither deferred fails — a failed turn is a receipt with `state: "failed"` —
 * and a caller that stops waiting changes nothing for the turn.
 */
export interface TurnHandle {
  record: TurnRecord
  /** Completed once the provider took the prompt (or it failed before reaching it). */
  readonly dispatched: Deferred.Deferred<PromptReceipt>
  /** Completed once the turn's outcome is recorded. */
  readonly ended: Deferred.Deferred<PromptReceipt>
}

/** How a turn ended, as recorded. */
export interface TurnOutcome {
  readonly state: "completed" | "failed" | "interrupted"
  readonly reply: string | null
  readonly error: TurnError | null
}
