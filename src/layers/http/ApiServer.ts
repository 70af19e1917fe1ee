/**
 * Serves `QuiesceApi` over node:http: the handlers (handlers/) over the registry, the collector
 * and process inspection, the bearer-token check, the request body limit, and the admission gate
 * closed at shutdown.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, type FileSystem, Layer, type Path } from "effect"
import {
  type Etag,
  type HttpPlatform,
  HttpRouter,
  HttpServer,
  type HttpServerError
} from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { createServer } from "node:http"
import { openapiPath, QuiesceApi } from "../../api/QuiesceApi.ts"
import { type ConfigReloaded, type ConfigReloadFailed, defaultMaxRequestBytes } from "../../domain/config.ts"
import type { Admission } from "../../services/Admission.ts"
import type { AgentClose } from "../../services/AgentClose.ts"
import type { AgentEvents } from "../../services/AgentEvents.ts"
import type { AgentOperations } from "../../services/AgentOperations.ts"
import type { AgentRegistry } from "../../services/AgentRegistry.ts"
import type { DaemonLifecycle } from "../../services/DaemonLifecycle.ts"
import type { InFlightRequests } from "../../services/InFlightRequests.ts"
import { PageSessions } from "../../services/PageSessions.ts"
import type { ProcessInspection } from "../../services/ProcessInspection.ts"
import type { RuntimeCollector } from "../../services/RuntimeCollector.ts"
import * as AdmissionLive from "./admission.ts"
import { authorizationLayer, bearerAccepts, checkCredentials } from "./authorization.ts"
import { admissionGateLayer, requestBodyLimitLayer, requestsLayer } from "./daemonMiddleware.ts"
import { agentsHandlers } from "./handlers/agents.ts"
import { daemonHandlers, sessionGroupHandlers, systemHandlers } from "./handlers/daemon.ts"
import { noConfigFile, reserveHandlers } from "./handlers/reserve.ts"
import { runtimesHandlers } from "./handlers/runtimes.ts"
import * as PageSessionsLive from "./pageSessions.ts"
import { pageRoutes, servedPages } from "./pages.ts"
import { apiRoutes, requestProblemsLayer, type ServedRoute, unmatchedRequests } from "./requestProblems.ts"
import { spanNamesLayer } from "./spanNames.ts"

/** Every route the daemon serves. */
const servedRoutes: ReadonlyArray<ServedRoute> = [...apiRoutes(QuiesceApi), { method: "GET", path: openapiPath }, ...servedPages("daemon")]

/** Requests no route takes: typed problems, once authenticated like the API's own routes. */
const unmatchedLayer = (token: string) =>
  Layer.unwrap(Effect.map(PageSessions, (sessions) =>
    unmatchedRequests({
      routes: servedRoutes,
      authenticate: checkCredentials(bearerAccepts(token), sessions)
    })))

// ---- layers ------------------------------------------------------------------------------------

/** What the API's routes need from the host: the token, the metrics, the body limit and the config reload. */
export interface RouteOptions {
  /** The bearer token every route but health, metrics and the OpenAPI document requires; never empty. */
  readonly token: string
  /** Renders the Prometheus text served at `GET /metrics`. */
  readonly renderMetrics: Effect.Effect<string>
  /** The largest request body read, in bytes; beyond it 413 `RequestTooLarge`. Default 1 MiB. */
  readonly maxRequestBytes?: number | undefined
  /** `POST /v1/config/reload`: rereads the configuration and applies what it can. Default: none to reload. */
  readonly reloadConfig?: Effect.Effect<ConfigReloaded, ConfigReloadFailed> | undefined
}

/** The routes' options, plus the address the server listens on and whether it logs requests. */
export interface ApiServerOptions extends RouteOptions {
  readonly host: string
  readonly port: number
  /** Log every request at info level (the framework's request logger). Default true. */
  readonly logRequests?: boolean | undefined
}

/** The API's routes, to serve with `HttpRouter.serve`; `Admission` is shared with the caller. */
export const routes = (options: RouteOptions): Layer.Layer<
  never,
  never,
  | AgentRegistry
  | AgentOperations
  | AgentClose
  | RuntimeCollector
  | ProcessInspection
  | DaemonLifecycle
  | InFlightRequests
  | AgentEvents
  | Admission
  | HttpRouter.HttpRouter
  | HttpServer.HttpServer
  | Etag.Generator
  | FileSystem.FileSystem
  | HttpPlatform.HttpPlatform
  | Path.Path
> => {
  const middleware = Layer.mergeAll(
    authorizationLayer(options.token),
    admissionGateLayer,
    requestProblemsLayer,
    requestBodyLimitLayer(options.maxRequestBytes ?? defaultMaxRequestBytes)
  )
  return HttpApiBuilder.layer(QuiesceApi, { openapiPath }).pipe(
    Layer.provide(
      Layer.mergeAll(
        systemHandlers(options.renderMetrics),
        agentsHandlers,
        runtimesHandlers,
        reserveHandlers(options.reloadConfig ?? noConfigFile),
        daemonHandlers,
        sessionGroupHandlers
      ).pipe(
        Layer.provide(middleware)
      )
    ),
    Layer.merge(requestsLayer),
    Layer.merge(pageRoutes("daemon")),
    Layer.merge(unmatchedLayer(options.token)),
    // One set of sessions for the middleware, the login and the pages.
    Layer.provide(PageSessionsLive.layer)
  )
}

/**
 * The API served on `host:port` with node:http, plus the `Admission` it checks (it starts
 * `opening`: admit once the host is ready, close it at shutdown) and the server (its address:
 * port 0 listens on any free port). Fails with `ServeError` when it cannot listen
 * (`ListenFailed.of` says why, for people).
 */
export const layer = (
  options: ApiServerOptions
): Layer.Layer<
  Admission | HttpServer.HttpServer,
  HttpServerError.ServeError,
  AgentRegistry | AgentOperations | AgentClose | RuntimeCollector | ProcessInspection | DaemonLifecycle | InFlightRequests | AgentEvents
> =>
  HttpRouter.serve(routes(options), { disableListenLog: true, disableLogger: options.logRequests === false }).pipe(
    Layer.provide(spanNamesLayer(servedRoutes)),
    Layer.provideMerge(NodeHttpServer.layer(createServer, {
      host: options.host,
      port: options.port,
      // Shutdown must not wait long on requests (a waiting prompt ends only after runtimes close).
      gracefulShutdownTimeout: "1 second"
    })),
    Layer.provideMerge(AdmissionLive.layerWith("opening"))
  )
