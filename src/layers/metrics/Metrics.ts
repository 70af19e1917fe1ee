/**
 * Quiesce's metrics (X3) and their Prometheus text exposition.
 *
 * The metrics live in effect's `Metric.MetricRegistry` of the context they are updated in (by
 * default one registry per process). Update them through the helpers below, which reuse one
 * attributed metric per label value instead of building one per update.
 */
import { Effect, Metric } from "effect"
import type { BlockerKind } from "../../domain/blocker.ts"

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

export const recordSweep: Effect.Effect<void> = Metric.update(sweeps, 1)

export const recordCollection = (provider: string): Effect.Effect<void> => Metric.update(collectionsOf(provider), 1)

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

export const recordProbeDuration = (seconds: number): Effect.Effect<void> => Metric.update(probeDuration, seconds)

export const setResidentRuntimes = (count: number): Effect.Effect<void> => Metric.update(residentRuntimes, count)

/** Adds the RSS a collection released; for the code that sampled the runtime before closing it. */
export const recordReleasedBytes = (bytes: number): Effect.Effect<void> =>
  bytes > 0 && Number.isFinite(bytes) ? Metric.update(releasedBytes, bytes) : Effect.void

// ---------------------------------------------------------------------------------------------
// Prometheus text exposition format 0.0.4

const prefix = "quiesce_"

/** Series without labels are shown from the start (at zero), as Prometheus clients do. */
const unlabelled: ReadonlyArray<Metric.Metric<never, unknown>> = [sweeps, probeDuration, residentRuntimes, releasedBytes]

const sanitizeName = (name: string): string => {
  const replaced = name.replace(/[^a-zA-Z0-9_:]/g, "_")
  return /^[0-9]/.test(replaced) ? `_${replaced}` : replaced
}

const sanitizeLabelName = (name: string): string => {
  const replaced = name.replace(/[^a-zA-Z0-9_]/g, "_")
  return /^[0-9]/.test(replaced) ? `_${replaced}` : replaced
}

const escapeLabelValue = (value: string): string =>
  value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")

const escapeHelp = (text: string): string => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const formatNumber = (value: number | bigint): string => {
  if (typeof value === "bigint") return value.toString()
  if (Number.isNaN(value)) return "NaN"
  if (value === Number.POSITIVE_INFINITY) return "+Inf"
  if (value === Number.NEGATIVE_INFINITY) return "-Inf"
  return String(value)
}

const formatLabels = (labels: ReadonlyArray<readonly [string, string]>): string =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${sanitizeLabelName(k)}="${escapeLabelValue(v)}"`).join(",")}}`

const sortedLabels = (attributes: Metric.Metric.AttributeSet | undefined): ReadonlyArray<readonly [string, string]> =>
  Object.entries(attributes ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))

const typeName = (type: Metric.Metric.Type): string => {
  switch (type) {
    case "Counter":
    case "Frequency":
      return "counter"
    case "Gauge":
      return "gauge"
    case "Histogram":
      return "histogram"
    case "Summary":
      return "summary"
  }
}

const renderSeries = (name: string, snapshot: Metric.Metric.Snapshot, lines: Array<string>): void => {
  const labels = sortedLabels(snapshot.attributes)
  switch (snapshot.type) {
    case "Counter":
      lines.push(`${name}${formatLabels(labels)} ${formatNumber(snapshot.state.count)}`)
      return
    case "Gauge":
      lines.push(`${name}${formatLabels(labels)} ${formatNumber(snapshot.state.value)}`)
      return
    case "Frequency": {
      const words = [...snapshot.state.occurrences].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      for (const [word, count] of words) {
        lines.push(`${name}${formatLabels([...labels, ["key", word]])} ${formatNumber(count)}`)
      }
      return
    }
    case "Histogram": {
      const state = snapshot.state
      let sawInfinity = false
      for (const [boundary, cumulative] of state.buckets) {
        if (boundary === Number.POSITIVE_INFINITY) sawInfinity = true
        lines.push(`${name}_bucket${formatLabels([...labels, ["le", formatNumber(boundary)]])} ${cumulative}`)
      }
      if (!sawInfinity) lines.push(`${name}_bucket${formatLabels([...labels, ["le", "+Inf"]])} ${state.count}`)
      lines.push(`${name}_sum${formatLabels(labels)} ${formatNumber(state.sum)}`)
      lines.push(`${name}_count${formatLabels(labels)} ${state.count}`)
      return
    }
    case "Summary": {
      const state = snapshot.state
      for (const [quantile, value] of state.quantiles) {
        lines.push(
          `${name}${formatLabels([...labels, ["quantile", formatNumber(quantile)]])} ${formatNumber(value ?? Number.NaN)}`
        )
      }
      lines.push(`${name}_sum${formatLabels(labels)} ${formatNumber(state.sum)}`)
      lines.push(`${name}_count${formatLabels(labels)} ${state.count}`)
      return
    }
  }
}

/** Renders metric snapshots (those named `quiesce_*`) in the Prometheus text format, families sorted by name. */
export const renderSnapshots = (snapshots: ReadonlyArray<Metric.Metric.Snapshot>): string => {
  const families = new Map<string, Array<Metric.Metric.Snapshot>>()
  for (const snapshot of snapshots) {
    if (!snapshot.id.startsWith(prefix)) continue
    const family = families.get(snapshot.id)
    if (family === undefined) families.set(snapshot.id, [snapshot])
    else family.push(snapshot)
  }
  const lines: Array<string> = []
  for (const id of [...families.keys()].sort()) {
    const family = families.get(id)!
    const name = sanitizeName(id)
    const description = family.find((snapshot) => snapshot.description !== undefined)?.description
    if (description !== undefined) lines.push(`# HELP ${name} ${escapeHelp(description)}`)
    lines.push(`# TYPE ${name} ${typeName(family[0]!.type)}`)
    const ordered = family
      .map((snapshot) => ({ snapshot, key: formatLabels(sortedLabels(snapshot.attributes)) }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    for (const { snapshot } of ordered) renderSeries(name, snapshot, lines)
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`
}

/** The `quiesce_*` metrics of the current registry in the Prometheus text exposition format. */
export const renderPrometheus: Effect.Effect<string> = Effect.forEach(unlabelled, Metric.value, { discard: true }).pipe(
  Effect.andThen(Metric.snapshot),
  Effect.map(renderSnapshots)
)
