import type { Duration } from "effect"
import { Schema } from "effect"
import { MemberBlocker } from "./blocker.ts"

/**
 * Why a runtime was released: its idle period passed (`idle`), the memory budget was exceeded
 * (`pressure`: the resident RSS over `high`, or the host's available memory under `minAvailable`),
 * or there were more resident runtimes than `maxResident` (`max-resident`).
 */
export const ReleaseCause = Schema.Literals(["idle", "pressure", "max-resident"])
export type ReleaseCause = typeof ReleaseCause.Type

/** Which watermark a pressure episode crossed: resident RSS `high`, host `min-available`, or `max-resident`. */
export const PressureCause = Schema.Literals(["high", "min-available", "max-resident"])
export type PressureCause = typeof PressureCause.Type

/** The budget as configured, in bytes and milliseconds; null where not set. */
export const MemoryBudget = Schema.Struct({
  high: Schema.NullOr(Schema.Number),
  low: Schema.NullOr(Schema.Number),
  minAvailable: Schema.NullOr(Schema.Number),
  maxResident: Schema.NullOr(Schema.Number),
  minIdleMillis: Schema.Number,
  sampleIntervalMillis: Schema.Number
})
export type MemoryBudget = typeof MemoryBudget.Type

/** A runtime in the eviction order: least recently active family first. */
export const EvictionEntry = Schema.Struct({
  agentId: Schema.String,
  /** Its process tree's RSS at the last sample; null when unmeasured. */
  rssBytes: Schema.NullOr(Schema.Number),
  /** The latest activity of its family (it and its managed descendants), epoch ms. */
  lastActiveAt: Schema.Number
})
export type EvictionEntry = typeof EvictionEntry.Type

/** A runtime that still holds memory when a pressure sweep could release nothing more, and why. */
export const MemoryHolder = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  rssBytes: Schema.NullOr(Schema.Number),
  /** Blockers of it and its family, evaluated at the end of the sweep. */
  blockers: Schema.Array(MemberBlocker),
  /** The veto or probe failure that kept it, when one did. */
  veto: Schema.NullOr(Schema.String),
  /** `not-resumable` (no persistence handle), `blocked`, `vetoed`, or `idle` (not idle for `minIdle` yet). */
  state: Schema.String
})
export type MemoryHolder = typeof MemoryHolder.Type

/** The memory budget and the resident runtimes against it, as of the last sample. */
export const MemoryStatus = Schema.Struct({
  budget: MemoryBudget,
  /** Epoch ms of the last sample; null before the first. */
  sampledAt: Schema.NullOr(Schema.Number),
  /** The measured resident runtimes' total RSS. */
  residentBytes: Schema.Number,
  residentRuntimes: Schema.Number,
  /** Resident runtimes whose RSS could not be measured (not counted in `residentBytes`). */
  unmeasuredRuntimes: Schema.Number,
  /** The host's available memory (the smaller of MemAvailable and the cgroup's headroom); null when unread. */
  availableBytes: Schema.NullOr(Schema.Number),
  /** The episode under way: since when (epoch ms) and which watermarks it crossed; null when none. */
  pressure: Schema.NullOr(Schema.Struct({ since: Schema.Number, causes: Schema.Array(PressureCause) })),
  /** Pressure episodes since the collector started. */
  episodes: Schema.Number,
  /** Resumable runtimes in the order pressure releases them, first first. */
  order: Schema.Array(EvictionEntry),
  /** When the episode's last sweep could release nothing more: what holds the memory. Empty otherwise. */
  held: Schema.Array(MemoryHolder)
})
export type MemoryStatus = typeof MemoryStatus.Type

/** A runtime's place against the budget, for its explanation. */
export const RuntimeMemory = Schema.Struct({
  /** RSS at the last budget sample; null when unmeasured. */
  rssBytes: Schema.NullOr(Schema.Number),
  /**
   * 1-based place in the eviction order at the last sample (1 is released first); null when it is
   * not in it: never released (not resumable), or resident since that sample.
   */
  evictionRank: Schema.NullOr(Schema.Number)
})
export type RuntimeMemory = typeof RuntimeMemory.Type

/** A memory budget for the collector; every field is optional, and without `high`, `minAvailable` or `maxResident` it is off. */
export interface MemoryBudgetOptions {
  /** Start releasing when the resident runtimes' total RSS reaches this many bytes (with `low`). */
  readonly high?: number | undefined
  /** Release until the resident runtimes' total RSS is at most this many bytes (with `high`, below it). */
  readonly low?: number | undefined
  /** Start releasing when the host's available memory (HostMemory) falls below this many bytes. */
  readonly minAvailable?: number | undefined
  /** At most this many resident runtimes. */
  readonly maxResident?: number | undefined
  /** Under pressure the idle period shrinks to this. Default 2 minutes. */
  readonly minIdle?: Duration.Input | undefined
  /** How often the budget is sampled. Default 5 seconds. */
  readonly sampleInterval?: Duration.Input | undefined
}
