import { Context, type Effect } from "effect"
import type {
  DaemonIdentity,
  DaemonRetiring,
  DaemonStatus,
  RetirementAttempt,
  RetirementFailed,
  RetirementRefused
} from "../domain/retirement.ts"

/**
 * The daemon's own lifecycle (R1, R2, R4, R6, R7): its idle timer, retirement attempts and their
 * phases, `lastAttempt`, and retire now. The daemon owns the timer; a hub only observes.
 *
 * An attempt closes admission (mutations get `DaemonRetiring`), reads the whole evidence — the
 * daemon's own work, and every resident runtime's collection check but the idle period, provider
 * probes included — and either reopens (refused: a full fresh interval is armed) or commits:
 * every runtime is released resumably, requests in flight drain, and `retired` completes so the
 * host can close everything and exit with `retiredExitCode`.
 */
export class DaemonLifecycle extends Context.Service<DaemonLifecycle, {
  readonly identity: DaemonIdentity
  readonly status: Effect.Effect<DaemonStatus>
  /**
   * Attempts a retirement now, the elapsed time aside but every check kept; works without a
   * timer. Succeeds once it is committed (the daemon then exits); a refusal names what blocked.
   */
  readonly retireNow: Effect.Effect<RetirementAttempt, RetirementRefused | RetirementFailed>
  /** Refuses a mutation while an attempt runs (or a failed one holds admission closed). */
  readonly admit: (what: string) => Effect.Effect<void, DaemonRetiring>
  /**
   * How long a client refused now should wait before trying again, in seconds: 1 while the daemon
   * decides (or shuts down), 60 once a failed commit holds it retiring until an operator acts.
   */
  readonly retryAfterSeconds: () => number
  /** Completes when a retirement has committed and drained: the host closes and exits. */
  readonly retired: Effect.Effect<void>
}>()("quiesce/retirement/DaemonLifecycle") {}
