/**
 * A live runtime as the daemon's API shows it (and as a cluster's runners report theirs to each
 * other): its process, its memory, and why it is still resident. Times are ISO 8601.
 */
import { Schema } from "effect"
import { MemberBlocker } from "./blocker.ts"
import { ProbeObservation, ResidencyState } from "./sweep.ts"

/**
 * What the last provider probe said, and when (ISO 8601); `message` says why it vetoed or failed,
 * `since` since when its probes have refused in a row.
 */
export const ProbeView = Schema.Struct({ ...ProbeObservation.fields, at: Schema.String, since: Schema.optionalKey(Schema.String) })
export type ProbeView = typeof ProbeView.Type

/** One live runtime, explained. */
export const RuntimeRow = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  pid: Schema.NullOr(Schema.Number),
  /** Resident memory of the runtime's process tree; null when unmeasured (never guessed). */
  rssBytes: Schema.NullOr(Schema.Number),
  /** How many processes `rssBytes` sums; null when unmeasured. */
  measuredProcesses: Schema.NullOr(Schema.Number),
  /** The runtime and its managed descendants. */
  family: Schema.Array(Schema.String),
  idleSince: Schema.String,
  /** Earliest time it could be released if nothing changes; null when blocked or never. */
  eligibleAt: Schema.NullOr(Schema.String),
  state: ResidencyState,
  /** What keeps it (or a family member) resident now. */
  blockers: Schema.Array(MemberBlocker),
  /** The last provider probe, when it did not permit the release. */
  lastProbe: Schema.NullOr(ProbeView),
  /** With a memory budget: its place in the eviction order at the last sample (1 is released first); null when not in it (not resumable, or resident since). */
  evictionRank: Schema.optionalKey(Schema.NullOr(Schema.Number)),
  /** With `?scope=cluster`: the runner that hosts it (its `host:port`), and when that runner last reported it. */
  runner: Schema.optionalKey(Schema.String),
  reportedAt: Schema.optionalKey(Schema.String)
})
export type RuntimeRow = typeof RuntimeRow.Type
