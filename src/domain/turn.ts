import { Schema } from "effect"

/**
 * Where an accepted prompt is in its life. `accepted`: durable, not yet handed to the provider
 * (queued behind a running turn, or waiting for the runtime to resume). `running`: handed to the
 * provider. The last three are final.
 */
export const TurnState = Schema.Literals(["accepted", "running", "completed", "failed", "interrupted"])
export type TurnState = typeof TurnState.Type

/** Whether the turn has ended: completed, failed or interrupted. */
export const isFinal = (state: TurnState): boolean =>
  state === "completed" || state === "failed" || state === "interrupted"

/** How a prompt reached the provider: a turn of its own, steered into a running turn, or handled out of band. */
export const Disposition = Schema.Literals(["turn", "steer", "out-of-band"])
export type Disposition = typeof Disposition.Type

/** A failure, flattened to what a client needs: its tag and message. */
export const TurnError = Schema.Struct({
  _tag: Schema.String,
  message: Schema.String
})
export type TurnError = typeof TurnError.Type

/**
 * The durable record of one accepted prompt (its turn). Written before the prompt is dispatched;
 * `(agentId, clientMessageId)` is unique, so a repeat of a client's id finds this record instead of
 * starting another turn, in this process, after a restart and after a crash.
 */
export const TurnRecord = Schema.Struct({
  turnId: Schema.String,
  agentId: Schema.String,
  /** The client's id for this prompt, when it gave one. */
  clientMessageId: Schema.NullOr(Schema.String),
  /** The prompt as accepted; what a recovery dispatches after a crash. */
  text: Schema.String,
  state: TurnState,
  /** How it reached the provider; null until it did. */
  disposition: Schema.NullOr(Disposition),
  /** For a prompt steered into a running turn: that turn's id, whose outcome this one shares. */
  joinedTurnId: Schema.NullOr(Schema.String),
  /** The runtime had been released and was resumed for this prompt. */
  resumed: Schema.Boolean,
  /** The turn's reply once it ended (null if it gave none). */
  reply: Schema.NullOr(Schema.String),
  /** Why it failed or was interrupted. */
  error: Schema.NullOr(TurnError),
  /** Epoch milliseconds. */
  acceptedAt: Schema.Number,
  /** When it was handed to the provider; null while it never was (a failed resume, say). */
  dispatchedAt: Schema.NullOr(Schema.Number),
  endedAt: Schema.NullOr(Schema.Number)
})
export type TurnRecord = typeof TurnRecord.Type

/**
 * A failed turn that never reached the provider (its runtime could not be resumed, say). Running
 * it again cannot run it twice, so a repeat of its client message id retries it.
 */
export const isRetryable = (record: TurnRecord): boolean => record.state === "failed" && record.dispatchedAt === null

/**
 * How long ended turns are kept in the journal by default, and how many per agent at most: a
 * repeat of a client message id older than that starts a new turn.
 */
export const defaultTurnRetention = "168h"
/** The most ended turns the journal keeps per agent: beyond them, the oldest are pruned. */
export const maxEndedTurnsPerAgent = 1_000
