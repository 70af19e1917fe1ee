/**
 * Serves `HubApi` and forwards `/v1/homes/{name}/…` to the home's daemon (`/v1/…`), over
 * node:http on loopback. The hub's token guards every route but health and the OpenAPI document;
 * the daemon's own token, which the hub reads from the daemon's home, never leaves the hub.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { ByteSize, Duration, Effect, Layer, Schema, Stream } from "effect"
import { HttpIncomingMessage, HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { createServer } from "node:http"
import { defaultMaxRequestBytes } from "../../domain/config.ts"
import { RoutingError } from "../../domain/hub.ts"
import type { RoutedResponse } from "../../domain/hubDaemons.ts"
import { CrossOriginRefused, problemStatus, RequestTooLarge, Unauthorized } from "../../api/errors.ts"
import { HubApi, hubOpenapiPath, savedStoreHeader } from "../../api/HubApi.ts"
import { QuiesceApi } from "../../api/QuiesceApi.ts"
import { InvalidRequest } from "../../api/requestErrors.ts"
import { HubDaemons } from "../../services/HubDaemons.ts"
import { PageSessions } from "../../services/PageSessions.ts"
import { prepare } from "../hub/requests.ts"
import { authorizationLayer, bearerAccepts, checkCredentials } from "./authorization.ts"
import * as PageSessionsLive from "./pageSessions.ts"
import type { SessionCheck } from "./pageSessions.ts"
import { pageRoutes, servedPages, sessionHandlers } from "./pages.ts"
import { problemResponse } from "./problem.ts"
import {
  apiRoutes,
  invalidPath,
  requestProblemResponse,
  requestProblemsLayer,
  routeNotFoundResponse,
  type ServedRoute,
  unmatchedRequests
} from "./requestProblems.ts"
import { routedThroughHub, spanNamesLayer } from "./spanNames.ts"
import { sseResponse } from "./sseResponse.ts"

const handlers = HttpApiBuilder.group(
  HubApi,
  "daemons",
  Effect.fn(function*(handlers) {
    const daemons = yield* HubDaemons
    return handlers
      .handle("list", () => daemons.inventory)
      .handle("retire", ({ params, payload }) => daemons.retire(params.name, payload))
      .handle("stop", ({ params, payload }) => daemons.stop(params.name, payload.identity, payload.confirm))
      .handle("resume", ({ params }) => daemons.resume(params.name))
  })
)

const session = HttpApiBuilder.group(HubApi, "session", (handlers) => Effect.map(sessionHandlers, (each) => handlers.handleAll(each)))

const health = HttpApiBuilder.group(HubApi, "system", (handlers) => handlers.handle("health", () => Effect.succeed({ status: "ok" as const })))

/** The errors the forwarding route answers with itself, encoded as the API's error schemas encode them. */
const encodeRouteError = Schema.encodeSync(Schema.Union([RoutingError, Unauthorized, CrossOriginRefused, RequestTooLarge]))

/** A routing error as the API answers every error: a problem (see problem.ts) with the error's fields. */
const errorResponse = (error: RoutingError | Unauthorized | CrossOriginRefused | RequestTooLarge) =>
  problemResponse(
    error,
    encodeRouteError(error),
    problemStatus[error._tag],
    error._tag === "DaemonUnavailable" && "retryAfterSeconds" in error ? { "retry-after": String(error.retryAfterSeconds) } : {}
  )

const safeDecode = (text: string) => {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}

/** The response header that names a routed prompt's client message id. */
export const clientMessageIdHeader = "quiesce-client-message-id"

const homePrefix = /^\/v1\/homes\/([^/?]+)(\/[^?]*)?(\?.*)?$/

const unreadableBody = InvalidRequest.of([{ path: ["payload"], message: "The body could not be read" }])

/** A daemon's live event streams (`/agents/{id}/events`, `/events`): relayed as they come, never buffered by the forwarder. */
const liveEventsPath = /^(\/agents\/([^/]+))?\/events\/?$/

/** A daemon's answer passed back as it answered, with the hub's own headers added. */
const routedResponse = (answer: RoutedResponse, headers: Readonly<Record<string, string | undefined>>) =>
  HttpServerResponse.uint8Array(answer.body, {
    status: answer.status,
    ...(answer.contentType === undefined ? {} : { contentType: answer.contentType }),
    headers: {
      ...headers,
      ...(answer.retryAfter === undefined ? {} : { "retry-after": answer.retryAfter }),
      ...(answer.savedStore === undefined ? {} : { [savedStoreHeader]: answer.savedStore })
    }
  })

/** How often a relayed stream's credentials are checked again. */
const credentialsRecheck = Duration.seconds(2)

/** Completes once the request's credentials no longer pass (its page session ended: signed out, expired). */
const credentialsLapse = (stillAuthorized: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    do yield* Effect.sleep(credentialsRecheck)
    while (yield* stillAuthorized)
  })

/**
 * Live events through the hub (`layers/hub/relay.ts`): the relayed stream, or the refusal as it
 * came. A stream ends once its credentials lapse, as a page's reads would then be refused.
 */
const relayedEvents = (
  name: string,
  agentId: string | undefined,
  lastEventId: string | undefined,
  stillAuthorized: Effect.Effect<boolean>
) =>
  Effect.gen(function*() {
    const daemons = yield* HubDaemons
    return yield* daemons.follow(name, agentId, lastEventId)
  }).pipe(
    Effect.map((relayed) =>
      relayed._tag === "answer"
        ? routedResponse(relayed.response, {})
        : sseResponse(Stream.interruptWhen(relayed.body, credentialsLapse(stillAuthorized)))
    ),
    Effect.catch((error) => Effect.succeed(errorResponse(error)))
  )

/** The pattern of the forwarded routes. */
const homesPath = "/v1/homes/*"

/** `/v1/homes/{name}/rest?query` → the daemon's `/v1/rest?query`. */
const forwardRoute = (authenticate: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<SessionCheck>, maxRequestBytes: number) => {
  const maxBodySize = ByteSize.bytes(maxRequestBytes)
  return HttpRouter.add("*", homesPath, (request) =>
    Effect.gen(function*() {
      const daemons = yield* HubDaemons
      // The hub's token, or a page session (the daemon page of a home, served by the hub).
      const check = yield* authenticate(request)
      if (check === "unauthorized") return errorResponse(Unauthorized.missingToken())
      if (check === "cross-origin") return errorResponse(CrossOriginRefused.ofSession())
      const match = homePrefix.exec(request.url)
      if (match === null) return routeNotFoundResponse(request)
      const name = safeDecode(match[1]!)
      if (name === undefined) return requestProblemResponse.invalid(invalidPath)
      const rest = match[2] ?? "/"
      // A daemon's own logins are not handed out through the hub: its page here uses the hub's session.
      if (rest === "/login-links" || rest === "/session") return routeNotFoundResponse(request)
      // Live events go beside the forwarder, which reads whole answers: a stream never ends.
      const events = liveEventsPath.exec(rest)
      if (events !== null) {
        if (request.method !== "GET") return routeNotFoundResponse(request)
        const agentId = events[2] === undefined ? undefined : safeDecode(events[2])
        if (events[2] !== undefined && agentId === undefined) return requestProblemResponse.invalid(invalidPath)
        const stillAuthorized = Effect.map(authenticate(request), (again) => again === "authorized")
        return yield* relayedEvents(name, agentId, request.headers["last-event-id"], stillAuthorized)
      }
      const declared = request.headers["content-length"]
      if (declared !== undefined && Number(declared) > maxRequestBytes) return errorResponse(RequestTooLarge.of(maxRequestBytes))
      const body = request.method === "GET" || request.method === "HEAD"
        ? new Uint8Array()
        : new Uint8Array(yield* request.arrayBuffer.pipe(Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBodySize)))
      const prepared = prepare({
        method: request.method,
        path: rest === "/" ? "/v1" : `/v1${rest}`,
        search: match[3] ?? "",
        contentType: request.headers["content-type"],
        body
      })
      // A prompt's client message id (maybe the hub's own), on every answer: a retry with it gets the same turn.
      const idHeader = prepared.prompt === undefined ? {} : { [clientMessageIdHeader]: prepared.prompt.clientMessageId }
      return yield* daemons.route(name, prepared).pipe(
        Effect.map((answer) => routedResponse(answer, idHeader)),
        Effect.catch((error) => Effect.succeed(HttpServerResponse.setHeaders(errorResponse(error), idHeader)))
      )
    }).pipe(
      // The body reader's own failures: over the limit, or a client that went away.
      Effect.catchTag("HttpServerError", (error) =>
        Effect.succeed(
          error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
            ? errorResponse(RequestTooLarge.of(maxRequestBytes))
            : requestProblemResponse.invalid(unreadableBody)
        )
      )
    ))
}

/** Where the hub listens, its token, and the largest request body it reads (default 1 MiB). */
export interface HubServerOptions {
  readonly host: string
  readonly port: number
  /** The hub's bearer token; never empty. */
  readonly token: string
  readonly maxRequestBytes?: number | undefined
}

/** Every route the hub serves. */
const servedRoutes: ReadonlyArray<ServedRoute> = [
  ...apiRoutes(HubApi),
  { method: "GET", path: hubOpenapiPath },
  { method: "*", path: homesPath },
  ...servedPages("hub")
]

/** The hub's routes, to serve with `HttpRouter.serve`. */
export const routes = (options: Pick<HubServerOptions, "token" | "maxRequestBytes">) =>
  Layer.unwrap(Effect.map(PageSessions, (sessions) => {
    const authenticate = checkCredentials(bearerAccepts(options.token), sessions)
    return Layer.mergeAll(
      HttpApiBuilder.layer(HubApi, { openapiPath: hubOpenapiPath }).pipe(
        Layer.provide(Layer.mergeAll(handlers, health, session).pipe(
          Layer.provide(Layer.mergeAll(authorizationLayer(options.token), requestProblemsLayer))
        ))
      ),
      forwardRoute(authenticate, options.maxRequestBytes ?? defaultMaxRequestBytes),
      pageRoutes("hub"),
      unmatchedRequests({ routes: servedRoutes, authenticate })
    )
  })).pipe(Layer.provide(PageSessionsLive.layer))

/** The hub served on `host:port` with node:http (and its address: port 0 is any free port). */
export const layer = (options: HubServerOptions) =>
  HttpRouter.serve(routes(options), { disableListenLog: true, disableLogger: true }).pipe(
    // A routed request is named after the daemon's route it reaches (`POST /v1/homes/:home/agents/:id/prompts`).
    Layer.provide(spanNamesLayer([...routedThroughHub(apiRoutes(QuiesceApi)), ...servedRoutes])),
    Layer.provideMerge(NodeHttpServer.layer(createServer, {
      host: options.host,
      port: options.port,
      gracefulShutdownTimeout: "1 second"
    }))
  )
