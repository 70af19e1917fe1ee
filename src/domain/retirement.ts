import { Schema } from "effect"

/**
 * Daemon self-retirement (R1, R2, R4, R6, R7): a daemon that has been provably idle for its idle
 * timeout releases every runtime resumably and exits; the next message brings it back.
 */

/** The exit code of a daemon that retired (a clean, committed retirement), told apart from a crash (1) and a stop by signal (0). */
export const retiredExitCode = 75

/** Set to "1" in the environment of a daemon a hub launched: its idle timeout's source is then `hub`. */
export const launchedByHubVariable = "QUIESCE_LAUNCHED_BY_HUB"

/** How long message delivery may take to flush at shutdown (its part of the margin below). */
export const deliveryCloseTimeout = "5 seconds"

/**
 * Beyond the runtimes' close graces, what an orderly shutdown waits on: the listener's graceful
 * close (1 s), delivery flushing (5 s), asking each provider what its runtime still runs (1 s),
 * the outcomes of the turns the close ended (5 s), and finish subscriptions and the store closing
 * (1 s).
 */
export const shutdownMarginMillis = 13_000

/**
 * How long a daemon's orderly shutdown may take before the process exits anyway (H3). Runtimes
 * close all at once, and one close takes at most two graces (a polite close, then SIGTERM to
 * SIGKILL), so the deadline is twice the largest configured close grace plus the margin.
 */
export const shutdownDeadlineMillis = (largestCloseGraceMillis: number) => 2 * largestCloseGraceMillis + shutdownMarginMillis

/** For a daemon whose record does not say its deadline (an older version): what it used then. */
export const unrecordedShutdownDeadlineMillis = 30_000

/**
 * The version of the daemon's API and rendezvous record, for a hub to tell compatible daemons.
 * 2: errors are RFC 9457 problems and every time in the API is ISO 8601.
 */
export const daemonProtocolVersion = 2

/**
 * Where the effective idle timeout came from: the flag, `daemon.idleTimeout` in config.json, a hub
 * that launched the daemon, or nowhere (no timer: a daemon run directly stays resident).
 */
export const IdleTimeoutSource = Schema.Literals(["flag", "config", "hub", "omitted"])
export type IdleTimeoutSource = typeof IdleTimeoutSource.Type

/** The timeout the daemon armed, as configured: `"0s"` is an explicit "no timer", distinct from omitted. */
export const EffectiveIdleTimeout = Schema.Struct({
  /** The Go-style duration as given ("1h", "0s"); null when omitted. */
  value: Schema.NullOr(Schema.String),
  /** Its length; null when there is no timer (omitted or "0s"). */
  millis: Schema.NullOr(Schema.Number),
  source: IdleTimeoutSource
})
export type EffectiveIdleTimeout = typeof EffectiveIdleTimeout.Type

const idleTimeoutSources: Record<IdleTimeoutSource, string> = {
  flag: "set by --daemon-idle-timeout",
  config: "from config.json",
  hub: "the hub's default",
  omitted: ""
}

/**
 * The idle timeout a daemon armed, in words (the CLI, the log and the pages say the same):
 * "1h (from config.json)", "none (0s, set by --daemon-idle-timeout)", or plainly "none" when
 * nothing set one.
 */
export const describeIdleTimeout = (timeout: EffectiveIdleTimeout): string => {
  const source = idleTimeoutSources[timeout.source]
  if (timeout.millis !== null) return source === "" ? `${timeout.value}` : `${timeout.value} (${source})`
  if (timeout.value === null || source === "") return "none"
  return `none (${timeout.value}, ${source})`
}

/** `resident`: serving. `retiring`: an attempt runs (mutations refused), or one failed after its commit. */
export const RetirementPhase = Schema.Literals(["resident", "retiring"])
export type RetirementPhase = typeof RetirementPhase.Type

/**
 * Why an attempt failed (R7). `prepare_failed`: the evidence could not be read or a flush failed;
 * nothing was released and the daemon serves on. `release_failed`: a runtime's close failed after
 * the commit; `reader_drain_failed`: requests in flight did not leave in time. After either of
 * those the daemon stays retiring, refusing mutations, and is not killed.
 */
export const RetirementFailureKind = Schema.Literals(["prepare_failed", "release_failed", "reader_drain_failed"])
export type RetirementFailureKind = typeof RetirementFailureKind.Type

/** How a retirement attempt failed: its kind and what went wrong. */
export const RetirementFailure = Schema.Struct({
  kind: RetirementFailureKind,
  message: Schema.String
})
export type RetirementFailure = typeof RetirementFailure.Type

/** What kept the daemon from retiring: a category (a runtime blocker kind, a veto, the daemon's own queues), and whose. */
export const RetirementBlocker = Schema.Struct({
  category: Schema.String,
  /** The agent it belongs to; absent for the daemon's own work. */
  agentId: Schema.optionalKey(Schema.String),
  detail: Schema.optionalKey(Schema.String),
  /** Since when it has held (ISO 8601), where that is known: a veto's first refusal in a row. */
  since: Schema.optionalKey(Schema.String)
})
export type RetirementBlocker = typeof RetirementBlocker.Type

/** One retirement attempt and how it ended. */
export const RetirementAttempt = Schema.Struct({
  /** Epoch ms. */
  at: Schema.Number,
  /** The idle timer elapsed, or someone asked (retire now). */
  trigger: Schema.Literals(["timer", "request"]),
  outcome: Schema.Literals(["refused", "failed", "committed"]),
  blockers: Schema.Array(RetirementBlocker),
  failure: Schema.NullOr(RetirementFailure)
})
export type RetirementAttempt = typeof RetirementAttempt.Type

/** A retirement attempt as the APIs show it (the daemon's and the hub's), its time ISO 8601. */
export const RetirementAttemptView = Schema.Struct({
  at: Schema.String,
  trigger: RetirementAttempt.fields.trigger,
  outcome: RetirementAttempt.fields.outcome,
  blockers: Schema.Array(RetirementBlocker),
  failure: Schema.NullOr(RetirementFailure)
})
export type RetirementAttemptView = typeof RetirementAttemptView.Type

/**
 * The daemon's rendezvous record, `<home>/daemon.json`: who it is and where it listens. Written
 * atomically once the listener is open; removed as the last step of a retirement or a shutdown.
 * No token, no environment.
 */
export const DaemonIdentity = Schema.Struct({
  pid: Schema.Number,
  /** The process's start time (procfs stat field 22): with the pid, its identity. */
  startTime: Schema.NullOr(Schema.Number),
  /** A random id of this daemon process. */
  instanceId: Schema.String,
  host: Schema.String,
  port: Schema.Number,
  protocolVersion: Schema.Number,
  packageVersion: Schema.String,
  idleTimeout: EffectiveIdleTimeout,
  /** How long its orderly shutdown may take before it exits anyway (absent from older records). */
  shutdownDeadlineMillis: Schema.optionalKey(Schema.Number)
})
export type DaemonIdentity = typeof DaemonIdentity.Type

/** A daemon's lifecycle now, for `GET /v1/daemon` (times epoch ms; the API renders them ISO 8601). */
export interface DaemonStatus {
  readonly phase: RetirementPhase
  readonly idleTimeout: EffectiveIdleTimeout
  /** Since when the daemon has been idle: its last activity, or its last refused attempt. */
  readonly idleSince: number
  /** When the timer's interval ends if nothing happens; null without a timer or while retiring. */
  readonly deadline: number | null
  /** What would keep it from retiring now (the daemon's own work, its runtimes' baselines, their providers' last vetoes). */
  readonly blockers: ReadonlyArray<RetirementBlocker>
  readonly lastAttempt: RetirementAttempt | null
  /** The failure the daemon is stuck in (release_failed, reader_drain_failed), if any. */
  readonly failure: RetirementFailure | null
}

/** How long a client refused while an attempt decides should wait before trying again, in seconds. */
export const retryWhileDecidingSeconds = 1
/** The same once a failed commit holds the daemon retiring until an operator restarts it. */
export const retryWhileStuckSeconds = 60

/** The daemon is retiring: mutations are refused until the attempt is over. Retry after `retryAfterSeconds`. */
export class DaemonRetiring extends Schema.TaggedError<DaemonRetiring>()("DaemonRetiring", {
  message: Schema.String,
  retryAfterSeconds: Schema.Number
}) {
  static readonly of = (what: string) =>
    new DaemonRetiring({
      message: `The daemon is retiring: ${what} not admitted; retry (a retired daemon is started again on the next message)`,
      retryAfterSeconds: retryWhileDecidingSeconds
    })

  /** After a commit that failed (the daemon holds still and keeps its runtimes): retrying does not help. */
  static readonly stuck = (what: string, failure: RetirementFailure) =>
    new DaemonRetiring({
      message: `The daemon's retirement failed (${failure.kind}: ${failure.message}): ${what} not admitted until an ` +
        "operator restarts the daemon (GET /v1/daemon shows the failure)",
      retryAfterSeconds: retryWhileStuckSeconds
    })
}

/** A retirement was refused: something would have been lost. The daemon keeps serving. */
export class RetirementRefused extends Schema.TaggedError<RetirementRefused>()("RetirementRefused", {
  message: Schema.String,
  blockers: Schema.Array(RetirementBlocker)
}) {}

/** A retirement failed (see `RetirementFailureKind`). */
export class RetirementFailed extends Schema.TaggedError<RetirementFailed>()("RetirementFailed", {
  message: Schema.String,
  failure: RetirementFailure
}) {}

/** Categories whose detail is the reason itself (a provider's veto, a probe's failure): shown in the one line. */
const explainedCategories: ReadonlySet<string> = new Set(["veto", "probe-failure"])

/** Whether a blocker is a provider's veto or a probe that failed (its detail says why). */
export const isVeto = (blocker: RetirementBlocker): boolean => explainedCategories.has(blocker.category)

/** One line for a set of blockers: their categories, with whose (and a veto's reason), in a stable order. */
export const describeBlockers = (blockers: ReadonlyArray<RetirementBlocker>): string =>
  [...new Set(blockers.map((b) => {
    const why = explainedCategories.has(b.category) && b.detail !== undefined ? b.detail : undefined
    const whose = [b.agentId, why].filter((part) => part !== undefined).join(": ")
    return `${b.category}${whose === "" ? "" : ` (${whose})`}`
  }))].sort().join(", ")
