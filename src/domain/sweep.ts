import { Schema } from "effect"
import { BlockerKind, MemberBlocker } from "./blocker.ts"
import { CollectionError } from "./errors.ts"
import { RuntimeMemory } from "./memory.ts"

/** A runtime a sweep released, and the provider session it can be resumed from. */
export const CollectedRuntime = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  sessionId: Schema.String
})
export type CollectedRuntime = typeof CollectedRuntime.Type

/** A runtime a sweep could not release, and why (a probe or a close failed); it stays resident. */
export const SweepFailure = Schema.Struct({
  agentId: Schema.String,
  error: CollectionError
})
export type SweepFailure = typeof SweepFailure.Type

/** The outcome of one sweep (C12). */
export const SweepReport = Schema.Struct({
  collected: Schema.Array(CollectedRuntime),
  failures: Schema.Array(SweepFailure)
})
export type SweepReport = typeof SweepReport.Type

/** The report of a sweep that released nothing and failed nowhere. */
export const emptySweepReport: SweepReport = { collected: [], failures: [] }

/** What the last provider probe of a family member said, and when; `message` says why it vetoed or failed. */
export const ProbeObservation = Schema.Struct({
  agentId: Schema.String,
  at: Schema.Number,
  outcome: Schema.Literals(["permitted", "vetoed", "failed", "timed-out"]),
  message: Schema.optionalKey(Schema.String),
  /** When it did not permit: since when the probes of this runtime have refused in a row (epoch ms). */
  since: Schema.optionalKey(Schema.Number)
})
export type ProbeObservation = typeof ProbeObservation.Type

/** Why a runtime that is not blocked right now still cannot be released yet. */
export const ResidencyState = Schema.Literals([
  "blocked",
  "vetoed",
  "idle",
  "not-resumable",
  "collection-disabled"
])

/** The current residency of one live runtime (X1). */
export const Residency = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  /** The agent ids in its family: itself and its managed descendants. */
  family: Schema.Array(Schema.String),
  /** Baseline blockers of every family member, evaluated now. */
  blockers: Schema.Array(MemberBlocker),
  /** The most recent veto or probe failure in the family, if the last probe did not permit. */
  veto: Schema.NullOr(ProbeObservation),
  state: ResidencyState,
  /** Epoch ms since which the runtime counts as idle: last activity or last retention. */
  idleSince: Schema.Number,
  /** Earliest epoch ms at which it could be released if nothing changes; null when blocked or never. */
  releasableAt: Schema.NullOr(Schema.Number),
  /** With a memory budget: its RSS at the last budget sample and its place in the eviction order. */
  memory: Schema.optionalKey(RuntimeMemory)
})
export type Residency = typeof Residency.Type

/** The result of collecting one runtime on request (X2). */
export const CollectOutcome = Schema.TaggedUnion({
  Collected: { runtime: CollectedRuntime },
  Retained: { residency: Residency },
  Failed: { agentId: Schema.String, error: CollectionError }
})
export type CollectOutcome = typeof CollectOutcome.Type

/** Why a decision kept an idle runtime resident: a blocker, a provider's veto, a failed probe, or its owner declining the close. */
export type RetentionReason = BlockerKind | "veto" | "probe-failure" | "close-declined"
