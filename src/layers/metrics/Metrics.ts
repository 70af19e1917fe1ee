/**
 * Quiesce's metrics (X3) and their Prometheus text exposition.
 *
 * The metrics live in effect's `Metric.MetricRegistry` of the context they are updated in (by
 * default one registry per process). Update them through the helpers below, which reuse one
 * attributed metric per label value instead of building one per update.
 */
import { Context, Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import type { BlockerKind } from "../../domain/blocker.ts"
import type { MemoryBudget, ReleaseCause } from "../../domain/memory.ts"

/** Why a runtime stayed resident in a decision: a baseline blocker, a provider veto, or a failure. */
export type RetentionReason = BlockerKind | "veto" | "probe-failure" | "close-declined" | "close-failure"

/** Sweeps that ran to completion. */
export const sweeps = Metric.counter("quiesce_sweeps_total", {
  description: "Sweeps of idle runtimes that ran to completion.",
  incremental: true
})

/** Runtimes collected (closed and persisted); attribute `provider`. */
export const collections = Metric.counter("quiesce_collections_total", {
  description: "Idle runtimes collected, by provider.",
  incremental: true
})

/** Runtimes a decision kept resident; attribute `reason` (a {@link RetentionReason}). */
export const retentions = Metric.counter("quiesce_retentions_total", {
  description: "Idle runtimes retained by a decision, by reason.",
  incremental: true
})

/** Upper bounds (seconds) of the probe duration buckets; `+Inf` is added. */
export const probeDurationBoundaries: ReadonlyArray<number> = Metric.boundariesFromIterable([
  0.001,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10
])

/** How long `canStopRuntime` probes took, timed-out ones included (at their timeout). */
export const probeDuration = Metric.histogram("quiesce_probe_duration_seconds", {
  description: "Duration of provider canStopRuntime probes in seconds.",
  boundaries: probeDurationBoundaries
})

/** Runtimes resident after the last sweep. */
export const residentRuntimes = Metric.gauge("quiesce_resident_runtimes", {
  description: "Live runtimes resident after the last sweep."
})

/** Resident memory released by collections, as measured by whoever closed the runtime. */
export const releasedBytes = Metric.counter("quiesce_released_bytes_total", {
  description: "Bytes of resident memory (RSS) released by collecting runtimes.",
  incremental: true
})

/** Total RSS of the measured resident runtimes at the last budget sample. */
export const memoryResidentBytes = Metric.gauge("quiesce_memory_resident_bytes", {
  description: "Total RSS of the measured resident runtimes at the last memory budget sample."
})

/** The host's available memory at the last budget sample (when `minAvailable` is set and it could be read). */
export const memoryAvailableBytes = Metric.gauge("quiesce_memory_available_bytes", {
  description: "The host's available memory at the last memory budget sample."
})

/** The budget's watermarks in bytes; attribute `watermark` (`high`, `low`, `min_available`). */
export const memoryBudgetBytes = Metric.gauge("quiesce_memory_budget_bytes", {
  description: "The memory budget's watermarks in bytes, by watermark."
})

/** `agents.maxResident`. */
export const memoryMaxResident = Metric.gauge("quiesce_memory_max_resident", {
  description: "The most resident runtimes the budget allows."
})

/** Pressure episodes begun. */
export const memoryPressureEpisodes = Metric.counter("quiesce_memory_pressure_episodes_total", {
  description: "Memory pressure episodes begun.",
  incremental: true
})

/** Runtimes released, by cause (`idle`, `pressure`, `max-resident`). */
export const memoryReleases = Metric.counter("quiesce_memory_releases_total", {
  description: "Runtimes released, by cause: idle, pressure or max-resident.",
  incremental: true
})

/** RSS given back by releases, by cause, as sampled just before each close. */
export const memoryReleasedBytes = Metric.counter("quiesce_memory_released_bytes_total", {
  description: "Bytes of RSS given back by releasing runtimes, by cause.",
  incremental: true
})

/**
 * One metric per label value, built once: a metric built with its attributes keeps its series key,
 * where `Metric.withAttributes` re-derives the context (and, when values alternate, the key) on
 * every update. Retentions are counted per runtime in a sweep's hot loop, so this matters.
 */
const labelled = (name: string, description: string, label: string) => {
  const cache = new Map<string, Metric.Counter<number>>()
  return (value: string): Metric.Counter<number> => {
    let found = cache.get(value)
    if (found === undefined) {
      found = Metric.counter(name, { description, incremental: true, attributes: { [label]: value } })
      cache.set(value, found)
    }
    return found
  }
}

const collectionsOf = labelled(collections.id, collections.description ?? "", "provider")
const retentionsOf = labelled(retentions.id, retentions.description ?? "", "reason")
const releasesOf = labelled(memoryReleases.id, memoryReleases.description ?? "", "cause")
const releasedBytesOf = labelled(memoryReleasedBytes.id, memoryReleasedBytes.description ?? "", "cause")
const budgetOf = (watermark: string) => Metric.withAttributes(memoryBudgetBytes, { watermark })

/** Counts one completed sweep in `quiesce_sweeps_total`. */
export const recordSweep: Effect.Effect<void> = Metric.update(sweeps, 1)

/** Counts one collected runtime of `provider` in `quiesce_collections_total`. */
export const recordCollection = (provider: string): Effect.Effect<void> => Metric.update(collectionsOf(provider), 1)

/** Counts one runtime kept resident for `reason` in `quiesce_retentions_total`. */
export const recordRetention = (reason: RetentionReason): Effect.Effect<void> =>
  Metric.update(retentionsOf(reason), 1)

/**
 * Retentions counted synchronously (a plain increment, for a sweep's per-runtime loop) and
 * added to `quiesce_retentions_total` once per reason by `flush`.
 */
export class RetentionTally {
  readonly #counts = new Map<RetentionReason, number>()

  add(reason: RetentionReason): void {
    this.#counts.set(reason, (this.#counts.get(reason) ?? 0) + 1)
  }

  readonly flush: Effect.Effect<void> = Effect.suspend(() => {
    if (this.#counts.size === 0) return Effect.void
    const counted = [...this.#counts]
    this.#counts.clear()
    return Effect.forEach(counted, ([reason, count]) => Metric.update(retentionsOf(reason), count), { discard: true })
  })
}

/** Adds one `canStopRuntime` probe's duration, in seconds, to `quiesce_probe_duration_seconds`. */
export const recordProbeDuration = (seconds: number): Effect.Effect<void> => Metric.update(probeDuration, seconds)

/** Sets `quiesce_resident_runtimes` to the runtimes still resident after a sweep. */
export const setResidentRuntimes = (count: number): Effect.Effect<void> => Metric.update(residentRuntimes, count)

/** Adds the RSS a collection released; for the code that sampled the runtime before closing it. */
export const recordReleasedBytes = (bytes: number): Effect.Effect<void> =>
  bytes > 0 && Number.isFinite(bytes) ? Metric.update(releasedBytes, bytes) : Effect.void

/** Counts one release for `cause`, and the RSS it gave back when measured. */
export const recordRelease = (cause: ReleaseCause, bytes: number | undefined): Effect.Effect<void> =>
  Metric.update(releasesOf(cause), 1).pipe(
    Effect.andThen(bytes !== undefined && bytes > 0 && Number.isFinite(bytes) ? Metric.update(releasedBytesOf(cause), bytes) : Effect.void)
  )

/** Counts one pressure episode begun. */
export const recordPressureEpisode: Effect.Effect<void> = Metric.update(memoryPressureEpisodes, 1)

/** Sets the budget's gauges to the configured watermarks. */
export const setMemoryBudget = (budget: MemoryBudget): Effect.Effect<void> =>
  Effect.all([
    budget.high === null ? Effect.void : Metric.update(budgetOf("high"), budget.high),
    budget.low === null ? Effect.void : Metric.update(budgetOf("low"), budget.low),
    budget.minAvailable === null ? Effect.void : Metric.update(budgetOf("min_available"), budget.minAvailable),
    budget.maxResident === null ? Effect.void : Metric.update(memoryMaxResident, budget.maxResident)
  ], { discard: true })

/** Sets the sampled gauges: resident RSS, and available memory when read. */
export const setMemoryUsage = (residentBytes: number, availableBytes: number | undefined): Effect.Effect<void> =>
  Metric.update(memoryResidentBytes, residentBytes).pipe(
    Effect.andThen(availableBytes === undefined ? Effect.void : Metric.update(memoryAvailableBytes, availableBytes))
  )

// ---------------------------------------------------------------------------------------------
// Prometheus text exposition format

const prefix = "quiesce_"

/** Series without labels are shown from the start (at zero), as Prometheus clients do. */
const unlabelled: ReadonlyArray<Metric.Metric<never, unknown>> = [sweeps, probeDuration, residentRuntimes, releasedBytes]

const seriesKey = (attributes: Metric.Metric.AttributeSet | undefined) =>
  Object.entries(attributes ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${k}=${v}`).join(",")

/**
 * The `quiesce_*` metrics of the current registry in the Prometheus text exposition format, by
 * effect's own renderer (`PrometheusMetrics`) over the registry's entries of ours.
 */
export const renderPrometheus: Effect.Effect<string> = Effect.gen(function*() {
  yield* Effect.forEach(unlabelled, Metric.value, { discard: true })
  const context = yield* Effect.context<never>()
  const registry = Context.get(context, Metric.MetricRegistry)
  // Families sorted by name and series by their labels, so the text is stable between scrapes.
  const sorted = [...registry]
    .filter(([, entry]) => entry.id.startsWith(prefix))
    .map(([key, entry]) => ({ key, entry, order: `${entry.id}\u0000${seriesKey(entry.attributes)}` }))
    .sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0))
  const ours = new Map<string, (typeof sorted)[number]["entry"]>()
  for (const { entry, key } of sorted) ours.set(key, entry)
  return PrometheusMetrics.formatUnsafe(Context.add(context, Metric.MetricRegistry, ours))
})
