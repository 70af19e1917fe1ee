import type { Effect } from "effect"
import type { ReleaseReason } from "./agent.ts"
import type { Blocker } from "./blocker.ts"
import type { RuntimeProbeFailed, RuntimeReleaseError } from "./errors.ts"
import type { StopAnswer } from "./provider.ts"

/**
 * One live runtime as its owner lets the collector see it: a snapshot of identity and activity
 * plus capabilities the owner implements. The collector decides; only the owner closes.
 */
export interface RuntimeCandidate {
  /**
   * Stable for the life of one runtime; a resumed or reloaded runtime gets a new identity.
   * The agent id and parent label of one identity never change.
   */
  readonly identity: object
  readonly agentId: string
  /**
   * The managing parent agent, from the parent label; undefined for a root agent. Any value is
   * handled: a parent without a live runtime, the runtime itself, or parents that form a cycle
   * (see docs/collector.md).
   */
  readonly parentAgentId: string | undefined
  readonly provider: string
  /** The provider session to resume from; null when the runtime cannot be resumed (never released). */
  readonly sessionId: string | null
  /** Epoch milliseconds of the last activity the owner saw. */
  readonly lastActivityAt: number
  /** The owner's baseline (C4): every condition that keeps this runtime resident now. Empty means clear. */
  readonly blockers: Effect.Effect<ReadonlyArray<Blocker>>
  /** Memory the runtime's process tree holds now, if the owner can tell: what a release gives back (X3). */
  readonly residentBytes?: Effect.Effect<number | undefined> | undefined
  /**
   * The runtime's root process, for a memory budget sampled through a `ProcessInspection`: its pid
   * and, when the owner knows it, its start time (without one the collector pins the start time
   * of its first sample, so a reused pid is never measured as the runtime).
   */
  readonly process?: { readonly pid: number; readonly startTime?: number | undefined } | undefined
  /** The provider's optional veto (C6): only `canStop: true` permits; a veto says why. */
  readonly canStopRuntime?: Effect.Effect<StopAnswer, RuntimeProbeFailed> | undefined
  /**
   * Closes the runtime only if `revalidate` still holds when checked inside the owner's lifecycle
   * lane, with admission barred. Succeeds with whether it closed. The owner makes the close and
   * persist region uninterruptible; waiting for the lane and revalidating stay interruptible.
   * `reason` is why it is released, for the record the owner keeps.
   */
  readonly closeIfEligible: (revalidate: Effect.Effect<boolean>, reason: ReleaseReason) => Effect.Effect<boolean, RuntimeReleaseError>
}
