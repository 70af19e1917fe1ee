/** The daemon group's handlers (status, retire now), the system group's (health, metrics) and the login's. */
import { Effect } from "effect"
import { HttpServer } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { QuiesceApi } from "../../../api/QuiesceApi.ts"
import { attemptView, daemonStatusView } from "../../../api/views.ts"
import { packageVersion } from "../../../domain/version.ts"
import { DaemonLifecycle } from "../../../services/DaemonLifecycle.ts"
import { makeHomeMemory } from "../../collector/homeMemory.ts"
import { sessionHandlers } from "../pages.ts"

/** The daemon group. */
export const daemonHandlers = HttpApiBuilder.group(
  QuiesceApi,
  "daemon",
  Effect.fn(function*(handlers) {
    const lifecycle = yield* DaemonLifecycle
    const homeMemory = yield* makeHomeMemory
    // The port it really listens on (the configured one may be 0: any free port).
    const address = (yield* HttpServer.HttpServer).address
    const port = address._tag === "UnixPathAddress" ? lifecycle.identity.port : address.port
    return handlers
      .handle("status", () =>
        Effect.map(
          Effect.all([lifecycle.status, homeMemory], { concurrency: 2 }),
          ([status, memory]) => daemonStatusView(lifecycle.identity, port, status, memory)
        ))
      .handle("retire", () => Effect.map(lifecycle.retireNow, attemptView))
  })
)

/** The system group: health, and the metrics `renderMetrics` renders. */
export const systemHandlers = (renderMetrics: Effect.Effect<string>) =>
  HttpApiBuilder.group(QuiesceApi, "system", (handlers) =>
    handlers
      .handle("health", () =>
        Effect.sync(() => ({ status: "ok" as const, version: packageVersion, uptimeSeconds: Math.round(process.uptime()) })))
      .handle("metrics", () => renderMetrics))

/** The web pages' login (the hub serves the same group; each API's group type carries its own middleware). */
export const sessionGroupHandlers = HttpApiBuilder.group(
  QuiesceApi,
  "session",
  (handlers) => Effect.map(sessionHandlers, (each) => handlers.handleAll(each))
)
