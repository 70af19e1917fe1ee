/**
 * An agent's turns, as the journal holds them: one by its id, or the newest few. Part of the
 * agents group (`client.agents.turn`, `client.agents.turns`).
 */
import { Schema } from "effect"
import { HttpApiEndpoint } from "effect/http-api"
import { TurnRecord } from "../domain/turn.ts"
import { StartsDaemon } from "./annotations.ts"
import { AgentNotFoundError, AgentStoreFailedError, ClusterUnavailableError, TurnNotFoundError } from "./errors.ts"

/** One turn as the journal holds it, its times ISO 8601. */
export const TurnView = Schema.Struct({
  ...TurnRecord.fields,
  acceptedAt: Schema.String,
  dispatchedAt: Schema.NullOr(Schema.String),
  endedAt: Schema.NullOr(Schema.String)
})
export type TurnView = typeof TurnView.Type

/** How many turns `GET /v1/agents/:id/turns` lists without a `limit`. */
export const defaultTurnsLimit = 20

/** The `limit` query parameter of the turn list: a whole number, 1..100, decoded from its string. */
export const TurnsLimit = Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 }))

/** `GET /v1/agents/:id/turns/:turnId`: one turn. */
export const turnEndpoint = HttpApiEndpoint.get("turn", "/v1/agents/:id/turns/:turnId", {
  params: { id: Schema.String, turnId: Schema.String },
  success: TurnView,
  error: [AgentNotFoundError, TurnNotFoundError, AgentStoreFailedError, ClusterUnavailableError]
}).annotate(StartsDaemon, false)

/** The agent's recent turns, newest accepted first: `?limit=` 1..100, default {@link defaultTurnsLimit}. */
export const turnsEndpoint = HttpApiEndpoint.get("turns", "/v1/agents/:id/turns", {
  params: { id: Schema.String },
  query: { limit: Schema.optionalKey(TurnsLimit) },
  success: Schema.Array(TurnView),
  error: [AgentNotFoundError, AgentStoreFailedError, ClusterUnavailableError]
}).annotate(StartsDaemon, false)
