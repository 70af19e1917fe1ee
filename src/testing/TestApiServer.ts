/**
 * The daemon's API for tests: served on an ephemeral 127.0.0.1 port, with an `HttpClient` whose
 * relative URLs reach it and the `Admission` gate already open (or still opening).
 *
 * @module
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Layer } from "effect"
import { FetchHttpClient, type HttpClient, HttpRouter, HttpServer, type HttpServerError } from "effect/http"
import { createServer } from "node:http"
import * as AdmissionLive from "../layers/http/admission.ts"
import { type RouteOptions, routes } from "../layers/http/ApiServer.ts"
import type { Admission } from "../services/Admission.ts"
import type { AgentClose } from "../services/AgentClose.ts"
import type { AgentOperations } from "../services/AgentOperations.ts"
import type { AgentRegistry } from "../services/AgentRegistry.ts"
import type { DaemonLifecycle } from "../services/DaemonLifecycle.ts"
import type { InFlightRequests } from "../services/InFlightRequests.ts"
import type { AgentEvents } from "../services/AgentEvents.ts"
import type { ProcessInspection } from "../services/ProcessInspection.ts"
import type { RuntimeCollector } from "../services/RuntimeCollector.ts"

/** `NodeHttpServer.layerTest`, but listening on loopback only (that one listens on every interface). */
const testServer = HttpServer.layerTestClient.pipe(
  Layer.provide(FetchHttpClient.layer),
  Layer.provideMerge(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 }))
)

/**
 * The API on an ephemeral 127.0.0.1 port, for tests: also provides an `HttpClient` whose relative
 * URLs reach it, and the `Admission`.
 */
export const layer = (options: RouteOptions, admission: "opening" | "open" = "open"): Layer.Layer<
  Admission | HttpClient.HttpClient | HttpServer.HttpServer,
  HttpServerError.ServeError,
  AgentRegistry | AgentOperations | AgentClose | RuntimeCollector | ProcessInspection | DaemonLifecycle | InFlightRequests | AgentEvents
> =>
  HttpRouter.serve(routes(options), { disableListenLog: true, disableLogger: true }).pipe(
    Layer.provideMerge(testServer),
    Layer.provideMerge(AdmissionLive.layerWith(admission))
  )
