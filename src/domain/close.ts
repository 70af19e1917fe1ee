/**
 * An explicit close of a runtime (`POST /v1/agents/{id}/close`, `quiesce agents close`): what it
 * would end, the refusal when that is anything, and what a forced close ended. "What it would
 * end" is the collector's explanation of the runtime (X1), its provider asked fresh: the same
 * blockers and veto `quiesce explain` shows.
 */
import { type Effect, Schema } from "effect"
import { MemberBlocker } from "./blocker.ts"
import type { AgentBusy, AgentNotFound, AgentStoreError, RuntimeCloseFailed, RuntimePersistFailed } from "./errors.ts"
import type { ProbeObservation, Residency } from "./sweep.ts"

/** A family member's provider that did not permit the stop: it vetoed (`message` says why), failed, or did not answer. */
export const ProviderRefusal = Schema.Struct({
  agentId: Schema.String,
  outcome: Schema.Literals(["vetoed", "failed", "timed-out"]),
  message: Schema.optionalKey(Schema.String)
})
export type ProviderRefusal = typeof ProviderRefusal.Type

/** What closing a runtime ends: its family's blockers and its provider's refusal. Empty when nothing would be lost. */
export const CloseStakes = Schema.Struct({
  blockers: Schema.Array(MemberBlocker),
  veto: Schema.NullOr(ProviderRefusal)
})
export type CloseStakes = typeof CloseStakes.Type

/** A probe's answer as a refusal; null when it permitted (or there is none). */
export const refusalOf = (probe: Omit<ProbeObservation, "at" | "since"> | null | undefined): ProviderRefusal | null =>
  probe === null || probe === undefined || probe.outcome === "permitted"
    ? null
    : { agentId: probe.agentId, outcome: probe.outcome, ...(probe.message === undefined ? {} : { message: probe.message }) }

/** What closing a runtime without a persistence handle ends: its session, for good. */
export const notResumableDetail = "its session cannot be resumed: the close ends its conversation"

/**
 * The stakes of closing a runtime, from its residency. A runtime without a persistence handle (an
 * ACP agent that cannot load sessions, a session not reported yet) loses its conversation to a
 * close: the agent cannot be prompted again, so that is named too.
 */
export const closeStakes = (residency: Residency): CloseStakes => ({
  blockers: residency.sessionId === null
    ? [...residency.blockers, { agentId: residency.agentId, kind: "not-resumable", detail: notResumableDetail }]
    : residency.blockers,
  veto: refusalOf(residency.veto)
})

/** Whether closing loses nothing. */
export const endsNothing = (stakes: CloseStakes): boolean => stakes.blockers.length === 0 && stakes.veto === null

/**
 * The stakes in words, one item each: `foreground-turn: turn-1`, `vetoed by its provider: background
 * job 1 \`sleep 301\`` (another member's by its agent id). What the CLI says keeps a runtime resident, too.
 */
export const stakesLines = (agentId: string, stakes: CloseStakes): ReadonlyArray<string> => [
  ...stakes.blockers.map((b) => `${b.kind}${b.agentId === agentId ? "" : ` (${b.agentId})`}${b.detail === undefined ? "" : `: ${b.detail}`}`),
  ...(stakes.veto === null ? [] : [
    `${stakes.veto.outcome} by ${stakes.veto.agentId === agentId ? "its provider" : stakes.veto.agentId}` +
    (stakes.veto.message === undefined ? "" : `: ${stakes.veto.message}`)
  ])
]

/** The fields of a refused close or delete: the agent, the message, and the stakes it would end. */
const refusalFields = {
  agentId: Schema.String,
  message: Schema.String,
  ...CloseStakes.fields
}

/** The message of a refused close or delete: the work it would end, and that nothing was done. */
const refusalMessage = (verb: "close" | "delete", agentId: string, stakes: CloseStakes) =>
  `${verb === "close" ? "Closing" : "Deleting"} ${agentId} would end work: ${stakesLines(agentId, stakes).join("; ")}. ` +
  `Nothing was ${verb}d; ${verb} with force to end it`

/**
 * A close refused because the runtime has blockers or its provider did not permit the stop: the
 * close would end that work. Nothing was closed; close with `force` to end it.
 */
export class RuntimeCloseRefused extends Schema.TaggedError<RuntimeCloseRefused>()("RuntimeCloseRefused", refusalFields) {
  static readonly of = (agentId: string, stakes: CloseStakes) =>
    new RuntimeCloseRefused({ agentId, message: refusalMessage("close", agentId, stakes), ...stakes })
}

/**
 * A delete refused because the agent's runtime has blockers or its provider did not permit the
 * stop: deleting the agent would end that work (and its conversation, for good). Nothing was
 * deleted; delete with `force` to end it. The sibling of `RuntimeCloseRefused`, the same fields.
 */
export class AgentDeleteRefused extends Schema.TaggedError<AgentDeleteRefused>()("AgentDeleteRefused", refusalFields) {
  static readonly of = (agentId: string, stakes: CloseStakes) =>
    new AgentDeleteRefused({ agentId, message: refusalMessage("delete", agentId, stakes), ...stakes })
}

/** A close done: the agent, and what it ended (empty when the runtime had nothing to lose, or none was live). */
export const ClosedRuntime = Schema.Struct({
  agentId: Schema.String,
  ended: CloseStakes
})
export type ClosedRuntime = typeof ClosedRuntime.Type

/** A delete done: the agent, and what ending its runtime ended (empty when it had nothing to lose, or none was live). */
export const DeletedAgent = ClosedRuntime
export type DeletedAgent = ClosedRuntime

/** How a close (or a delete) is asked: `force` ends whatever work the runtime has. */
export interface CloseOptions {
  readonly force: boolean
}

/** Closes one agent's runtime; refused with what it would end unless forced. */
export type CheckedClose = (
  agentId: string,
  options: CloseOptions
) => Effect.Effect<ClosedRuntime, AgentNotFound | RuntimeCloseFailed | RuntimePersistFailed | RuntimeCloseRefused>

/**
 * Deletes one agent (its runtime, record and turns); refused with what ending its runtime would
 * end unless forced. A turn not yet ended refuses it either way (`AgentBusy`): interrupt it first.
 */
export type CheckedDelete = (
  agentId: string,
  options: CloseOptions
) => Effect.Effect<DeletedAgent, AgentNotFound | AgentBusy | AgentStoreError | RuntimeCloseFailed | RuntimePersistFailed | AgentDeleteRefused>
