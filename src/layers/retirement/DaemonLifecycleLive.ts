/**
 * The daemon's idle timer and its retirement attempts (R1, R2, R4, R6, R7). See
 * `services/DaemonLifecycle.ts` for the contract and docs/daemon.md for what a user sees.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, type Scope, Semaphore } from "effect"
import {
  type DaemonIdentity,
  DaemonRetiring,
  type DaemonStatus,
  describeBlockers,
  type RetirementAttempt,
  type RetirementBlocker,
  RetirementFailed,
  type RetirementFailure,
  type RetirementPhase,
  RetirementRefused,
  retryWhileDecidingSeconds,
  retryWhileStuckSeconds
} from "../../domain/retirement.ts"
import type { CollectionError } from "../../domain/errors.ts"
import { ActivityClock } from "../../services/ActivityClock.ts"
import { AgentRegistry, type RegistryAdmission } from "../../services/AgentRegistry.ts"
import { DaemonLifecycle } from "../../services/DaemonLifecycle.ts"
import { FinishSubscriptions } from "../../services/FinishSubscriptions.ts"
import { InFlightRequests } from "../../services/InFlightRequests.ts"
import { MessageDelivery } from "../../services/MessageDelivery.ts"
import { RuntimeCollector } from "../../services/RuntimeCollector.ts"
import { TurnJournal } from "../../services/TurnJournal.ts"

/** The daemon's identity (its idle timeout among it) and how long a committed retirement lets requests drain. */
export interface DaemonLifecycleOptions {
  readonly identity: DaemonIdentity
  /** How long requests in flight may take to leave after a commit. Default 5 s. */
  readonly drainTimeout?: Duration.Input | undefined
}

type Trigger = RetirementAttempt["trigger"]

const failureOf = (kind: RetirementFailure["kind"], message: string): RetirementFailure => ({ kind, message })

/**
 * Builds the service and, when the identity has an idle timeout, starts its timer in the scope:
 * once the daemon has been idle for the whole interval, the timer makes a retirement attempt.
 * {@link layer} wraps it.
 */
export const makeDaemonLifecycle = Effect.fnUntraced(function*(options: DaemonLifecycleOptions): Effect.fn.Return<
  DaemonLifecycle["Service"],
  never,
  | AgentRegistry
  | RuntimeCollector
  | MessageDelivery
  | FinishSubscriptions
  | TurnJournal
  | ActivityClock
  | Scope.Scope
> {
  const registry: RegistryAdmission = yield* AgentRegistry
  const collector = yield* RuntimeCollector
  const delivery = yield* MessageDelivery
  const finish = yield* FinishSubscriptions
  const journal = yield* TurnJournal
  const activity = yield* ActivityClock
  const requests = yield* Effect.serviceOption(InFlightRequests)
  const scope = yield* Effect.scope
  const timeoutMillis = options.identity.idleTimeout.millis
  const drainTimeout = Duration.fromInputUnsafe(options.drainTimeout ?? "5 seconds")

  let phase: RetirementPhase = "resident"
  /** A refused or failed attempt re-arms a full interval from the moment it ended (R7). */
  let rearmedAt = yield* Clock.currentTimeMillis
  let lastAttempt: RetirementAttempt | null = null
  let failure: RetirementFailure | null = null
  const retired = Deferred.makeUnsafe<void>()
  /**
   * Refusals already logged, by their set of categories: the same kind of refusal repeated (on
   * every interval, whoever holds it) is logged once, and the set stays small.
   */
  const logged = new Set<string>()
  /** When the attempt under way began: one that ends neither refused, failed nor committed is reopened. */
  let attemptAt = 0
  const attempts = yield* Semaphore.make(1)

  const idleSince = () => Math.max(activity.lastActivityAt(), rearmedAt)

  /** The daemon's own work that keeps it resident: turns, lifecycle operations, deliveries, subscriptions. */
  const ownBlockers: Effect.Effect<ReadonlyArray<RetirementBlocker>> = Effect.gen(function*() {
    const [turns, deliveries, subscriptions] = yield* Effect.all([
      registry.retirementBlockers,
      delivery.pendingRecipients,
      finish.retirementBlockers
    ])
    return [
      ...turns,
      ...deliveries.map((agentId): RetirementBlocker => ({ category: "queued-delivery", agentId })),
      ...subscriptions
    ]
  })

  /** The whole evidence of an attempt; a journal that cannot be read fails it (prepare_failed). */
  const evidence = Effect.gen(function*() {
    // What the store refused earlier is written again first: an idle daemon is not held resident
    // by a write that would succeed now.
    yield* registry.retryWrites
    const own = yield* ownBlockers
    const runtimes = yield* collector.retirementBlockers(true)
    // The journal must be readable: what it holds is what a restart takes over.
    const unfinished = yield* journal.unfinished
    const carried = new Set((yield* registry.retirementBlockers).flatMap((b) => b.detail === undefined ? [] : [b.detail]))
    const stray = unfinished.filter((record) => !carried.has(record.turnId)).map((record): RetirementBlocker => ({
      category: `turn-${record.state}`,
      agentId: record.agentId,
      detail: record.turnId
    }))
    return [...own, ...runtimes, ...stray]
  })

  const reopen = Effect.gen(function*() {
    phase = "resident"
    rearmedAt = yield* Clock.currentTimeMillis
    yield* registry.resumeAdmission
  })

  const record = (attempt: RetirementAttempt) =>
    Effect.sync(() => {
      lastAttempt = attempt
    })

  const refuse = Effect.fnUntraced(function*(trigger: Trigger, at: number, blockers: ReadonlyArray<RetirementBlocker>) {
    yield* record({ at, trigger, outcome: "refused", blockers, failure: null })
    const reason = describeBlockers(blockers)
    const kind = [...new Set(blockers.map((blocker) => blocker.category))].sort().join(",")
    if (!logged.has(kind)) {
      logged.add(kind)
      yield* Effect.logInfo(`daemon retirement refused: ${reason}`)
    }
    yield* reopen
    return yield* new RetirementRefused({ message: `Retirement refused: ${reason}`, blockers })
  })

  /** A failure before the commit: nothing was released, the daemon serves on. */
  const prepareFailed = Effect.fnUntraced(function*(trigger: Trigger, at: number, message: string) {
    const found = failureOf("prepare_failed", message)
    yield* record({ at, trigger, outcome: "failed", blockers: [], failure: found })
    yield* Effect.logWarning(`daemon retirement failed: prepare_failed: ${message}`)
    yield* reopen
    return yield* new RetirementFailed({ message: `Retirement failed (prepare_failed): ${message}`, failure: found })
  })

  /** A failure after the commit: admission stays closed, the phase stays retiring, nothing is killed. */
  const stuck = Effect.fnUntraced(function*(trigger: Trigger, at: number, found: RetirementFailure) {
    failure = found
    yield* registry.pauseAdmission(DaemonRetiring.stuck("new work", found))
    yield* record({ at, trigger, outcome: "failed", blockers: [], failure: found })
    yield* Effect.logError(`daemon retirement failed: ${found.kind}: ${found.message}`)
    return yield* new RetirementFailed({ message: `Retirement failed (${found.kind}): ${found.message}`, failure: found })
  })

  /** After the commit: requests in flight leave within the bound, then the host may exit. */
  const drain = (trigger: Trigger, at: number, mark: number) =>
    Effect.gen(function*() {
      if (Option.isSome(requests)) {
        const left = () => requests.value.countBefore(mark)
        const gone = yield* Effect.gen(function*() {
          while (left() > 0) yield* Effect.sleep("20 millis")
        }).pipe(Effect.timeoutOption(drainTimeout))
        if (Option.isNone(gone)) {
          return yield* Effect.ignore(stuck(trigger, at, failureOf(
            "reader_drain_failed",
            `${left()} requests were still in flight after ${Duration.format(drainTimeout)}`
          )))
        }
      }
      yield* Effect.logInfo("Daemon retired: every runtime released resumably").pipe(
        Effect.annotateLogs({ trigger, idleTimeout: options.identity.idleTimeout.value ?? "none" })
      )
      yield* Deferred.succeed(retired, undefined)
    })

  /** Closing a runtime or saving its record failed: the release cannot be taken back (release_failed). */
  const isReleaseError = (error: CollectionError) =>
    error._tag === "RuntimeCloseFailed" || error._tag === "RuntimePersistFailed"

  const attemptOnce = (trigger: Trigger): Effect.Effect<RetirementAttempt, RetirementRefused | RetirementFailed> =>
    Effect.gen(function*() {
      // A failed commit holds the daemon retiring; a committed one is on its way out.
      if (failure !== null) {
        return yield* new RetirementFailed({ message: `Retirement failed earlier (${failure.kind}): ${failure.message}`, failure })
      }
      if (lastAttempt?.outcome === "committed") return lastAttempt
      const at = yield* Clock.currentTimeMillis
      attemptAt = at
      const touches = activity.touches()
      phase = "retiring"
      yield* registry.pauseAdmission(DaemonRetiring.of("new work"))
      const read = yield* Effect.exit(evidence)
      if (Exit.isFailure(read)) return yield* prepareFailed(trigger, at, Cause.pretty(read.cause))
      if (read.value.length > 0) return yield* refuse(trigger, at, read.value)
      // Work that came while the evidence was read (a session event, a runtime's own turn) may not be in it.
      if (activity.touches() !== touches) {
        return yield* refuse(trigger, at, [{ category: "activity", detail: "activity while the evidence was read" }])
      }

      // Committed: every runtime is released as a collection would release it.
      const released = yield* Effect.exit(collector.releaseAll)
      if (Exit.isFailure(released)) {
        return yield* stuck(trigger, at, failureOf("release_failed", Cause.pretty(released.cause)))
      }
      const { remaining, report } = released.value
      const releaseFailures = report.failures.filter(({ error }) => isReleaseError(error))
      if (releaseFailures.length > 0) {
        const message = releaseFailures.map(({ agentId, error }) => `${agentId}: ${error.message}`).join("; ")
        return yield* stuck(trigger, at, failureOf("release_failed", message))
      }
      // A provider that could not be asked again before its release (a probe that failed or timed
      // out): that runtime was not closed, so nothing is lost — the daemon serves on.
      const unprobed = report.failures.map(({ agentId, error }): RetirementBlocker => ({
        category: "probe-failed",
        agentId,
        detail: error.message
      }))
      // Something moved between the evidence and the release (a runtime's own work): released
      // runtimes stay released (resumable), and the daemon serves on.
      // The collector's last answer of a probe that just failed is that same failure: named once.
      const failedNow = new Set(unprobed.map((blocker) => blocker.agentId))
      const runtimes = (yield* collector.retirementBlockers(false)).filter((blocker) =>
        !(blocker.category === "probe-failure" && failedNow.has(blocker.agentId))
      )
      const after = [...unprobed, ...yield* ownBlockers, ...runtimes]
      if (remaining.length > 0 || after.length > 0) {
        const blockers = after.length > 0 ? after : remaining.map((agentId): RetirementBlocker => ({ category: "release-declined", agentId }))
        return yield* refuse(trigger, at, blockers)
      }
      const committed: RetirementAttempt = { at, trigger, outcome: "committed", blockers: [], failure: null }
      yield* record(committed)
      // The requests in flight now are drained; a retire request itself ends as soon as it is answered.
      const mark = Option.isSome(requests) ? requests.value.mark() : 0
      yield* drain(trigger, at, mark).pipe(Effect.forkIn(scope))
      return committed
    })

  /** An attempt that ended neither refused, failed, nor committed (a defect, an interruption). */
  const unsettled = () => phase === "retiring" && failure === null && lastAttempt?.outcome !== "committed"

  /**
   * One attempt at a time, run in the lifecycle's own scope: a caller that goes away (a client
   * abort) stops waiting, and the attempt still ends refused, failed, or committed. One that
   * ends otherwise is reopened as prepare_failed.
   */
  const attempt = (trigger: Trigger): Effect.Effect<RetirementAttempt, RetirementRefused | RetirementFailed> =>
    attempts.withPermits(1)(attemptOnce(trigger).pipe(
      Effect.onExit((exit) =>
        unsettled()
          ? Effect.ignore(prepareFailed(trigger, attemptAt, Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "the attempt ended unsettled"))
          : Effect.void
      ),
      Effect.catchDefect((defect) =>
        Effect.fail(
          new RetirementFailed({
            message: `Retirement failed (prepare_failed): ${String(defect)}`,
            failure: failureOf("prepare_failed", String(defect))
          })
        )
      )
    )).pipe(
      Effect.tap((done) => Effect.annotateCurrentSpan("quiesce.retire.outcome", done.outcome)),
      Effect.withSpan("Daemon.retire", { attributes: { "quiesce.retire.trigger": trigger } }),
      Effect.forkIn(scope, { startImmediately: true }),
      Effect.flatMap(Fiber.join)
    )

  // The timer: continuous proven inactivity from the latest activity or re-arm; any activity
  // restarts the full interval (the deadline is recomputed every time it comes due).
  if (timeoutMillis !== null) {
    yield* Effect.gen(function*() {
      while (true) {
        const now = yield* Clock.currentTimeMillis
        const due = idleSince() + timeoutMillis
        if (phase !== "resident" || failure !== null) {
          yield* Effect.sleep(Duration.millis(timeoutMillis))
        } else if (now < due) {
          yield* Effect.sleep(Duration.millis(due - now))
        } else {
          const outcome = yield* Effect.exit(attempt("timer"))
          if (Exit.isSuccess(outcome)) return
        }
      }
    }).pipe(Effect.forkScoped)
  }

  const status: Effect.Effect<DaemonStatus> = Effect.gen(function*() {
    const blockers = [...yield* ownBlockers, ...yield* collector.retirementBlockers(false)]
    return {
      phase,
      idleTimeout: options.identity.idleTimeout,
      idleSince: idleSince(),
      deadline: timeoutMillis === null || phase !== "resident" || failure !== null ? null : idleSince() + timeoutMillis,
      blockers,
      lastAttempt,
      failure
    }
  })

  return DaemonLifecycle.of({
    identity: options.identity,
    status,
    retireNow: attempt("request"),
    admit: (what) =>
      phase === "resident"
        ? Effect.void
        : Effect.fail(failure === null ? DaemonRetiring.of(what) : DaemonRetiring.stuck(what, failure)),
    retryAfterSeconds: () => failure === null ? retryWhileDecidingSeconds : retryWhileStuckSeconds,
    retired: Deferred.await(retired)
  })
})

/** The daemon's idle timer and retirement, over the registry, the collector, delivery, subscriptions and the journal. */
export const layer = (options: DaemonLifecycleOptions): Layer.Layer<
  DaemonLifecycle,
  never,
  AgentRegistry | RuntimeCollector | MessageDelivery | FinishSubscriptions | TurnJournal | ActivityClock
> => Layer.effect(DaemonLifecycle, makeDaemonLifecycle(options))
