import { Schema } from "effect"

/** The label that names an agent's managing parent (C5). */
export const parentAgentIdLabel = "quiesce.parentAgentId"
/** The label that marks an agent internal to the daemon; internal agents are never released (C4). */
export const internalAgentLabel = "quiesce.internal"

/** An agent's free-form string labels; some `quiesce.*` labels carry meaning to the daemon. */
export const Labels = Schema.Record(Schema.String, Schema.String)
export type Labels = typeof Labels.Type

/** What a provider needs to resume a saved conversation (C2). */
export const PersistenceHandle = Schema.Struct({
  provider: Schema.String,
  sessionId: Schema.String,
  /** Provider-specific resume data (a transcript path, a thread id, …), as JSON. */
  data: Schema.optionalKey(Schema.Record(Schema.String, Schema.Json))
})
export type PersistenceHandle = typeof PersistenceHandle.Type

/**
 * Whether the agent has a live runtime. `closed` keeps everything needed to resume: a release
 * never archives or deletes (C2).
 */
export const AgentLifecycle = Schema.Literals(["active", "closed"])
export type AgentLifecycle = typeof AgentLifecycle.Type

/** The durable record of one agent. */
export const AgentRecord = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  cwd: Schema.String,
  labels: Labels,
  /** Null until the provider reports a session; such an agent cannot be resumed. */
  persistence: Schema.NullOr(PersistenceHandle),
  lifecycle: AgentLifecycle,
  /** Epoch milliseconds. */
  createdAt: Schema.Number,
  lastActivityAt: Schema.Number,
  closedAt: Schema.NullOr(Schema.Number)
})
export type AgentRecord = typeof AgentRecord.Type

/** The id of the agent's managing parent, from its labels; undefined for an agent no other agent manages. */
export const parentAgentIdOf = (labels: Labels): string | undefined => labels[parentAgentIdLabel]
