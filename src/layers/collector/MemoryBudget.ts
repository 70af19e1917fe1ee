/**
 * The memory budget's loop step and state (docs/collector.md#a-memory-budget-release-the-safest-runtimes-first):
 * one sample of every resident runtime's RSS and the host's available memory, the episode it
 * starts, continues or ends (with hysteresis), and under pressure one pressure sweep, whose
 * decisions the collector makes with every check it always makes. The collector owns the
 * schedule and the decision lock; this module owns what the budget measured and decided.
 */
import { Clock, Effect, Option } from "effect"
import { formatByteSize } from "../../domain/byteSize.ts"
import type { RuntimeCandidate } from "../../domain/candidate.ts"
import type { MemoryHolder, MemoryStatus, PressureCause, ReleaseCause, RuntimeMemory } from "../../domain/memory.ts"
import { type CollectedRuntime, emptySweepReport, type Residency, type SweepFailure, type SweepReport } from "../../domain/sweep.ts"
import type { HostMemory } from "../../services/HostMemory.ts"
import type { ProcessInspection } from "../../services/ProcessInspection.ts"
import type { RuntimeCandidates } from "../../services/RuntimeCandidates.ts"
import { recordPressureEpisode, setMemoryUsage } from "../metrics/Metrics.ts"
import type { FamilyIndex } from "./FamilyIndex.ts"
import type { IdleClocks } from "./IdleClocks.ts"
import {
  activeCauses,
  budgetView,
  estimateRelease,
  evictionOrder,
  familyRecency,
  type MemorySettings,
  shortfallOf
} from "./memoryPressure.ts"

/** What the budget needs of its collector. */
export interface MemoryBudgetHost {
  readonly budget: MemorySettings
  /** How many owners' `residentBytes` are asked at once. */
  readonly probeConcurrency: number
  readonly candidates: RuntimeCandidates["Service"]
  readonly inspection: Option.Option<ProcessInspection["Service"]>
  readonly hostMemory: Option.Option<HostMemory["Service"]>
  /** The collector's idle clocks: a family seen clear here is seen clear as a sweep would see it. */
  readonly clocks: IdleClocks
  readonly index: (snapshot: ReadonlyArray<RuntimeCandidate>) => FamilyIndex
  /** Whether the runtime has a baseline blocker or caller protection now. */
  readonly isBlocked: (candidate: RuntimeCandidate) => Effect.Effect<boolean>
  /** One decision over these roots with `minIdle` for the idle period, its releases counted under `cause`. */
  readonly decide: (
    snapshot: ReadonlyArray<RuntimeCandidate>,
    roots: ReadonlyArray<number>,
    index: FamilyIndex,
    cause: ReleaseCause
  ) => Effect.Effect<SweepReport>
  readonly explainFamily: (family: ReadonlyArray<RuntimeCandidate>, now: number) => Effect.Effect<Residency>
}

export interface MemoryBudget {
  /** One sample and, under pressure, one pressure sweep; the caller holds the decision lock. */
  readonly relieve: Effect.Effect<SweepReport>
  /** The budget and usage as of the last sample. */
  readonly status: () => MemoryStatus
  /** A runtime's RSS and eviction rank as of the last sample. */
  readonly memoryOf: (agentId: string) => RuntimeMemory
}

export const makeMemoryBudget = (host: MemoryBudgetHost): MemoryBudget => {
  const budget = host.budget
  // The watermarks crossed now, the episode under way, and each runtime's RSS and eviction rank
  // at the last sample, by agent id.
  let activePressure: ReadonlySet<PressureCause> = new Set()
  let episode: { since: number; released: number; releasedBytes: number; reportedHeld: boolean } | undefined
  let episodes = 0
  let memoryStatus: MemoryStatus | undefined
  let memoryOf = new Map<string, RuntimeMemory>()
  const unsampled: RuntimeMemory = { rssBytes: null, evictionRank: null }
  // Without a start time from the owner, the first sample's start time pins the process (pid reuse).
  const pinnedStartTimes = new WeakMap<object, number>()
  // A runtime not measured in time (a loaded host) counts with its last measured RSS, so a slow
  // sample never makes usage look low; one never measured is unmeasured.
  const lastMeasured = new WeakMap<object, number>()

  /**
   * The RSS of each runtime of the snapshot, or undefined when unmeasured: one `sampleAll` over
   * the runtimes that name their process, and the owner's own `residentBytes` for the others.
   */
  const sampleResident = (snapshot: ReadonlyArray<RuntimeCandidate>): Effect.Effect<Array<number | undefined>> =>
    Effect.gen(function*() {
      const rss = new Array<number | undefined>(snapshot.length).fill(undefined)
      const askOwner: Array<number> = []
      if (Option.isSome(host.inspection)) {
        const pids: Array<number> = []
        for (const candidate of snapshot) if (candidate.process !== undefined) pids.push(candidate.process.pid)
        const samples = pids.length === 0 ? new Map() : yield* host.inspection.value.sampleAll(pids)
        for (let i = 0; i < snapshot.length; i++) {
          const candidate = snapshot[i]!
          if (candidate.process === undefined) {
            askOwner.push(i)
            continue
          }
          const sample = samples.get(candidate.process.pid)
          if (sample === undefined || Option.isNone(sample)) continue
          const expected = candidate.process.startTime ?? pinnedStartTimes.get(candidate.identity)
          if (expected === undefined) pinnedStartTimes.set(candidate.identity, sample.value.startTime)
          else if (expected !== sample.value.startTime) continue
          rss[i] = sample.value.rssBytes
        }
      } else for (let i = 0; i < snapshot.length; i++) askOwner.push(i)
      yield* Effect.forEach(askOwner, (i) => {
        const own = snapshot[i]!.residentBytes
        return own === undefined ? Effect.void : Effect.map(own, (bytes) => {
          rss[i] = bytes
        })
      }, { concurrency: host.probeConcurrency, discard: true })
      return rss
    })

  /** The largest resident runtimes still held after a pressure sweep, each with what keeps it (fresh). */
  const holdersOf = (snapshot: ReadonlyArray<RuntimeCandidate>, rss: ReadonlyArray<number | undefined>, released: ReadonlySet<string>) =>
    Effect.gen(function*() {
      const kept = snapshot.map((candidate, position) => ({ candidate, bytes: rss[position] }))
        .filter(({ candidate }) => !released.has(candidate.agentId))
        .sort((a, b) => (b.bytes ?? -1) - (a.bytes ?? -1))
        .slice(0, 10)
      const now = yield* Clock.currentTimeMillis
      const holders: Array<MemoryHolder> = []
      for (const { bytes, candidate } of kept) {
        const family = yield* host.candidates.captureFamily(candidate.agentId)
        if (family.length === 0) continue
        const residency = yield* host.explainFamily(family, now)
        holders.push({
          agentId: candidate.agentId,
          provider: candidate.provider,
          rssBytes: bytes ?? null,
          blockers: residency.blockers,
          veto: residency.veto === null ? null : residency.veto.message ?? residency.veto.outcome,
          state: residency.state
        })
      }
      return holders
    })

  /** One holder for the log: its RSS and every reason it is kept (blockers, veto, no persistence). */
  const describeHolder = (holder: MemoryHolder) => {
    const reasons = [
      ...(holder.state === "not-resumable" ? ["not resumable"] : []),
      ...(holder.blockers.length === 0
        ? []
        : [`blocked: ${holder.blockers.map((b) => `${b.kind}${b.agentId === holder.agentId ? "" : ` of ${b.agentId}`}`).join(", ")}`]),
      ...(holder.veto === null ? [] : [`vetoed: ${holder.veto}`])
    ]
    const bytes = holder.rssBytes === null ? "unmeasured" : formatByteSize(holder.rssBytes)
    return `${holder.agentId} (${bytes}, ${reasons.length === 0 ? "not idle for minIdle yet" : reasons.join("; ")})`
  }

  /**
   * One budget sample and, under pressure, one pressure sweep (see RuntimeCollector.checkMemory).
   * The families released are the eviction order's first eligible ones, taken in batches just
   * large enough to cover what is still owed; each batch is one decision with every check (C4–C8)
   * and `minIdle` for the idle period, so a veto or a declined close only makes the next batch
   * reach further down the order.
   */
  const relieve: Effect.Effect<SweepReport> =
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const snapshot = yield* host.candidates.capture
      const rss = yield* sampleResident(snapshot)
      for (let i = 0; i < snapshot.length; i++) {
        const identity = snapshot[i]!.identity
        const bytes = rss[i]
        if (bytes !== undefined) lastMeasured.set(identity, bytes)
        else rss[i] = lastMeasured.get(identity)
      }
      const availableBytes = budget.minAvailable === undefined || Option.isNone(host.hostMemory)
        ? undefined
        : Option.getOrUndefined(yield* host.hostMemory.value.available)
      let residentBytes = 0
      let unmeasuredRuntimes = 0
      for (const bytes of rss) {
        if (bytes === undefined) unmeasuredRuntimes++
        else residentBytes += bytes
      }
      const usage = { residentBytes, residentRuntimes: snapshot.length, availableBytes }
      yield* setMemoryUsage(residentBytes, availableBytes)
      const index = host.index(snapshot)
      const recency = familyRecency(snapshot, index)
      const order = evictionOrder(snapshot, index, recency)
      const causes = activeCauses(budget, usage, activePressure)
      activePressure = causes
      const usageNote = {
        residentBytes,
        residentRuntimes: snapshot.length,
        ...(availableBytes === undefined ? {} : { availableBytes })
      }
      if (causes.size > 0 && episode === undefined) {
        episode = { since: now, released: 0, releasedBytes: 0, reportedHeld: false }
        episodes++
        yield* recordPressureEpisode
        yield* Effect.logInfo("Memory pressure: releasing idle runtimes, least recently active first").pipe(
          Effect.annotateLogs({ ...usageNote, causes: [...causes].join(", ") })
        )
      } else if (causes.size === 0 && episode !== undefined) {
        yield* Effect.logInfo("Memory pressure over").pipe(Effect.annotateLogs({
          ...usageNote,
          released: episode.released,
          releasedBytes: episode.releasedBytes,
          lastedMillis: now - episode.since
        }))
        episode = undefined
      }
      const ranks = new Map<string, RuntimeMemory>()
      for (let i = 0; i < snapshot.length; i++) ranks.set(snapshot[i]!.agentId, { rssBytes: rss[i] ?? null, evictionRank: null })
      order.forEach((position, rank) => ranks.set(snapshot[position]!.agentId, { rssBytes: rss[position] ?? null, evictionRank: rank + 1 }))
      memoryOf = ranks
      const status = (held: ReadonlyArray<MemoryHolder>): MemoryStatus => ({
        budget: budgetView(budget),
        sampledAt: now,
        residentBytes,
        residentRuntimes: snapshot.length,
        unmeasuredRuntimes,
        availableBytes: availableBytes ?? null,
        pressure: episode === undefined ? null : { since: episode.since, causes: [...causes] },
        episodes,
        order: order.map((position) => ({
          agentId: snapshot[position]!.agentId,
          rssBytes: rss[position] ?? null,
          lastActiveAt: recency[position]!
        })),
        held
      })
      memoryStatus = status([])
      if (causes.size === 0 || episode === undefined) return emptySweepReport
      const current = episode

      // Only families clear now and idle for minIdle are worth a decision; the decision checks again.
      // A family seen clear here is seen clear as a sweep would see it: a retention's fresh idle
      // period starts now.
      const own = new Array<boolean>(snapshot.length)
      for (let i = 0; i < snapshot.length; i++) own[i] = yield* host.isBlocked(snapshot[i]!)
      const blockedBy = index.propagate((i) => own[i]!)
      const eligible = order.filter((position) =>
        blockedBy[position] === -1 && now - host.clocks.observeClear(snapshot[position]!, now) >= budget.minIdleMillis
      )
      const cause: ReleaseCause = causes.has("high") || causes.has("min-available") ? "pressure" : "max-resident"
      const estimate = estimateRelease(rss)
      const shortfall = shortfallOf(budget, usage, causes)
      let owedBytes = shortfall.bytes
      let owedRuntimes = shortfall.runtimes
      const collected: Array<CollectedRuntime> = []
      const failures: Array<SweepFailure> = []
      const released = new Set<string>()
      let releasedBytes = 0
      let next = 0
      while ((owedBytes > 0 || owedRuntimes > 0) && next < eligible.length) {
        const batch: Array<number> = []
        for (let bytes = 0, runtimes = 0; next < eligible.length && (bytes < owedBytes || runtimes < owedRuntimes);) {
          const position = eligible[next++]!
          batch.push(position)
          bytes += estimate(position)
          runtimes++
        }
        const report = yield* host.decide(snapshot, batch, index, cause)
        collected.push(...report.collected)
        failures.push(...report.failures)
        for (const entry of report.collected) released.add(entry.agentId)
        for (const position of batch) {
          if (!released.has(snapshot[position]!.agentId)) continue
          owedBytes -= estimate(position)
          owedRuntimes--
          releasedBytes += rss[position] ?? 0
        }
      }
      current.released += collected.length
      current.releasedBytes += releasedBytes
      if (collected.length > 0) {
        yield* Effect.logInfo("Memory pressure: released runtimes").pipe(Effect.annotateLogs({
          cause,
          released: collected.map((entry) => entry.agentId).join(", "),
          releasedBytes
        }))
      }
      if (owedBytes > 0 || owedRuntimes > 0) {
        // The status names the holders as of every such sweep; the log says it once per episode.
        const held = yield* holdersOf(snapshot, rss, released)
        memoryStatus = status(held)
        if (!current.reportedHeld) {
          current.reportedHeld = true
          yield* Effect.logWarning("Memory pressure: nothing more can be released without losing work").pipe(
            Effect.annotateLogs({
              ...usageNote,
              owedBytes: Math.max(0, owedBytes),
              owedRuntimes: Math.max(0, owedRuntimes),
              heldBy: held.map(describeHolder).join("; ")
            })
          )
        }
      }
      return collected.length === 0 && failures.length === 0 ? emptySweepReport : { collected, failures }
    })


  const status = (): MemoryStatus =>
    memoryStatus ?? {
      budget: budgetView(budget),
      sampledAt: null,
      residentBytes: 0,
      residentRuntimes: 0,
      unmeasuredRuntimes: 0,
      availableBytes: null,
      pressure: null,
      episodes,
      order: [],
      held: []
    }

  return { relieve, status, memoryOf: (agentId) => memoryOf.get(agentId) ?? unsampled }
}
