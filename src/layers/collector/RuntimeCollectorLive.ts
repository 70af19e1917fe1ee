/**
 * The collector (C1–C6, X4): idle clocks, the eligibility policy over families, provider veto
 * probes with timeouts, the sweep loop and the memory budget, behind the `RuntimeCollector` tag.
 * Hosts build it with `layer(options)` over their `RuntimeCandidates` and `CallerProtection`.
 *
 * @module
 */
import { AgentEvents } from "../../services/AgentEvents.ts"
import { Cause, Clock, Deferred, Effect, Exit, Layer, Option, Schedule, type Scope, Semaphore, Stream } from "effect"
import type { ReleaseReason } from "../../domain/agent.ts"
import type { MemoryStatus, ReleaseCause } from "../../domain/memory.ts"
import { blocker, type Blocker, type MemberBlocker, noBlockers } from "../../domain/blocker.ts"
import type { RuntimeCandidate } from "../../domain/candidate.ts"
import { agentAttributes } from "../../domain/spans.ts"
import { type CollectionError, RuntimeCloseFailed, RuntimeNotFound } from "../../domain/errors.ts"
import {
  type CollectedRuntime,
  CollectOutcome,
  emptySweepReport,
  type ProbeObservation,
  type Residency,
  type SweepFailure,
  type SweepReport
} from "../../domain/sweep.ts"
import type { RetirementBlocker } from "../../domain/retirement.ts"
import { CallerProtection } from "../../services/CallerProtection.ts"
import { HostMemory } from "../../services/HostMemory.ts"
import { ProcessInspection } from "../../services/ProcessInspection.ts"
import { RuntimeCandidates } from "../../services/RuntimeCandidates.ts"
import { type ExplainOptions, RuntimeCollector, type RuntimeCollectorOptions } from "../../services/RuntimeCollector.ts"
import {
  recordCollection,
  recordRelease,
  recordReleasedBytes,
  recordSweep,
  type RetentionReason,
  RetentionTally,
  setMemoryBudget,
  setResidentRuntimes
} from "../metrics/Metrics.ts"
import { type FamilyIndex, indexFamilies, makeFamilyIndexCache } from "./FamilyIndex.ts"
import { IdleClocks } from "./IdleClocks.ts"
import { makeMemoryBudget } from "./MemoryBudget.ts"
import { budgetView, type MemorySettings, resolveMemorySettings } from "./memoryPressure.ts"
import { describeDefect, type ProbeVerdict, runProbe } from "./probe.ts"
import { type CollectorSettings, resolveCollectorSettings } from "./settings.ts"

const callerProtected = blocker("caller-protected")

/** Which families a decision covers, and whether the idle period applies. */
interface DecisionScope {
  /** Positions in the snapshot whose family is decided; undefined means every runtime. */
  readonly roots: ReadonlyArray<number> | undefined
  readonly ignoreIdlePeriod: boolean
  /** The idle period this decision applies instead of the configured one (a pressure sweep's `minIdle`). */
  readonly idlePeriodMillis?: number | undefined
  /** Why its releases happen, for the memory metrics and the log; undefined for requests (collect now, retirement). */
  readonly cause?: ReleaseCause | undefined
  /** Why its releases happen, for the record each released agent keeps. */
  readonly reason: ReleaseReason
  readonly index: (snapshot: ReadonlyArray<RuntimeCandidate>) => FamilyIndex
  /**
   * A daemon's retirement: the daemon itself has checked what callers are owed (deliveries, and
   * finish subscriptions that need this process); a durable local subscription comes back with it.
   */
  readonly ignoreCallerProtection?: boolean | undefined
}

/**
 * Builds the collector in the current scope and forks its tick loop there (C1): closing the scope
 * interrupts the loop and any sweep or probe in flight, and waits for a close that has begun.
 */
export const makeRuntimeCollector = Effect.fnUntraced(function*(
  options?: RuntimeCollectorOptions
): Effect.fn.Return<RuntimeCollector["Service"], never, RuntimeCandidates | CallerProtection | Scope.Scope> {
  const settings: CollectorSettings = resolveCollectorSettings(options)
  const memorySettings: MemorySettings | undefined = resolveMemorySettings(options?.memory)
  const candidates = yield* RuntimeCandidates
  const protection = yield* CallerProtection
  const inspection = yield* Effect.serviceOption(ProcessInspection)
  const hostMemory = yield* Effect.serviceOption(HostMemory)
  const clocks = new IdleClocks()
  const lastProbes = new WeakMap<object, ProbeObservation>()
  // Optional: hosts that serve live events (the daemon) show each agent's vetoes there.
  const agentEvents = yield* Effect.serviceOption(AgentEvents)
  /**
   * Records a runtime's probe answer. A refusal (a veto, a failure) keeps the time of the first
   * refusal in a row as its \`since\`, so a veto that has held for hours says so.
   */
  const noteProbe = (identity: object, observation: ProbeObservation) => {
    const previous = lastProbes.get(identity)
    // The agent's live events show a veto when it begins or its reason changes, not every sweep's.
    if (
      agentEvents._tag === "Some" && observation.outcome !== "permitted" &&
      (previous === undefined || previous.outcome !== observation.outcome || previous.message !== observation.message)
    ) {
      const reason = observation.message ?? (observation.outcome === "vetoed" ? "its provider vetoed the release" : `its probe ${observation.outcome}`)
      agentEvents.value.publish(observation.agentId, { _tag: "vetoed", reason }, observation.at)
    }
    lastProbes.set(
      identity,
      observation.outcome === "permitted"
        ? observation
        : { ...observation, since: previous === undefined || previous.outcome === "permitted" ? observation.at : previous.since ?? previous.at }
    )
  }
  // Sweeps and collect-now requests own the idle clocks in turn, never together.
  const decisions = yield* Semaphore.make(1)
  const scope = yield* Effect.scope
  let stopped = false
  const sweepIndex = makeFamilyIndexCache()
  yield* Effect.addFinalizer(() => Effect.sync(() => (stopped = true)))

  /** A runtime's own first blocker, caller protection included (unless ignored); undefined when clear. */
  const firstBlocker = (candidate: RuntimeCandidate, ignoreCallerProtection = false): Effect.Effect<Blocker | undefined> =>
    Effect.flatMap(candidate.blockers, (found) =>
      found.length > 0
        ? Effect.succeed(found[0])
        : ignoreCallerProtection
        ? Effect.succeed(undefined)
        : Effect.map(protection.isProtected(candidate.agentId), (isProtected) =>
          isProtected ? callerProtected : undefined
        ))

  /** Every blocker of a runtime, for explanations. */
  const allBlockers = (candidate: RuntimeCandidate): Effect.Effect<ReadonlyArray<Blocker>> =>
    Effect.flatMap(candidate.blockers, (found) =>
      Effect.map(protection.isProtected(candidate.agentId), (isProtected) =>
        isProtected ? [...found, callerProtected] : found.length === 0 ? noBlockers : found
      ))

  /**
   * C8: after the asynchronous steps, inside the owner's lane: the family has the same members
   * by identity, the same activity timestamps, and a clear baseline.
   */
  const revalidate = (
    root: RuntimeCandidate,
    family: ReadonlyArray<RuntimeCandidate>,
    ignoreCallerProtection: boolean
  ): Effect.Effect<boolean> =>
    Effect.gen(function*() {
      const fresh = yield* candidates.captureFamily(root.agentId)
      if (fresh.length !== family.length || fresh[0]?.identity !== root.identity) return false
      if (fresh[0].sessionId !== root.sessionId) return false
      const captured = new Map<object, RuntimeCandidate>()
      for (const member of family) captured.set(member.identity, member)
      for (const member of fresh) {
        if (captured.get(member.identity)?.lastActivityAt !== member.lastActivityAt) return false
        if ((yield* firstBlocker(member, ignoreCallerProtection)) !== undefined) return false
      }
      return true
    }).pipe(
      Effect.tap((holds) => Effect.annotateCurrentSpan("quiesce.revalidate.holds", holds)),
      Effect.withSpan("RuntimeCollector.revalidate", { attributes: agentAttributes(root.agentId, root.provider) })
    )

  // Retentions by reason (X3), added to the metric once per decision.
  const retained = new RetentionTally()

  const logRetention = (candidate: RuntimeCandidate, reason: RetentionReason, by: RuntimeCandidate) =>
    Effect.logDebug("Idle runtime retained").pipe(
      Effect.annotateLogs({ agentId: candidate.agentId, reason, retainedBy: by.agentId })
    )

  const closeRuntime = (
    snapshot: ReadonlyArray<RuntimeCandidate>,
    index: FamilyIndex,
    position: number,
    released: ReadonlySet<object>,
    ignoreCallerProtection: boolean,
    cause: ReleaseCause | undefined,
    reason: ReleaseReason
  ): Effect.Effect<
    | { readonly _tag: "Collected"; readonly entry: CollectedRuntime }
    | { readonly _tag: "Declined" }
    | { readonly _tag: "Failed"; readonly failure: SweepFailure }
  > => {
    const root = snapshot[position]!
    // As it stands after this decision's earlier releases: only a parent-label cycle puts a
    // released runtime in a family closed after it, and what was below that family only through
    // the released runtime is no longer in it.
    const family = index.members(position, (member) => released.has(snapshot[member]!.identity))
      .map((member) => snapshot[member]!)
    // The owner makes its close-and-persist region uninterruptible (see RuntimeCandidate), so
    // scope closure waits for a close that has begun but not for a lane that is still busy.
    return (
      Effect.gen(function*() {
        // Sampled just before the close: afterwards the memory is gone.
        const residentBytes = root.residentBytes === undefined ? undefined : yield* root.residentBytes
        const exit = yield* Effect.exit(root.closeIfEligible(revalidate(root, family, ignoreCallerProtection), reason))
        const at = yield* Clock.currentTimeMillis
        if (exit._tag === "Success") {
          if (exit.value) {
            const entry: CollectedRuntime = {
              agentId: root.agentId,
              provider: root.provider,
              sessionId: root.sessionId ?? ""
            }
            yield* Effect.logInfo("Collected idle agent runtime").pipe(
              Effect.annotateLogs(cause === undefined ? entry : { ...entry, cause })
            )
            yield* recordCollection(root.provider)
            if (residentBytes !== undefined) yield* recordReleasedBytes(residentBytes)
            if (cause !== undefined) yield* recordRelease(cause, residentBytes)
            return { _tag: "Collected", entry } as const
          }
          clocks.retain(root, at)
          retained.add("close-declined")
          yield* logRetention(root, "close-declined", root)
          return { _tag: "Declined" } as const
        }
        clocks.retain(root, at)
        const error: CollectionError = Option.getOrElse(
          Cause.findErrorOption(exit.cause),
          () => new RuntimeCloseFailed({ agentId: root.agentId, message: describeDefect(Cause.squash(exit.cause)) })
        )
        yield* Effect.logWarning("Idle runtime cleanup failed").pipe(
          Effect.annotateLogs({ agentId: root.agentId, error: error.message })
        )
        retained.add("close-failure")
        return { _tag: "Failed", failure: { agentId: root.agentId, error } } as const
      })
    ).pipe(
      Effect.tap((outcome) => Effect.annotateCurrentSpan("quiesce.close.outcome", outcome._tag)),
      Effect.withSpan("RuntimeCollector.close", {
        attributes: { ...agentAttributes(root.agentId, root.provider), "quiesce.family.size": family.length }
      })
    )
  }

  /**
   * One decision over a captured snapshot: baseline for every family (C4, C5), provider vetoes
   * for the clear ones (C6), idle clocks (C1, C7), then closes, ancestors before descendants so
   * that a parent's revalidation sees the family it was decided on.
   */
  const decide = (snapshot: ReadonlyArray<RuntimeCandidate>, decision: DecisionScope): Effect.Effect<SweepReport> =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const index = decision.index(snapshot)
      const own = new Array<Blocker | undefined>(snapshot.length).fill(undefined)
      // The hot loop of a sweep: written out rather than through firstBlocker to allocate less.
      for (let i = 0; i < snapshot.length; i++) {
        const candidate = snapshot[i]!
        const found = yield* candidate.blockers
        own[i] = found.length > 0
          ? found[0]
          : decision.ignoreCallerProtection !== true && (yield* protection.isProtected(candidate.agentId))
          ? callerProtected
          : undefined
      }
      const blockedBy = index.propagate((i) => own[i] !== undefined)
      const probedBy = index.propagate((i) => snapshot[i]!.canStopRuntime !== undefined)

      const failures: Array<SweepFailure> = []
      const collected: Array<CollectedRuntime> = []
      // Families that go on: with a probe to ask, or clear and idle long enough to close.
      const pending: Array<{ readonly position: number; readonly probe: boolean }> = []
      const idlePeriodMillis = decision.idlePeriodMillis ?? settings.idlePeriodMillis
      const idleEnough = (root: RuntimeCandidate, at: number) =>
        decision.ignoreIdlePeriod || at - clocks.observeClear(root, at) >= idlePeriodMillis

      const roots = decision.roots
      const rootCount = roots === undefined ? snapshot.length : roots.length
      for (let k = 0; k < rootCount; k++) {
        const position = roots === undefined ? k : roots[k]!
        const root = snapshot[position]!
        if (root.sessionId === null) continue
        const witness = blockedBy[position]!
        if (witness !== -1) {
          clocks.retain(root, startedAt)
          retained.add(own[witness]!.kind)
          yield* logRetention(root, own[witness]!.kind, snapshot[witness]!)
        } else if (probedBy[position] !== -1) pending.push({ position, probe: true })
        // The hot path of a large sweep: clear, nothing to ask, and (mostly) not idle long enough.
        else if (idleEnough(root, startedAt)) pending.push({ position, probe: false })
      }
      yield* Effect.annotateCurrentSpan({ "quiesce.sweep.candidates": snapshot.length, "quiesce.sweep.families": pending.length })
      if (pending.length === 0) return emptySweepReport

      // One probe per runtime per decision, shared by every family it belongs to.
      const probes = new Map<number, Deferred.Deferred<ProbeVerdict>>()
      const probeOf = (member: number, check: NonNullable<RuntimeCandidate["canStopRuntime"]>) => {
        const known = probes.get(member)
        if (known !== undefined) return Deferred.await(known)
        const done = Deferred.makeUnsafe<ProbeVerdict>()
        probes.set(member, done)
        const candidate = snapshot[member]!
        return runProbe(candidate, check, settings.probeTimeoutMillis).pipe(
          Effect.map(({ observation, verdict }) => {
            noteProbe(candidate.identity, observation)
            return verdict
          }),
          Effect.onExit((exit) => Deferred.done(done, exit))
        )
      }
      // Within a family the members are asked in turn and the first veto stops the rest.
      const familyVerdict = Effect.fnUntraced(function*(position: number) {
        for (const member of index.members(position)) {
          const check = snapshot[member]!.canStopRuntime
          if (check === undefined) continue
          const verdict = yield* probeOf(member, check)
          if (verdict._tag !== "Permitted") return { member, verdict }
        }
        return undefined
      })
      // A probe that failed is reported once, however many families hold the runtime.
      const reportedFailures = new Set<number>()

      // Each family goes on as soon as its own verdict is in, so a hung probe delays only the
      // families it belongs to (X4). A close still waits until every family that holds the runtime
      // and was decided in this pass has settled, so that a parent's revalidation sees the family
      // it was decided on. Those families form a chain (FamilyIndex.closesAfter); a family waits
      // only for the nearest one decided in this pass, which counts as settled only once its own
      // predecessor has: one wait per family, whatever the depth.
      const settled = new Map<number, Deferred.Deferred<void>>()
      for (const { position } of pending) settled.set(position, Deferred.makeUnsafe<void>())
      // For a runtime: the nearest runtime decided in this pass up its chain (itself excluded),
      // -1 for none, -2 until known.
      const above = new Int32Array(snapshot.length).fill(-2)
      const nearestDecidedBefore = (position: number): number => {
        const path: Array<number> = []
        let at = index.closesAfter(position)
        while (at !== -1 && !settled.has(at) && above[at] === -2) {
          path.push(at)
          at = index.closesAfter(at)
        }
        const found = at === -1 ? -1 : settled.has(at) ? at : above[at]!
        for (const node of path) above[node] = found
        return found
      }
      const settledBefore = (position: number): Effect.Effect<void> => {
        const before = nearestDecidedBefore(position)
        return before === -1 ? Effect.void : Deferred.await(settled.get(before)!)
      }
      // Families whose own decision is over but whose predecessor has not settled, by predecessor.
      // Settling is bookkeeping, not a fiber: a finished family never holds a place of the
      // bounded concurrency while it waits for its predecessor.
      const waitingOn = new Map<number, Array<number>>()
      const settle = (position: number) => {
        const queue = [position]
        for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
          Deferred.doneUnsafe(settled.get(next)!, Exit.void)
          const successors = waitingOn.get(next)
          if (successors !== undefined) {
            waitingOn.delete(next)
            queue.push(...successors)
          }
        }
      }
      /** The family's own decision is over (or was interrupted): settle it once its predecessor has. */
      const decided = (position: number, interrupted: boolean) => {
        const before = nearestDecidedBefore(position)
        if (interrupted || before === -1 || Deferred.isDoneUnsafe(settled.get(before)!)) return settle(position)
        const siblings = waitingOn.get(before)
        if (siblings === undefined) waitingOn.set(before, [position])
        else siblings.push(position)
      }
      // Members of a parent-label cycle are in each other's families: the later ones are judged
      // without the runtimes this pass has already released (see closeRuntime).
      const released = new Set<object>()

      const decideFamily = Effect.fn("RuntimeCollector.family")(function*(position: number, probe: boolean) {
        const root = snapshot[position]!
        yield* Effect.annotateCurrentSpan(agentAttributes(root.agentId, root.provider))
        let at = startedAt
        if (probe) {
          const found = yield* familyVerdict(position)
          at = yield* Clock.currentTimeMillis
          if (found !== undefined) {
            clocks.retain(root, at)
            yield* Effect.annotateCurrentSpan(
              found.verdict._tag === "Vetoed"
                ? { "quiesce.family.outcome": "vetoed", "quiesce.family.vetoedBy": snapshot[found.member]!.agentId, "quiesce.veto.reason": found.verdict.reason }
                : { "quiesce.family.outcome": "probe-failed", "quiesce.family.vetoedBy": snapshot[found.member]!.agentId }
            )
            if (found.verdict._tag === "Failed") {
              retained.add("probe-failure")
              if (reportedFailures.has(found.member)) return
              reportedFailures.add(found.member)
              const agentId = snapshot[found.member]!.agentId
              failures.push({ agentId, error: found.verdict.error })
              yield* Effect.logWarning("Idle runtime cleanup failed").pipe(
                Effect.annotateLogs({ agentId, error: found.verdict.error.message })
              )
            } else {
              retained.add("veto")
              yield* logRetention(root, "veto", snapshot[found.member]!)
            }
            return
          }
          if (!idleEnough(root, at)) return yield* Effect.annotateCurrentSpan("quiesce.family.outcome", "not-idle")
        }
        yield* settledBefore(position)
        const outcome = yield* closeRuntime(
          snapshot,
          index,
          position,
          released,
          decision.ignoreCallerProtection === true,
          decision.cause,
          decision.reason
        )
        yield* Effect.annotateCurrentSpan("quiesce.family.outcome", outcome._tag === "Collected" ? "released" : outcome._tag === "Declined" ? "declined" : "close-failed")
        if (outcome._tag === "Collected") {
          released.add(root.identity)
          collected.push(outcome.entry)
        } else if (outcome._tag === "Failed") failures.push(outcome.failure)
      })

      // Ancestors first, cycle members in snapshot order: a family waits only on one that started
      // before it, so the bounded concurrency never leaves a waiting family without the one it
      // waits for running, and the first unsettled family never waits at all.
      const ordered = [...pending].sort((a, b) =>
        index.depth(a.position) - index.depth(b.position) || a.position - b.position
      )
      yield* Effect.forEach(
        ordered,
        ({ position, probe }) =>
          // An interrupted sweep settles at once, so that nothing waits on it.
          decideFamily(position, probe).pipe(Effect.onExit((exit) => Effect.sync(() => decided(position, Exit.isFailure(exit))))),
        { concurrency: settings.probeConcurrency, discard: true }
      )
      yield* Effect.annotateCurrentSpan({ "quiesce.sweep.released": collected.length, "quiesce.sweep.failures": failures.length })
      return collected.length === 0 && failures.length === 0 ? emptySweepReport : { collected, failures }
    }).pipe(
      Effect.ensuring(retained.flush),
      // A trace of its own for the periodic tick and a pressure pass (their fibers have no parent
      // span); under the request's span for a collect, under the attempt's for a retirement.
      Effect.withSpan("RuntimeCollector.sweep", { attributes: { "quiesce.sweep.reason": decision.reason } })
    )

  const runSweep: Effect.Effect<SweepReport> = decisions.withPermits(1)(
    Effect.suspend(() =>
      settings.enabled && !stopped
        ? Effect.flatMap(candidates.capture, (snapshot) =>
          decide(snapshot, { roots: undefined, ignoreIdlePeriod: false, index: sweepIndex, cause: "idle", reason: "idle" }).pipe(
            Effect.tap((report) =>
              recordSweep.pipe(Effect.andThen(setResidentRuntimes(snapshot.length - report.collected.length)))
            )
          ))
        : Effect.succeed(emptySweepReport)
    )
  )

  // C11: one sweep at a time; callers join the one in flight. The sweep runs in the layer's
  // scope, so an impatient caller never cancels it, and closing the layer interrupts it.
  let inFlight: Deferred.Deferred<SweepReport> | undefined
  const sweep: Effect.Effect<SweepReport> = Effect.suspend(() => {
    if (!settings.enabled || stopped) return Effect.succeed(emptySweepReport)
    if (inFlight !== undefined) return Deferred.await(inFlight)
    const done = Deferred.makeUnsafe<SweepReport>()
    inFlight = done
    // onExit also runs when the layer's scope interrupts the sweep, so joiners never hang.
    return runSweep.pipe(
      Effect.onExit((exit) =>
        Effect.sync(() => {
          inFlight = undefined
        }).pipe(Effect.andThen(Deferred.done(done, exit)))
      ),
      Effect.forkIn(scope),
      Effect.andThen(Deferred.await(done))
    )
  })

  const explainFamily = (family: ReadonlyArray<RuntimeCandidate>, now: number): Effect.Effect<Residency> =>
    Effect.gen(function*() {
      const root = family[0]!
      const blockers: Array<MemberBlocker> = []
      let veto: ProbeObservation | null = null
      for (const member of family) {
        for (const found of yield* allBlockers(member)) blockers.push({ agentId: member.agentId, ...found })
        const probe = lastProbes.get(member.identity)
        if (veto === null && probe !== undefined && probe.outcome !== "permitted") veto = probe
      }
      const idleSince = clocks.idleSince(root)
      const state: Residency["state"] = root.sessionId === null
        ? "not-resumable"
        : blockers.length > 0
        ? "blocked"
        : veto !== null
        ? "vetoed"
        : settings.enabled
        ? "idle"
        : "collection-disabled"
      // A retention seen by the last sweep restarts the idle period when a sweep next sees it clear.
      const releasableAt = state === "idle"
        ? (clocks.isRetained(root) ? Math.max(now, idleSince) : idleSince) + settings.idlePeriodMillis
        : null
      return {
        agentId: root.agentId,
        provider: root.provider,
        sessionId: root.sessionId,
        family: family.map((member) => member.agentId),
        blockers,
        veto,
        state,
        idleSince,
        releasableAt,
        ...(memoryBudget === undefined ? {} : { memory: memoryBudget.memoryOf(root.agentId) })
      }
    })

  const captureFamily = (agentId: string) =>
    Effect.flatMap(candidates.captureFamily(agentId), (family) =>
      family.length === 0 ? Effect.fail(RuntimeNotFound.of(agentId)) : Effect.succeed(family))

  /** Asks every member's provider now, recording each answer as its last probe; closes nothing, keeps the idle clocks. */
  const probeFamily = (family: ReadonlyArray<RuntimeCandidate>) =>
    Effect.forEach(family, (member) => {
      const check = member.canStopRuntime
      return check === undefined ? Effect.void : runProbe(member, check, settings.probeTimeoutMillis).pipe(
        Effect.map(({ observation }) => noteProbe(member.identity, observation))
      )
    }, { concurrency: settings.probeConcurrency, discard: true })

  // ---- the probe after a turn ends ----------------------------------------------------------

  /** Agents with an after-turn probe under way, and whether another turn ended since it began. */
  const probingAfterTurn = new Map<string, boolean>()
  /** After-turn probes share the probe concurrency among themselves: a burst of turn ends never storms the providers. */
  const afterTurnSlots = yield* Semaphore.make(settings.probeConcurrency)

  /** Asks the runtime's own provider now, when it can veto and nothing else keeps it resident. */
  const probeOnce = (agentId: string) =>
    Effect.gen(function*() {
      const [candidate] = yield* candidates.captureFamily(agentId)
      const check = candidate?.canStopRuntime
      if (candidate === undefined || check === undefined || candidate.sessionId === null) return
      // Busy again (the next turn, a permission): it ends in another probe, or the sweep asks.
      if ((yield* candidate.blockers).length > 0) return
      const { observation } = yield* runProbe(candidate, check, settings.probeTimeoutMillis)
      noteProbe(candidate.identity, observation)
    })

  /** Whether another turn ended while the probe ran: then one more probe, else the agent is done. */
  const probeAgain = (agentId: string) =>
    Effect.sync(() => {
      if (probingAfterTurn.get(agentId) === true) {
        probingAfterTurn.set(agentId, false)
        return true
      }
      probingAfterTurn.delete(agentId)
      return false
    })

  const probeUntilSettled = (agentId: string): Effect.Effect<void> =>
    afterTurnSlots.withPermits(1)(probeOnce(agentId)).pipe(
      Effect.andThen(probeAgain(agentId)),
      Effect.flatMap((again) => again ? probeUntilSettled(agentId) : Effect.void)
    )

  /**
   * One probe per turn end, bounded (C6): at most one runs per runtime and one more waits behind
   * it however many turns end meanwhile, each within the probe timeout, all within the probe
   * concurrency. What it answers is the runtime's last probe, as a sweep's would be.
   */
  const probeAfterTurn = (agentId: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (stopped) return Effect.void
      if (probingAfterTurn.has(agentId)) return Effect.sync(() => void probingAfterTurn.set(agentId, true))
      probingAfterTurn.set(agentId, false)
      return probeUntilSettled(agentId).pipe(
        Effect.onInterrupt(() => Effect.sync(() => probingAfterTurn.delete(agentId))),
        Effect.forkIn(scope),
        Effect.asVoid
      )
    })

  if (candidates.turnEnds !== undefined) {
    // Subscribed before the collector is offered: no turn end is missed.
    const turnEnds = yield* candidates.turnEnds
    yield* Stream.runForEach(turnEnds, probeAfterTurn).pipe(Effect.forkScoped)
  }

  const explain = Effect.fn("RuntimeCollector.explain")(function*(agentId: string, options?: ExplainOptions) {
    const family = yield* captureFamily(agentId)
    if (options?.probe === true) yield* probeFamily(family)
    return yield* explainFamily(family, yield* Clock.currentTimeMillis)
  })

  const collectNow = Effect.fn("RuntimeCollector.collectNow")(function*(agentId: string) {
    return yield* decisions.withPermits(1)(Effect.gen(function*() {
      const family = yield* captureFamily(agentId)
      if (stopped) return CollectOutcome.cases.Retained.make({ residency: yield* explainFamily(family, yield* Clock.currentTimeMillis) })
      const report = yield* decide(family, { roots: [0], ignoreIdlePeriod: true, index: indexFamilies, reason: "collect" })
      const entry = report.collected[0]
      if (entry !== undefined) return CollectOutcome.cases.Collected.make({ runtime: entry })
      const failure = report.failures[0]
      if (failure !== undefined) return CollectOutcome.cases.Failed.make(failure)
      const residency = yield* explainFamily(
        yield* candidates.captureFamily(agentId).pipe(Effect.map((fresh) => fresh.length > 0 ? fresh : family)),
        yield* Clock.currentTimeMillis
      )
      return CollectOutcome.cases.Retained.make({ residency })
    }))
  })

  /**
   * What would keep every resident runtime from being released now, the idle period aside (R4):
   * each one's baseline with caller protection, a missing persistence handle, and — with `probe` —
   * its provider's veto, asked fresh. Nothing is closed. Runs whether or not collection is enabled.
   */
  const retirementBlockers = (probe: boolean): Effect.Effect<ReadonlyArray<RetirementBlocker>> =>
    Effect.gen(function*() {
      const snapshot = yield* candidates.capture
      const found: Array<RetirementBlocker> = []
      const clear: Array<RuntimeCandidate> = []
      for (const candidate of snapshot) {
        // Caller protection is the daemon's to judge here (see DecisionScope.ignoreCallerProtection).
        const own = yield* candidate.blockers
        for (const b of own) found.push({ category: b.kind, agentId: candidate.agentId, ...(b.detail === undefined ? {} : { detail: b.detail }) })
        if (candidate.sessionId === null) found.push({ category: "not-resumable", agentId: candidate.agentId })
        if (own.length === 0 && candidate.sessionId !== null) clear.push(candidate)
      }
      if (probe) {
        yield* Effect.forEach(clear, (candidate) => {
          const check = candidate.canStopRuntime
          return check === undefined
            ? Effect.void
            : runProbe(candidate, check, settings.probeTimeoutMillis).pipe(
              Effect.map(({ observation }) => noteProbe(candidate.identity, observation))
            )
        }, { concurrency: settings.probeConcurrency, discard: true })
      }
      // Asked fresh, or (for the status) the last answer: a veto that holds keeps the daemon too.
      for (const candidate of clear) {
        const last = lastProbes.get(candidate.identity)
        if (last === undefined || last.outcome === "permitted" || candidate.canStopRuntime === undefined) continue
        found.push({
          category: last.outcome === "vetoed" ? "veto" : "probe-failure",
          agentId: candidate.agentId,
          ...(last.message === undefined ? {} : { detail: last.message }),
          since: new Date(last.since ?? last.at).toISOString()
        })
      }
      return found
    })

  /**
   * Releases every resident runtime as collections (each revalidated in its lane, ancestors
   * first), the idle period aside. What is still resident afterwards was declined or failed.
   */
  const releaseAll: Effect.Effect<{ readonly report: SweepReport; readonly remaining: ReadonlyArray<string> }> =
    decisions.withPermits(1)(Effect.gen(function*() {
      const report = yield* decide(yield* candidates.capture, {
        roots: undefined,
        ignoreIdlePeriod: true,
        index: indexFamilies,
        ignoreCallerProtection: true,
        reason: "retirement"
      })
      const remaining = (yield* candidates.capture).map((candidate) => candidate.agentId)
      return { report, remaining }
    }))

  const memoryBudget = memorySettings === undefined ? undefined : makeMemoryBudget({
    budget: memorySettings,
    probeConcurrency: settings.probeConcurrency,
    candidates,
    inspection,
    hostMemory,
    clocks,
    index: sweepIndex,
    isBlocked: (candidate) => Effect.map(firstBlocker(candidate), (found) => found !== undefined),
    decide: (snapshot, roots, index, cause) =>
      decide(snapshot, {
        roots,
        ignoreIdlePeriod: false,
        idlePeriodMillis: memorySettings.minIdleMillis,
        index: () => index,
        cause,
        reason: cause
      }),
    explainFamily
  })

  const checkMemory: Effect.Effect<SweepReport> = memoryBudget === undefined
    ? Effect.succeed(emptySweepReport)
    : decisions.withPermits(1)(
      Effect.suspend(() =>
        settings.enabled && !stopped ? Effect.ensuring(memoryBudget.relieve, retained.flush) : Effect.succeed(emptySweepReport)
      )
    )

  const memory: Effect.Effect<Option.Option<MemoryStatus>> = Effect.sync(() =>
    memoryBudget === undefined ? Option.none() : Option.some(memoryBudget.status())
  )

  if (settings.enabled && memorySettings !== undefined) {
    yield* setMemoryBudget(budgetView(memorySettings))
    yield* checkMemory.pipe(
      Effect.catchCause((cause) => Effect.logError("Memory budget check failed", cause)),
      Effect.schedule(Schedule.fixed(memorySettings.sampleInterval)),
      Effect.forkScoped
    )
  }

  if (settings.enabled) {
    yield* sweep.pipe(
      Effect.catchCause((cause) => Effect.logError("Idle runtime sweep failed", cause)),
      Effect.schedule(Schedule.fixed(settings.tickInterval)),
      Effect.forkScoped
    )
  }

  return { sweep, collectNow, explain, retirementBlockers, releaseAll, checkMemory, memory }
})

/** The collector over the host's runtimes, its tick loop living as long as the layer. */
export const layer = (
  options?: RuntimeCollectorOptions
): Layer.Layer<RuntimeCollector, never, RuntimeCandidates | CallerProtection> =>
  Layer.effect(RuntimeCollector, makeRuntimeCollector(options))
