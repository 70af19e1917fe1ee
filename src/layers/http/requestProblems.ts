/**
 * The server side of `src/api/requestErrors.ts`: what the framework would answer with an empty body or its
 * own `about:blank` problem is answered with the API's typed problems instead.
 *
 * - `requestProblemsLayer`, the API middleware: a request failing its schema is 400
 *   `InvalidRequest`, a body of another media type 415 `UnsupportedMediaType`.
 * - `unmatchedRequests`, around the whole router: a request no route takes is, once it is
 *   authenticated (before that, 401: who may not use the API learns nothing of its routes), 404
 *   `RouteNotFound`, 405 `MethodNotAllowed` (with `Allow`) for a path that takes other methods, or
 *   400 `InvalidRequest` for a path that is not valid percent-encoded UTF-8; a defect is logged
 *   and answered 500 `InternalError`.
 */
import { Cause, Effect, Layer, Schema, SchemaIssue, type Types } from "effect"
import { FindMyWay, HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiError, type HttpApiGroup } from "effect/http-api"
import { CrossOriginRefused, Unauthorized } from "../../api/errors.ts"
import type { SessionCheck } from "./pageSessions.ts"
import { problemResponse } from "./problem.ts"
import {
  InternalError,
  InvalidRequest,
  MethodNotAllowed,
  RequestIssue,
  RequestProblems,
  RouteNotFound,
  UnsupportedMediaType
} from "../../api/requestErrors.ts"

// ---- requests an operation cannot take ------------------------------------------------------------

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const slots = { Params: "params", Headers: "headers", Query: "query", Payload: "payload" } as const

const segmentOf = (segment: PropertyKey | { readonly key: PropertyKey }): string | number => {
  const key = typeof segment === "object" ? segment.key : segment
  return typeof key === "number" ? key : String(key)
}

/** Each issue of a request's schema failure, its path starting with the request's slot. */
const issuesOf = (slot: string, issue: SchemaIssue.Issue): ReadonlyArray<RequestIssue> =>
  formatIssues(issue).issues.map((each) => ({
    path: [slot, ...(each.path ?? []).map(segmentOf)],
    message: each.message
  }))

const responseInvalid = new InternalError({ message: "The server's answer failed its own schema (a bug; it is logged)" })

/** The `RequestProblems` middleware of an API (see `src/api/requestErrors.ts`). */
export const requestProblemsLayer = Layer.succeed(
  RequestProblems,
  RequestProblems.of((httpEffect) =>
    Effect.gen(function*() {
      const response = yield* httpEffect
      // The framework answers a body it cannot read with a plain-text 415 before the handler runs.
      if (response.status !== 415) return response
      const request = yield* HttpServerRequest.HttpServerRequest
      return yield* UnsupportedMediaType.of(request.headers["content-type"] ?? "")
    }).pipe(
      Effect.catch((error): Effect.Effect<never, Types.unhandled | UnsupportedMediaType | InvalidRequest | InternalError> => {
        if (!HttpApiError.HttpApiSchemaError.is(error)) return Effect.fail(error)
        if (error.kind === "Body" || error.kind === "ResponseHeaders") {
          return Effect.logError("A response failed its own schema", error.cause).pipe(Effect.andThen(Effect.fail(responseInvalid)))
        }
        return Effect.fail(InvalidRequest.of(issuesOf(slots[error.kind], error.cause.issue)))
      })
    )
  )
)

// ---- requests no route takes ----------------------------------------------------------------------

/** A route a server serves: its method (`*`: any) and its path pattern. */
export interface ServedRoute {
  readonly method: string
  readonly path: string
}

/** The routes of an HttpApi, from its definition. */
export const apiRoutes = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): ReadonlyArray<ServedRoute> => {
  const routes: Array<ServedRoute> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => routes.push({ method: endpoint.method, path: endpoint.path })
  })
  return routes
}

const probedMethods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const

/** The methods a URL's path takes among `routes`, matched as the router matches them (HEAD as GET). */
const allowedMethods = (routes: ReadonlyArray<ServedRoute>) => {
  const router = FindMyWay.make<true>()
  for (const { method, path } of routes) {
    const pattern: `/${string}` = `/${path.replace(/^\//, "")}`
    // As HttpRouter registers them: `/a/*` also matches `/a`.
    const paths: ReadonlyArray<`/${string}`> = pattern.endsWith("/*") ? [pattern, `/${pattern.slice(1, -2)}`] : [pattern]
    for (const each of paths) {
      if (method === "*") router.all(each, true)
      else router.on(method, each, true)
    }
  }
  return (url: string) =>
    probedMethods.filter((method) => router.find(method === "HEAD" ? "GET" : method, url) !== undefined)
}

const pathOf = (url: string) => url.split("?", 1)[0] ?? url

const decodesAsUtf8 = (path: string) => {
  try {
    decodeURIComponent(path)
    return true
  } catch {
    return false
  }
}

const isRouteNotFound = (cause: Cause.Cause<unknown>) =>
  cause.reasons.some((reason) =>
    Cause.isFailReason(reason) && HttpServerError.isHttpServerError(reason.error) && reason.error.reason._tag === "RouteNotFound"
  )

/** A response the framework carries as a defect (it answers with it as it is). */
const carriesResponse = (cause: Cause.Cause<unknown>) =>
  cause.reasons.some((reason) => Cause.isDieReason(reason) && HttpServerResponse.isHttpServerResponse(reason.defect))

/** The request errors as responses, for what answers outside an HttpApi (here, and the hub's forwarding). */
export const requestProblemResponse = {
  unauthorized: (error: Unauthorized) => problemResponse(error, Schema.encodeSync(Unauthorized)(error), 401),
  crossOrigin: (error: CrossOriginRefused) => problemResponse(error, Schema.encodeSync(CrossOriginRefused)(error), 403),
  invalid: (error: InvalidRequest) => problemResponse(error, Schema.encodeSync(InvalidRequest)(error), 400),
  notFound: (error: RouteNotFound) => problemResponse(error, Schema.encodeSync(RouteNotFound)(error), 404),
  notAllowed: (error: MethodNotAllowed) =>
    problemResponse(error, Schema.encodeSync(MethodNotAllowed)(error), 405, { allow: error.allow.join(", ") }),
  internal: (error: InternalError) => problemResponse(error, Schema.encodeSync(InternalError)(error), 500)
}

/** 404 `RouteNotFound` for a request nothing serves. */
export const routeNotFoundResponse = (request: HttpServerRequest.HttpServerRequest) =>
  requestProblemResponse.notFound(RouteNotFound.of(request.method, pathOf(request.url)))

/** A path that is not valid percent-encoded UTF-8. */
export const invalidPath = InvalidRequest.of([{ path: ["path"], message: "Expected valid percent-encoded UTF-8" }])

/** What a server needs to answer the requests no route takes. */
export interface UnmatchedRequestsOptions {
  /** Every route the server serves, to tell a wrong method (405) from an unknown path (404). */
  readonly routes: ReadonlyArray<ServedRoute>
  /** Whether a request carries the server's token or a page session (as its API's `Authorization` decides). */
  readonly authenticate: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<SessionCheck>
}

/** Around the whole router: typed problems for unmatched requests and defects (see the module's comment). */
export const unmatchedRequests = (options: UnmatchedRequestsOptions): Layer.Layer<never, never, HttpRouter.HttpRouter> => {
  const allowed = allowedMethods(options.routes)
  const unmatched = Effect.fn("unmatchedRequest")(function*(request: HttpServerRequest.HttpServerRequest) {
    const check = yield* options.authenticate(request)
    if (check === "unauthorized") return requestProblemResponse.unauthorized(Unauthorized.missingToken())
    if (check === "cross-origin") return requestProblemResponse.crossOrigin(CrossOriginRefused.ofSession())
    const path = pathOf(request.url)
    if (!decodesAsUtf8(path)) return requestProblemResponse.invalid(invalidPath)
    const methods = allowed(request.url)
    return methods.length === 0 || methods.some((method) => method === request.method)
      ? routeNotFoundResponse(request)
      : requestProblemResponse.notAllowed(MethodNotAllowed.of(request.method, path, methods))
  })
  return HttpRouter.middleware((httpEffect) =>
    Effect.catchCause(httpEffect, (cause) => {
      if (isRouteNotFound(cause)) return Effect.flatMap(HttpServerRequest.HttpServerRequest, unmatched)
      if (Cause.hasInterruptsOnly(cause) || carriesResponse(cause)) return Effect.failCause(cause)
      return Effect.logError("A request failed with a defect", cause).pipe(
        Effect.as(requestProblemResponse.internal(new InternalError({ message: "The server failed to answer (a bug; it is logged)" })))
      )
    }), { global: true })
}
