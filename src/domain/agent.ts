import { Effect, Schema } from "effect"
import { ReservedLabel } from "./errors.ts"

/** The prefix of the labels the daemon sets itself, each from a field of its own. */
export const reservedLabelPrefix = "quiesce."
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

/**
 * Why a runtime was released: its idle period passed (`idle`), the memory budget was exceeded
 * (`pressure`) or more runtimes were resident than allowed (`max-resident`), someone collected it
 * (`collect`) or closed it (`close`), the daemon retired (`retirement`) or stopped (`shutdown`), its
 * runtime was taken down to be started again (`reload`) or handed to another runner (`handed-over`),
 * or it exited on its own (`exited`).
 */
export const ReleaseReason = Schema.Literals([
  "idle",
  "pressure",
  "max-resident",
  "collect",
  "close",
  "retirement",
  "shutdown",
  "reload",
  "handed-over",
  "exited"
])
export type ReleaseReason = typeof ReleaseReason.Type

/** How an agent's last runtime was released (the time is the record's `closedAt`). */
export const ReleaseNote = Schema.Struct({
  reason: ReleaseReason,
  /** The resident memory of its process tree just before it was released; null when unmeasured. */
  rssBytes: Schema.NullOr(Schema.Number)
})
export type ReleaseNote = typeof ReleaseNote.Type

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
  closedAt: Schema.NullOr(Schema.Number),
  /** How its last runtime was released, while it is released; absent while resident or before its first release. */
  release: Schema.optionalKey(ReleaseNote)
})
export type AgentRecord = typeof AgentRecord.Type

/** The id of the agent's managing parent, from its labels; undefined for an agent no other agent manages. */
export const parentAgentIdOf = (labels: Labels): string | undefined => labels[parentAgentIdLabel]

/** What a create says about a new agent's labels: the caller's own, and the fields of the reserved ones. */
export interface NewAgentLabels {
  /** Free-form labels; none may start with `quiesce.`. */
  readonly labels?: Labels | undefined
  /** The managing parent, stored as the `quiesce.parentAgentId` label. */
  readonly parentAgentId?: string | undefined
  /** An agent internal to the host (never released), stored as `quiesce.internal: "true"`. */
  readonly internal?: boolean | undefined
}

/**
 * The labels a new agent is stored with. Every create passes here (API, CLI, cluster runner,
 * library host): a caller's label with the reserved prefix is refused, naming it, so that a
 * reserved label only ever comes from its own field.
 */
export const labelsOfNewAgent = (input: NewAgentLabels): Effect.Effect<Labels, ReservedLabel> => {
  const own = input.labels ?? {}
  const reserved = Object.keys(own).find((key) => key.startsWith(reservedLabelPrefix))
  if (reserved !== undefined) return Effect.fail(ReservedLabel.of(reserved))
  return Effect.succeed({
    ...own,
    ...(input.parentAgentId === undefined ? {} : { [parentAgentIdLabel]: input.parentAgentId }),
    ...(input.internal === true ? { [internalAgentLabel]: "true" } : {})
  })
}
