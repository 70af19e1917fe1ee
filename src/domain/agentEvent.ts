/**
 * What an agent's live event stream (`GET /v1/agents/{id}/events`) carries: its turns as they run
 * and its residency as it changes. Each event has an id, `<epoch>-<n>`: the epoch names the daemon
 * process that issued it and `n` increases per agent within it. A reader that fell behind the
 * bounded window, or resumes from an id another process issued (the daemon restarted, or on a
 * cluster the agent moved to another runner), is told so with a `gap` instead of the events it
 * missed.
 */
import { Schema } from "effect"
import { ReleaseReason } from "./agent.ts"
import { TurnError, TurnState } from "./turn.ts"

/** A prompt was written to the journal as a turn (or a steer / out-of-band command). */
export const TurnAccepted = Schema.TaggedStruct("turn-accepted", { turnId: Schema.String, prompt: Schema.String })
/** The provider took the turn and it is running. */
export const TurnRunning = Schema.TaggedStruct("turn-running", { turnId: Schema.String })
/**
 * Output the running turn produced, as the provider reports it while it comes (the shell reports
 * its command's output; a provider that reports only its final reply has it in `turn-ended`).
 */
export const TurnOutput = Schema.TaggedStruct("output", { turnId: Schema.NullOr(Schema.String), text: Schema.String })
/** The provider asked for a permission (answer it with `POST /v1/agents/{id}/permissions/{permissionId}`). */
export const PermissionAsked = Schema.TaggedStruct("permission-asked", { permissionId: Schema.String })
/** A permission asked before is no longer open: answered (from any client), or cancelled with its turn. */
export const PermissionResolved = Schema.TaggedStruct("permission-resolved", { permissionId: Schema.String })
/** A turn ended: its final state, its reply, and its typed error when it failed. */
export const TurnEnded = Schema.TaggedStruct("turn-ended", {
  turnId: Schema.String,
  state: TurnState,
  reply: Schema.NullOr(Schema.String),
  error: Schema.NullOr(TurnError)
})
/** The agent's runtime was resumed (or started) and is resident. */
export const Resumed = Schema.TaggedStruct("resumed", {})
/** The agent's runtime was released, and why. */
export const Released = Schema.TaggedStruct("released", { reason: ReleaseReason })
/** The collector would have released the agent, but its provider vetoed it, and why. */
export const Vetoed = Schema.TaggedStruct("vetoed", { reason: Schema.String })

/** One event of an agent, as published. */
export const AgentEvent = Schema.Union([TurnAccepted, TurnRunning, TurnOutput, PermissionAsked, PermissionResolved, TurnEnded, Resumed, Released, Vetoed])
export type AgentEvent = typeof AgentEvent.Type

/**
 * The reader missed events: some after `after` (the id it last read) left the window (a reconnect
 * too old, a reader too slow) before it read them, or `after` was issued by another process (a
 * daemon restarted, an agent that moved to another runner). The stream continues with the oldest
 * kept, `resumesAt` (or the next event when none is kept).
 */
export const Gap = Schema.TaggedStruct("gap", { after: Schema.String, resumesAt: Schema.String })
export type Gap = typeof Gap.Type

/** What a reader receives: an agent's event with its id, or a gap. */
export const StreamedEvent = Schema.Union([AgentEvent, Gap])
export type StreamedEvent = typeof StreamedEvent.Type

/**
 * An event as sent: its id (`<epoch>-<n>`, see the module's comment), the event, and on the
 * daemon-wide stream (`GET /v1/events`) whose event it is (absent on one agent's stream and on a gap).
 */
export const NumberedEvent = Schema.Struct({ id: Schema.String, event: StreamedEvent, agentId: Schema.optionalKey(Schema.String) })
export type NumberedEvent = typeof NumberedEvent.Type
