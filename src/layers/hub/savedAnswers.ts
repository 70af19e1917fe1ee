/**
 * The reads the hub answers itself for a home without a daemon (retired, or force-stopped): its
 * agents, one agent, an agent's recent turns and one turn, from the home's saved store, read-only
 * (`layers/store/savedStore.ts`), in the bytes the daemon would answer with (its errors as the same
 * problems). Such a read starts no daemon and is no activity; every other request is routed as
 * before.
 */
import { Effect, Option, Result, Schema, SchemaIssue } from "effect"
import { ProblemDetails } from "effect/http"
import { AgentSummary } from "../../api/agents.ts"
import { AgentNotFoundError, AgentStoreFailedError, TurnNotFoundError } from "../../api/errors.ts"
import { InvalidRequest, InvalidRequestError } from "../../api/requestErrors.ts"
import { defaultTurnsLimit, TurnsLimit, TurnView } from "../../api/turns.ts"
import type { AgentNotFound, AgentStoreError, TurnNotFound } from "../../domain/errors.ts"
import type { RoutedRequest, RoutedResponse, SavedStoreState } from "../../domain/hubDaemons.ts"
import { type HomeHeld, readSavedStore, type SavedReads } from "../store/savedStore.ts"

/** A read the saved store answers: its answer (encoded by its success schema) or its typed failure. */
type SavedRead = (reads: SavedReads) => Effect.Effect<Response, never>

interface Response {
  readonly status: number
  readonly contentType: string
  readonly body: unknown
}

const encodeAgents = Schema.encodeSync(Schema.Array(AgentSummary))
const encodeAgent = Schema.encodeSync(AgentSummary)
const encodeTurns = Schema.encodeSync(Schema.Array(TurnView))
const encodeTurn = Schema.encodeSync(TurnView)
const encodeAgentNotFound = Schema.encodeSync(AgentNotFoundError)
const encodeTurnNotFound = Schema.encodeSync(TurnNotFoundError)
const encodeStoreFailed = Schema.encodeSync(AgentStoreFailedError)
const encodeInvalid = Schema.encodeSync(InvalidRequestError)

const problem = (status: number, body: unknown): Response => ({ status, contentType: ProblemDetails.contentType, body })

/** The failures of a read as the daemon answers them. */
const failed = (error: AgentNotFound | TurnNotFound | AgentStoreError): Response => {
  switch (error._tag) {
    case "AgentNotFound":
      return problem(404, encodeAgentNotFound(error))
    case "TurnNotFound":
      return problem(404, encodeTurnNotFound(error))
    case "AgentStoreError":
      return problem(500, encodeStoreFailed(error))
  }
}

const answered = <A>(read: Effect.Effect<A, AgentNotFound | TurnNotFound | AgentStoreError>, encode: (value: A) => unknown) =>
  read.pipe(
    Effect.map((value): Response => ({ status: 200, contentType: "application/json", body: encode(value) })),
    Effect.catch((error) => Effect.succeed(failed(error)))
  )

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()
const decodeLimit = Schema.decodeUnknownResult(TurnsLimit)

/** `?limit=` as the daemon reads it: 1..100, else the default; anything else is the daemon's 400. */
const limitOf = (search: string): Result.Result<number, InvalidRequest> => {
  const given = new URLSearchParams(search).get("limit")
  if (given === null) return Result.succeed(defaultTurnsLimit)
  return Result.mapError(decodeLimit(given), (error) =>
    InvalidRequest.of(formatIssues(error.issue).issues.map((issue) => ({ path: ["query", "limit"], message: issue.message }))))
}

const segment = (text: string) => {
  try {
    return Option.some(decodeURIComponent(text))
  } catch {
    return Option.none()
  }
}

/** The daemon's routes the saved store answers, by path; none for any other request. */
const savedRead = (request: RoutedRequest): Option.Option<SavedRead> => {
  if (request.method !== "GET") return Option.none()
  const parts = request.path.split("/").slice(1)
  if (parts[0] !== "v1" || parts[1] !== "agents") return Option.none()
  if (parts.length === 2) return Option.some((reads) => answered(reads.agents, encodeAgents))
  const ids = Option.all(parts.slice(2).filter((_, i) => i !== 1).map(segment))
  if (Option.isNone(ids)) return Option.none()
  const [agentId, turnId] = ids.value
  if (agentId === undefined || agentId === "") return Option.none()
  if (parts.length === 3) return Option.some((reads) => answered(reads.agent(agentId), encodeAgent))
  if (parts[3] !== "turns") return Option.none()
  if (parts.length === 4) {
    const limit = limitOf(request.search)
    return Option.some((reads) =>
      Result.isFailure(limit)
        ? Effect.succeed(problem(400, encodeInvalid(limit.failure)))
        : answered(reads.turns(agentId, limit.success), encodeTurns)
    )
  }
  if (parts.length === 5 && turnId !== undefined && turnId !== "") {
    return Option.some((reads) => answered(reads.turn(agentId, turnId), encodeTurn))
  }
  return Option.none()
}

/**
 * The hub's own answer to `request` for the home at `dir`, whose daemon is not running (`state`
 * says why): for a read of agents and turns, from its saved store; none for any other request.
 * `HomeHeld` when a process holds the home's lock meanwhile (its daemon starting or exiting).
 */
export const savedStoreAnswer = (
  dir: string,
  request: RoutedRequest,
  state: SavedStoreState
): Option.Option<Effect.Effect<RoutedResponse, HomeHeld>> =>
  Option.map(savedRead(request), (read) =>
    readSavedStore(dir, read).pipe(
      // A store that cannot be opened is the daemon's store failure, as it would answer it.
      Effect.catchTag("AgentStoreError", (error) => Effect.succeed(failed(error))),
      Effect.map((response): RoutedResponse => ({
      status: response.status,
      contentType: response.contentType,
      retryAfter: undefined,
      body: new TextEncoder().encode(JSON.stringify(response.body)),
      savedStore: state
    }))
    ))
