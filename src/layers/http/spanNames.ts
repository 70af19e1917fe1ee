/**
 * Server spans named as OpenTelemetry names them, by method and route (`POST /v1/agents/:id/prompts`),
 * so a trace list tells a prompt from a close at a glance; the span's `http.route` attribute says
 * the same. A path that no route serves keeps the method alone (an unmatched URL could be anything,
 * and a span name must stay one of few).
 */
import { Layer } from "effect"
import { FindMyWay, HttpMiddleware, type HttpServerRequest } from "effect/http"
import type { ServedRoute } from "./requestProblems.ts"

/** The span name of a request among `routes`: `METHOD route`, or the method when none serves it. */
export const spanNameOf = (routes: ReadonlyArray<ServedRoute>): (method: string, url: string) => string => {
  const router = FindMyWay.make<string>()
  for (const { method, path } of routes) {
    const pattern: `/${string}` = `/${path.replace(/^\//, "")}`
    if (method === "*") router.all(pattern, pattern)
    else router.on(method, pattern, pattern)
  }
  return (method, url) => {
    const route = router.find(method === "HEAD" ? "GET" : method, url)?.handler
    return route === undefined ? method : `${method} ${route}`
  }
}

/** The daemon's API routes as the hub serves them, under `/v1/homes/:home` (the daemon's `/v1/x` is the hub's `/v1/homes/NAME/x`). */
export const routedThroughHub = (daemonRoutes: ReadonlyArray<ServedRoute>): ReadonlyArray<ServedRoute> =>
  daemonRoutes.flatMap(({ method, path }) =>
    path === "/v1" ? [{ method, path: "/v1/homes/:home" }]
    : path.startsWith("/v1/") ? [{ method, path: `/v1/homes/:home${path.slice(3)}` }]
    : []
  )

/** Names the server's spans after `routes` (provide it beside `HttpRouter.serve`). */
export const spanNamesLayer = (routes: ReadonlyArray<ServedRoute>): Layer.Layer<never> => {
  const nameOf = spanNameOf(routes)
  return Layer.succeed(HttpMiddleware.SpanNameGenerator)((request: HttpServerRequest.HttpServerRequest) =>
    nameOf(request.method, request.url)
  )
}
