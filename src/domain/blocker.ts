import { Schema } from "effect"

/**
 * Why a runtime must stay resident right now. Each kind is one daemon baseline condition (C4),
 * plus the two the collector adds itself: caller protection and a missing persistence handle.
 */
export const BlockerKind = Schema.Literals([
  "lifecycle-not-idle",
  "internal-agent",
  "foreground-turn",
  "queued-prompt",
  "pending-replacement",
  "pending-permission",
  "permission-response-in-flight",
  "lifecycle-operation",
  "foreground-mutation",
  "undrained-events",
  "running-subagents",
  "caller-protected",
  "not-resumable"
])
export type BlockerKind = typeof BlockerKind.Type

/** One reason a runtime must stay resident, with an optional detail naming what (a turn, a permission, …). */
export const Blocker = Schema.Struct({
  kind: BlockerKind,
  detail: Schema.optionalKey(Schema.String)
})
export type Blocker = typeof Blocker.Type

/** The one shared value for "nothing blocks", so the hot path allocates nothing. */
export const noBlockers: ReadonlyArray<Blocker> = Object.freeze([])

/** Makes a blocker, leaving `detail` out when none is given. */
export const blocker = (kind: BlockerKind, detail?: string): Blocker =>
  detail === undefined ? { kind } : { kind, detail }

/** A blocker observed on one member of a family, for reports and explanations. */
export const MemberBlocker = Schema.Struct({
  agentId: Schema.String,
  kind: BlockerKind,
  detail: Schema.optionalKey(Schema.String)
})
export type MemberBlocker = typeof MemberBlocker.Type
