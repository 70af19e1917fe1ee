/**
 * The hub's HTTP API: the resident inventory and the actions on it (`/v1/daemons`, hubDaemons.ts),
 * and the routes it forwards to a home's daemon (`/v1/homes/{name}/…` → the daemon's `/v1/…`; see
 * `QuiesceApiViaHub`). One definition for the server, the CLI's typed client and OpenAPI.
 */
import { HttpApi, HttpApiMiddleware, OpenApi } from "effect/http-api"
import { packageVersion } from "../domain/version.ts"
import {
  DaemonIncompatibleError,
  DaemonStartFailedError,
  DaemonUnavailableError,
  HomeArchivedError,
  HomeNotManagedError,
  HomeRetiredError,
  HomeStoppedError,
  HubConfigInvalidError
} from "./errors.ts"
import { DaemonsGroup, HubHealthGroup } from "./hubDaemons.ts"
import { errorContract, payloadParseOptions, QuiesceApi } from "./QuiesceApi.ts"
import { RequestProblems } from "./requestErrors.ts"
import { SessionGroup } from "./session.ts"

/**
 * The response header of a read the hub answered from a home's saved store, read-only, because no
 * daemon runs for the home (agents, one agent, its turns, one turn): why none runs, `retired` or
 * `stopped`. Such a read starts no daemon.
 */
export const savedStoreHeader = "quiesce-saved-store"

/** The hub's own API. */
export class HubApi extends HttpApi.make("quiesce-hub")
  .add(HubHealthGroup, DaemonsGroup, SessionGroup)
  .middleware(RequestProblems)
  .annotate(HttpApi.PayloadParseOptions, payloadParseOptions)
  .annotateMerge(OpenApi.annotations({
    title: "Quiesce hub API",
    version: packageVersion,
    description:
      "The daemons of the homes a hub manages; each home's daemon API is forwarded under /v1/homes/{name}/. A read of a " +
      `home's agents and turns while no daemon runs for it (retired, stopped) is answered from its saved store, read-only, ` +
      `with the header ${savedStoreHeader}; no read starts a daemon. ${errorContract}`
  }))
{}

/** Where the hub's OpenAPI document is served (no token). */
export const hubOpenapiPath = "/v1/openapi.json"

/** What the hub itself may answer on a forwarded request, besides the daemon's own answers. */
export class HubRouting extends HttpApiMiddleware.Service<HubRouting>()("quiesce/http/HubRouting", {
  error: [
    HomeNotManagedError,
    HomeRetiredError,
    HomeStoppedError,
    HomeArchivedError,
    DaemonUnavailableError,
    DaemonIncompatibleError,
    DaemonStartFailedError,
    HubConfigInvalidError
  ]
}) {}

/**
 * The daemon API as a client sees it through the hub: every endpoint may also answer with the
 * hub's routing errors. Only a client is made from it (the hub forwards bytes, it serves no handler).
 */
export const QuiesceApiViaHub = QuiesceApi.middleware(HubRouting)
