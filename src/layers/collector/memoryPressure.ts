/**
 * The memory budget's policy, apart from any effect: when an episode of pressure starts and ends
 * (with hysteresis), how much it must give back, and in which order runtimes are released.
 */
import { Duration } from "effect"
import type { RuntimeCandidate } from "../../domain/candidate.ts"
import type { MemoryBudget, MemoryBudgetOptions, PressureCause } from "../../domain/memory.ts"
import type { FamilyIndex } from "./FamilyIndex.ts"

export interface MemorySettings {
  readonly high: number | undefined
  readonly low: number | undefined
  readonly minAvailable: number | undefined
  readonly maxResident: number | undefined
  readonly minIdleMillis: number
  readonly sampleInterval: Duration.Duration
}

/**
 * An episode that started below `minAvailable` ends only once the available memory is this much
 * above it, so that the next resume does not start another one at once.
 */
export const availableHeadroomFactor = 1.25

export const defaultMemoryOptions = { minIdle: "2 minutes", sampleInterval: "5 seconds" } as const

const nonNegative = (name: string, value: number | undefined) => {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
    throw new RangeError(`memory.${name} must be a whole number of bytes, got ${value}`)
  }
  return value
}

/** The budget's settings, or undefined when it sets no watermark (no budget: the collector decides by the clock alone). */
export const resolveMemorySettings = (options: MemoryBudgetOptions | undefined): MemorySettings | undefined => {
  if (options === undefined) return undefined
  const high = nonNegative("high", options.high)
  const low = nonNegative("low", options.low)
  const minAvailable = nonNegative("minAvailable", options.minAvailable)
  const maxResident = options.maxResident
  if ((high === undefined) !== (low === undefined)) throw new RangeError("memory.high and memory.low go together")
  if (high !== undefined && low !== undefined && !(low < high)) {
    throw new RangeError(`memory.low (${low}) must be below memory.high (${high})`)
  }
  if (maxResident !== undefined && !(Number.isSafeInteger(maxResident) && maxResident >= 0)) {
    throw new RangeError(`maxResident must be a whole number, got ${maxResident}`)
  }
  if (high === undefined && minAvailable === undefined && maxResident === undefined) return undefined
  const minIdleMillis = Duration.toMillis(Duration.fromInputUnsafe(options.minIdle ?? defaultMemoryOptions.minIdle))
  const sampleInterval = Duration.fromInputUnsafe(options.sampleInterval ?? defaultMemoryOptions.sampleInterval)
  if (!(minIdleMillis >= 0)) throw new RangeError(`memory.minIdle must not be negative, got ${minIdleMillis} ms`)
  if (!(Duration.toMillis(sampleInterval) > 0)) throw new RangeError("memory.sampleInterval must be a positive duration")
  return { high, low, minAvailable, maxResident, minIdleMillis, sampleInterval }
}

/** The settings as the status shows them. */
export const budgetView = (settings: MemorySettings): MemoryBudget => ({
  high: settings.high ?? null,
  low: settings.low ?? null,
  minAvailable: settings.minAvailable ?? null,
  maxResident: settings.maxResident ?? null,
  minIdleMillis: settings.minIdleMillis,
  sampleIntervalMillis: Duration.toMillis(settings.sampleInterval)
})

/** One sample of what the budget measures. */
export interface MemoryUsage {
  /** Total RSS of the measured resident runtimes. */
  readonly residentBytes: number
  readonly residentRuntimes: number
  /** The host's available memory; undefined when unread (the floor is then never crossed). */
  readonly availableBytes: number | undefined
}

/**
 * Which watermarks are crossed now, given those already active (hysteresis): a cause starts at
 * its high mark and lasts until its low mark. Resident RSS: starts at `high`, ends at `low` or
 * below. Available memory: starts below `minAvailable`, ends at `availableHeadroomFactor` times
 * it. Resident runtimes: starts above `maxResident`, ends at it (a count has no in-between).
 */
export const activeCauses = (
  settings: MemorySettings,
  usage: MemoryUsage,
  active: ReadonlySet<PressureCause>
): ReadonlySet<PressureCause> => {
  const next = new Set<PressureCause>()
  if (settings.high !== undefined && settings.low !== undefined) {
    if (active.has("high") ? usage.residentBytes > settings.low : usage.residentBytes >= settings.high) next.add("high")
  }
  if (settings.minAvailable !== undefined && usage.availableBytes !== undefined) {
    const floor = active.has("min-available") ? settings.minAvailable * availableHeadroomFactor : settings.minAvailable
    if (usage.availableBytes < floor) next.add("min-available")
  }
  if (settings.maxResident !== undefined && usage.residentRuntimes > settings.maxResident) next.add("max-resident")
  return next
}

/** What the active causes ask to give back: bytes of RSS and a number of runtimes. */
export interface Shortfall {
  readonly bytes: number
  readonly runtimes: number
}

export const shortfallOf = (settings: MemorySettings, usage: MemoryUsage, causes: ReadonlySet<PressureCause>): Shortfall => {
  let bytes = 0
  if (causes.has("high") && settings.low !== undefined) bytes = Math.max(bytes, usage.residentBytes - settings.low)
  if (causes.has("min-available") && settings.minAvailable !== undefined && usage.availableBytes !== undefined) {
    bytes = Math.max(bytes, Math.ceil(settings.minAvailable * availableHeadroomFactor) - usage.availableBytes)
  }
  const runtimes = causes.has("max-resident") && settings.maxResident !== undefined
    ? Math.max(0, usage.residentRuntimes - settings.maxResident)
    : 0
  return { bytes, runtimes }
}

/**
 * The latest activity of each runtime's family (it and its managed descendants): a family counts
 * by its most recent member, so a parent whose child just worked is not taken for idle.
 */
export const familyRecency = (snapshot: ReadonlyArray<RuntimeCandidate>, index: FamilyIndex): Float64Array => {
  const recency = new Float64Array(snapshot.length)
  for (let i = 0; i < snapshot.length; i++) {
    let latest = snapshot[i]!.lastActivityAt
    const members = index.members(i)
    for (let k = 1; k < members.length; k++) latest = Math.max(latest, snapshot[members[k]!]!.lastActivityAt)
    recency[i] = latest
  }
  return recency
}

/**
 * The eviction order: positions of the resumable runtimes, least recently active family first;
 * ties go ancestors first (a parent's close is judged on its family before the children's), then
 * by position. Runtimes without a persistence handle are never released, so never listed.
 */
export const evictionOrder = (
  snapshot: ReadonlyArray<RuntimeCandidate>,
  index: FamilyIndex,
  recency: Float64Array
): ReadonlyArray<number> => {
  const order: Array<number> = []
  for (let i = 0; i < snapshot.length; i++) if (snapshot[i]!.sessionId !== null) order.push(i)
  return order.sort((a, b) => recency[a]! - recency[b]! || index.depth(a) - index.depth(b) || a - b)
}

/**
 * What releasing a runtime is expected to give back: its measured RSS, or for one unmeasured the
 * mean of the measured ones (0 when none is measured), so an unmeasured runtime neither stops a
 * sweep early nor counts as free.
 */
export const estimateRelease = (rss: ReadonlyArray<number | undefined>): (position: number) => number => {
  let total = 0
  let measured = 0
  for (const bytes of rss) {
    if (bytes !== undefined) {
      total += bytes
      measured++
    }
  }
  const mean = measured === 0 ? 0 : total / measured
  return (position) => rss[position] ?? mean
}
