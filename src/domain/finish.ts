import { Schema } from "effect"

/** A caller's durable intent to be told when a target agent finishes (D2). */
export const FinishSubscription = Schema.Struct({
  id: Schema.String,
  callerAgentId: Schema.String,
  targetAgentId: Schema.String,
  /** The Quiesce server that hosts the target; null for this server. */
  serverId: Schema.NullOr(Schema.String),
  /** `pending` until the registration is accepted; only accepted subscriptions are watched. */
  state: Schema.Literals(["pending", "accepted"]),
  createdAt: Schema.Number,
  /**
   * The target's finish position (`TurnJournal.lastFinish`) when the subscription was registered:
   * the first finish past it is the one owed, even if it comes before the watch reaches the
   * target's host. Null for a target on another server, and for records stored before positions
   * (they wait for the target's next finish).
   */
  afterFinish: Schema.NullOr(Schema.Number),
  /**
   * The notification to deliver, saved once the target finished and before it is dispatched, so
   * a restart before the caller's acknowledgement still delivers it.
   */
  notification: Schema.NullOr(Schema.String)
})
export type FinishSubscription = typeof FinishSubscription.Type

/** How a target finished: its turn ended or failed, it asked for a permission, or it was closed. A release is not a finish. */
export const FinishKind = Schema.Literals(["finished", "errored", "needs-permission", "closed"])
export type FinishKind = typeof FinishKind.Type

/** A target's finish, as a caller is told it: `kind`, and the target's last reply, bounded in size. */
export const FinishOutcome = Schema.Struct({ kind: FinishKind, lastReply: Schema.NullOr(Schema.String) })
export type FinishOutcome = typeof FinishOutcome.Type

/** Replies longer than this are cut in notifications. */
export const maxReplyLength = 4_000
