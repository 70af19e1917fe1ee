/**
 * The daemon's HTTP API (JSON, under `/v1`): one definition for the server, the typed client
 * (`HttpApiClient.make(QuiesceApi)`) and the OpenAPI document, composed of one module per group.
 * Nothing here runs on the server only; the handlers and middleware implementations live in
 * `layers/http`.
 *
 * Times are epoch milliseconds in the domain and ISO 8601 in the API (views.ts maps them).
 */
import { HttpApi, OpenApi } from "effect/http-api"
import { packageVersion } from "../domain/version.ts"
import { AgentsGroup } from "./agents.ts"
import { DaemonGroup } from "./daemon.ts"
import { RequestBodyLimit } from "./middleware.ts"
import { RequestProblems } from "./requestErrors.ts"
import { ReserveGroup } from "./reserve.ts"
import { RuntimesGroup } from "./runtimes.ts"
import { SessionGroup } from "./session.ts"
import { SystemGroup } from "./system.ts"

/**
 * Options for decoding request bodies, the daemon's and the hub's: report every invalid member,
 * not just the first, and refuse members the schema does not have (`__proto__` too), as the
 * OpenAPI document says (`additionalProperties: false`).
 */
export const payloadParseOptions = { errors: "all", onExcessProperty: "error" } as const

/** What the OpenAPI documents of the daemon and the hub say of every error. */
export const errorContract = "Every error is an RFC 9457 problem (application/problem+json) with type " +
  "urn:quiesce:error:<_tag>, title, status, detail, _tag, message and the error's own fields. A request body " +
  "with a member its schema does not have (additionalProperties: false) is refused: 400 InvalidRequest."

/**
 * The whole API. A request failing its schema answers 400 `InvalidRequest`, whose `errors` name
 * each offending path (`["payload", "provider"]`), and every other error of the request itself
 * is typed too (see requestErrors.ts); a body over the daemon's limit answers 413
 * `RequestTooLarge` on every route.
 */
export class QuiesceApi extends HttpApi.make("quiesce")
  .add(SystemGroup, AgentsGroup, RuntimesGroup, ReserveGroup, DaemonGroup, SessionGroup)
  .middleware(RequestProblems)
  // Added last, so it runs first: an oversized body is refused before anything else looks at it.
  .middleware(RequestBodyLimit)
  .annotate(HttpApi.PayloadParseOptions, payloadParseOptions)
  .annotateMerge(OpenApi.annotations({
    title: "Quiesce daemon API",
    version: packageVersion,
    description: `Agents, their prompts, and the idle-runtime collector. ${errorContract}`
  }))
{}

/** Where the OpenAPI document is served (no token). */
export const openapiPath = "/v1/openapi.json"
