/**
 * Serves `QuiesceApi` over node:http: the handlers over the registry, the collector and process
 * inspection, the bearer-token check, the request body limit, and the admission gate closed at
 * shutdown.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { ByteSize, Context, Effect, type FileSystem, Layer, Option, type Path, Redacted, Ref } from "effect"
import {
  type Etag,
  FetchHttpClient,
  type HttpClient,
  HttpIncomingMessage,
  type HttpPlatform,
  HttpRouter,
  HttpServer,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { createHash, timingSafeEqual } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"
import { parentAgentIdOf } from "../../domain/agent.ts"
import { defaultMaxRequestBytes } from "../../domain/config.ts"
import { RuntimeNotFound, ShuttingDown, StillOpening, WorkingDirectoryNotFound } from "../../domain/errors.ts"
import type { CollectOutcome, ProbeObservation, Residency, SweepReport } from "../../domain/sweep.ts"
import type { MemoryStatus } from "../../domain/memory.ts"
import type { TurnRecord } from "../../domain/turn.ts"
import type { RetirementAttempt } from "../../domain/retirement.ts"
import { packageVersion } from "../../domain/version.ts"
import { AgentClose } from "../../services/AgentClose.ts"
import { AgentOperations } from "../../services/AgentOperations.ts"
import { ClusterRuntimes } from "../cluster/ClusterRuntimesReader.ts"
import { type AgentDirectory, AgentRegistry, type AgentView, type PromptReceipt, type RegistryAdmission } from "../../services/AgentRegistry.ts"
import { DaemonLifecycle } from "../../services/DaemonLifecycle.ts"
import { InFlightRequests } from "../../services/InFlightRequests.ts"
import { ProcessInspection, type ProcessSample } from "../../services/ProcessInspection.ts"
import { RuntimeCollector } from "../../services/RuntimeCollector.ts"
import {
  AdmissionGate,
  type AgentSummary,
  Authorization,
  type CollectResult,
  CrossOriginRefused,
  type DaemonStatusView,
  defaultTurnsLimit,
  type ErrorSummary,
  type MemoryView,
  openapiPath,
  type ProbeView,
  type PromptResult,
  QuiesceApi,
  RequestBodyLimit,
  RequestTooLarge,
  type RetirementAttemptView,
  TokenAuthorization,
  type RuntimeRow,
  type SweepResult,
  type TurnView,
  Unauthorized,
  type WarmReserveRow
} from "./Api.ts"
import { type ConfigReloaded, ConfigReloadFailed } from "../reserve/configReload.ts"
import type { WarmReserveView } from "../../domain/warmReserve.ts"
import { WarmReserve } from "../../services/WarmReserve.ts"
import { checkSession, PageSessions, type SessionCheck } from "./pageSessions.ts"
import { endSession, loginLink, pageRoutes, servedPages, startSession } from "./pages.ts"
import { apiRoutes, requestProblemsLayer, unmatchedRequests } from "./requestProblems.ts"

// ---- admission ---------------------------------------------------------------------------------

/** Where the API's admission of mutating requests is: before ready, admitting, or closed for good. */
export type AdmissionState = "opening" | "open" | "closed"

/**
 * Whether the API admits mutating requests. A daemon's API starts `opening` (503 `StillOpening`)
 * and admits once every part of it is ready (H1). Closing it at shutdown makes every POST answer
 * 503 `ShuttingDown` (a prompt repeating a recorded client message id still gets its turn), stops
 * the registry's admission and answers every caller still waiting on a turn; reads keep working.
 */
export class Admission extends Context.Service<Admission, {
  /** Starts admitting, unless it was closed already. */
  readonly admit: Effect.Effect<void>
  readonly close: Effect.Effect<void>
  readonly state: Effect.Effect<AdmissionState>
}>()("quiesce/http/Admission") {
  static readonly layerWith = (initial: "opening" | "open") => Layer.effect(
    Admission,
    Effect.gen(function*() {
      const registry: RegistryAdmission = yield* AgentRegistry
      const state = yield* Ref.make<AdmissionState>(initial)
      return Admission.of({
        admit: Ref.update(state, (current) => current === "closed" ? current : "open"),
        close: Ref.set(state, "closed").pipe(Effect.andThen(registry.stopAdmission)),
        state: Ref.get(state)
      })
    })
  )

  /** Admitting from the start (tests, and hosts that have nothing to finish first). */
  static readonly layer = Admission.layerWith("open")
}

// ---- middleware --------------------------------------------------------------------------------

const digest = (value: string) => createHash("sha256").update(value).digest()

/** Compares in constant time (over digests, so the length does not leak either). */
const tokenMatches = (expected: Buffer, candidate: string) => timingSafeEqual(expected, digest(candidate))

/**
 * The bearer check: whether a credential is the token. An empty credential (what a missing header decodes to) never matches, and an
 * empty configured token matches nothing: a server given no token refuses every request.
 */
export const bearerAccepts = (token: string) => {
  const expected = digest(token)
  return (candidate: string) => token !== "" && candidate !== "" && tokenMatches(expected, candidate)
}


/**
 * Whether a request carries the token (`Authorization: Bearer`) or a page session, for what no
 * API middleware guards: requests no route takes, the hub's forwarding.
 */
export const checkCredentials = (accepts: (candidate: string) => boolean, sessions: PageSessions["Service"]) =>
(request: HttpServerRequest.HttpServerRequest): Effect.Effect<SessionCheck> => {
  const header = request.headers["authorization"] ?? ""
  return header.startsWith("Bearer ") && accepts(header.slice(7)) ? Effect.succeed("authorized") : checkSession(sessions, request)
}

/**
 * The `Authorization` middleware: the bearer token (`bearerAccepts`), or else a page session whose
 * request is a read or comes from this server's own origin.
 */
export const authorizationLayer = (token: string) => {
  const accepts = bearerAccepts(token)
  return Layer.effect(
    Authorization,
    Effect.gen(function*() {
      const sessions = yield* PageSessions
      return Authorization.of({
        bearer: (httpEffect, { credential }) => accepts(Redacted.value(credential)) ? httpEffect : Effect.fail(Unauthorized.missingToken()),
        // The key arrives as the credential; `checkSession` reads it with the cookie.
        session: (httpEffect) =>
          Effect.gen(function*() {
            const check = yield* checkSession(sessions, yield* HttpServerRequest.HttpServerRequest)
            if (check === "unauthorized") return yield* Unauthorized.missingToken()
            if (check === "cross-origin") return yield* CrossOriginRefused.ofSession()
            return yield* httpEffect
          })
      })
    })
  ).pipe(
    Layer.merge(Layer.succeed(
      TokenAuthorization,
      TokenAuthorization.of({
        bearer: (httpEffect, { credential }) => accepts(Redacted.value(credential)) ? httpEffect : Effect.fail(Unauthorized.missingToken())
      })
    ))
  )
}

/** The web pages' login (the hub serves the same group; each API's group type carries its own middleware). */
const sessionGroupHandlers = HttpApiBuilder.group(
  QuiesceApi,
  "session",
  Effect.fn(function*(handlers) {
    const sessions = yield* PageSessions
    return handlers
      .handle("link", () => loginLink(sessions))
      .handle("start", ({ payload }) => startSession(sessions, payload.code))
      .handle("end", () => endSession(sessions))
  })
)

/** The body reader's own overflow (a defect of the payload decoder, an empty 413 if left alone). */
const isBodyTooLarge = (defect: unknown) =>
  HttpServerError.isHttpServerError(defect) && defect.reason._tag === "RequestParseError" &&
  defect.reason.reason === "BodyTooLarge"

/**
 * Bounds request bodies at `limitBytes`, answering 413 `RequestTooLarge` beyond it. A declared
 * `Content-Length` over the limit is refused before any of the body is read. Otherwise the limit
 * goes to the body reader (`MaxBodySize`), which stops reading a body (chunked, say) at the limit,
 * so memory stays bounded; the rest is drained and the connection closed by the server.
 */
const requestBodyLimitLayer = (limitBytes: number) => {
  const maxBodySize = ByteSize.bytes(limitBytes)
  return Layer.succeed(
    RequestBodyLimit,
    RequestBodyLimit.of(Effect.fn("RequestBodyLimit")(function*(httpEffect) {
      const declared = (yield* HttpServerRequest.HttpServerRequest).headers["content-length"]
      if (declared !== undefined && Number(declared) > limitBytes) return yield* RequestTooLarge.of(limitBytes)
      return yield* httpEffect.pipe(
        Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBodySize),
        Effect.catchDefect((defect) =>
          isBodyTooLarge(defect) ? Effect.fail(RequestTooLarge.of(limitBytes)) : Effect.die(defect)
        )
      )
    }))
  )
}

/** Mutations are refused once the shutdown began (`ShuttingDown`) or while a retirement is attempted (`DaemonRetiring`). */
const admissionGateLayer = Layer.effect(
  AdmissionGate,
  Effect.gen(function*() {
    const admission = yield* Admission
    const lifecycle = yield* DaemonLifecycle
    return AdmissionGate.of((httpEffect) =>
      Effect.gen(function*() {
        const state = yield* admission.state
        if (state === "opening") return yield* StillOpening.of("request")
        if (state === "closed") return yield* ShuttingDown.of("request")
        yield* lifecycle.admit("request")
        return yield* httpEffect
      })
    )
  })
)

/**
 * Around every request: it counts as in flight (a retirement waits for it to leave), and a 503
 * (shutting down, retiring) tells the client when to try again.
 */
const requestsLayer = Layer.unwrap(Effect.gen(function*() {
  const requests = yield* InFlightRequests
  const lifecycle = yield* DaemonLifecycle
  return HttpRouter.middleware((httpEffect) =>
    requests.track(httpEffect).pipe(
      Effect.map((response) =>
        response.status === 503
          ? HttpServerResponse.setHeader(response, "retry-after", String(lifecycle.retryAfterSeconds()))
          : response
      )
    ), { global: true })
}))

/** Requests no route takes: typed problems, once authenticated like the API's own routes. */
const unmatchedLayer = (token: string) =>
  Layer.unwrap(Effect.map(PageSessions, (sessions) =>
    unmatchedRequests({
      routes: [...apiRoutes(QuiesceApi), { method: "GET", path: openapiPath }, ...servedPages("daemon")],
      authenticate: checkCredentials(bearerAccepts(token), sessions)
    })))

// ---- handlers ----------------------------------------------------------------------------------

const agentSummary = ({ pendingPermissions, pid, providerAvailable, record, resident }: AgentView): AgentSummary => ({
  agentId: record.agentId,
  provider: record.provider,
  cwd: record.cwd,
  labels: record.labels,
  sessionId: record.persistence?.sessionId ?? null,
  resident,
  lifecycle: record.lifecycle,
  lastActivityAt: iso(record.lastActivityAt),
  parentAgentId: parentAgentIdOf(record.labels) ?? null,
  pendingPermissions,
  pid,
  providerAvailable
})

/** A registry receipt as the API (and the cluster between runners) carries it. */
export const promptResult = (receipt: PromptReceipt): PromptResult => ({
  agentId: receipt.agentId,
  turnId: receipt.turnId,
  sessionId: receipt.sessionId,
  state: receipt.state,
  disposition: receipt.disposition,
  joinedTurnId: receipt.joinedTurnId,
  resumed: receipt.resumed,
  ...(receipt.output === undefined ? {} : { output: receipt.output }),
  error: receipt.error
})

const errorSummary = (error: { readonly _tag: string; readonly message: string }): ErrorSummary => ({
  _tag: error._tag,
  message: error.message
})

const iso = (millis: number) => new Date(millis).toISOString()

const probeView = (observation: ProbeObservation | null): ProbeView | null =>
  observation === null ? null : { ...observation, at: iso(observation.at) }

const turnView = (record: TurnRecord): TurnView => ({
  ...record,
  acceptedAt: iso(record.acceptedAt),
  dispatchedAt: record.dispatchedAt === null ? null : iso(record.dispatchedAt),
  endedAt: record.endedAt === null ? null : iso(record.endedAt)
})

const collectResult = (outcome: CollectOutcome): CollectResult => {
  switch (outcome._tag) {
    case "Collected":
      return { outcome: "collected", blockers: [] }
    case "Retained":
      return {
        outcome: "retained",
        blockers: outcome.residency.blockers,
        state: outcome.residency.state,
        lastProbe: probeView(outcome.residency.veto)
      }
    case "Failed":
      return { outcome: "failed", blockers: [], error: errorSummary(outcome.error) }
  }
}

const sweepResult = (report: SweepReport): SweepResult => ({
  collected: report.collected,
  failures: report.failures.map(({ agentId, error }) => ({ agentId, error: errorSummary(error) }))
})

const noSamples: ReadonlyMap<number, Option.Option<ProcessSample>> = new Map()

const runtimeRow = (view: AgentView, residency: Residency, sample: Option.Option<ProcessSample>): RuntimeRow => ({
  agentId: residency.agentId,
  provider: residency.provider,
  sessionId: residency.sessionId,
  pid: view.pid,
  rssBytes: Option.isSome(sample) ? sample.value.rssBytes : null,
  measuredProcesses: Option.isSome(sample) ? sample.value.measuredProcesses : null,
  family: residency.family,
  idleSince: iso(residency.idleSince),
  eligibleAt: residency.releasableAt === null ? null : iso(residency.releasableAt),
  state: residency.state,
  blockers: residency.blockers,
  lastProbe: probeView(residency.veto),
  ...(residency.memory === undefined ? {} : { evictionRank: residency.memory.evictionRank })
})

const memoryView = (status: MemoryStatus): MemoryView => ({
  ...status,
  sampledAt: status.sampledAt === null ? null : iso(status.sampledAt),
  pressure: status.pressure === null ? null : { since: iso(status.pressure.since), causes: status.pressure.causes },
  order: status.order.map((entry) => ({ ...entry, lastActiveAt: iso(entry.lastActiveAt) }))
})

const systemHandlers = (renderMetrics: Effect.Effect<string>) =>
  HttpApiBuilder.group(QuiesceApi, "system", (handlers) =>
    handlers
      .handle("health", () =>
        Effect.sync(() => ({ status: "ok" as const, version: packageVersion, uptimeSeconds: Math.round(process.uptime()) })))
      .handle("metrics", () => renderMetrics))

/** An agent's working directory must exist before its provider is asked to start there. */
const checkDirectory = (cwd: string) =>
  Effect.suspend(() => {
    const stat = fs.statSync(cwd, { throwIfNoEntry: false })
    return stat === undefined
      ? Effect.fail(WorkingDirectoryNotFound.of(cwd, "does not exist"))
      : stat.isDirectory()
      ? Effect.void
      : Effect.fail(WorkingDirectoryNotFound.of(cwd, "is not a directory"))
  })

const agentsHandlers = HttpApiBuilder.group(
  QuiesceApi,
  "agents",
  Effect.fn(function*(handlers) {
    // On a cluster's runner, each of these goes to the runner that hosts the agent.
    const agents = yield* AgentOperations
    const closes = yield* AgentClose
    const registry: AgentDirectory = yield* AgentRegistry
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          yield* checkDirectory(payload.cwd)
          const parent = payload.parentAgentId
          // A parent that does not exist would leave the child's family unknown to the collector.
          if (parent !== undefined) yield* agents.get(parent)
          const record = yield* agents.create({
            provider: payload.provider,
            cwd: payload.cwd,
            labels: payload.labels,
            parentAgentId: parent
          })
          return { agentId: record.agentId, provider: record.provider, sessionId: record.persistence?.sessionId ?? null }
        }))
      .handle("list", () => Effect.map(registry.list, (views) => views.map(agentSummary)))
      .handle("get", ({ params }) => Effect.map(agents.get(params.id), agentSummary))
      .handle("close", ({ params, query }) => closes.close(params.id, { force: query.force === "true" }))
      .handle("delete", ({ params, query }) => closes.delete(params.id, { force: query.force === "true" }))
      .handle("interrupt", ({ params }) => agents.interrupt(params.id))
      .handle("answerPermission", ({ params, payload }) =>
        agents.respondToPermission(params.id, params.permissionId, payload.allow))
      .handle("prompt", ({ params, payload }) =>
        agents.prompt(params.id, payload.text, {
          clientMessageId: payload.clientMessageId,
          wait: payload.wait
        }).pipe(Effect.map(promptResult)))
      .handle("turn", ({ params }) => Effect.map(agents.turn(params.id, params.turnId), turnView))
      .handle("turns", ({ params, query }) =>
        Effect.map(agents.turns(params.id, query.limit ?? defaultTurnsLimit), (records) => records.map(turnView)))
  })
)


const attemptView = (attempt: RetirementAttempt): RetirementAttemptView => ({ ...attempt, at: iso(attempt.at) })

const daemonHandlers = HttpApiBuilder.group(
  QuiesceApi,
  "daemon",
  Effect.fn(function*(handlers) {
    const lifecycle = yield* DaemonLifecycle
    // The port it really listens on (the configured one may be 0: any free port).
    const address = (yield* HttpServer.HttpServer).address
    const port = address._tag === "UnixPathAddress" ? lifecycle.identity.port : address.port
    return handlers
      .handle("status", () =>
        Effect.map(lifecycle.status, (status): DaemonStatusView => ({
          ...lifecycle.identity,
          port,
          phase: status.phase,
          idleSince: iso(status.idleSince),
          deadline: status.deadline === null ? null : iso(status.deadline),
          blockers: status.blockers,
          lastAttempt: status.lastAttempt === null ? null : attemptView(status.lastAttempt),
          failure: status.failure
        })))
      .handle("retire", () => Effect.map(lifecycle.retireNow, attemptView))
  })
)

/** The rows of the runtimes this daemon hosts, each explained, with the memory of its process tree. */
export const makeRuntimeRows = Effect.gen(function*() {
  const registry: AgentDirectory = yield* AgentRegistry
  const collector = yield* RuntimeCollector
  const inspection = yield* ProcessInspection

  const rowsOf = (resident: ReadonlyArray<AgentView>) =>
    Effect.gen(function*() {
      const pids = resident.flatMap((view) => view.pid === null ? [] : [view.pid])
      const [samples, rows] = yield* Effect.all([
        pids.length === 0 ? Effect.succeed(noSamples) : inspection.sampleAll(pids),
        Effect.forEach(resident, (view) =>
          collector.explain(view.record.agentId).pipe(
            Effect.map((residency) => Option.some({ view, residency })),
            // Released between the listing and the explanation: no longer a resident runtime.
            Effect.catchTag("RuntimeNotFound", () => Effect.succeedNone)
          ), { concurrency: 16 })
      ], { concurrency: 2 })
      return rows.flatMap((row) => {
        if (Option.isNone(row)) return []
        const { residency, view } = row.value
        const sample = view.pid === null ? undefined : samples.get(view.pid)
        return [runtimeRow(view, residency, sample ?? Option.none())]
      })
    })

  return {
    rowsOf,
    all: Effect.flatMap(registry.residents, rowsOf)
  }
})

const runtimesHandlers = HttpApiBuilder.group(
  QuiesceApi,
  "runtimes",
  Effect.fn(function*(handlers) {
    const registry: AgentDirectory = yield* AgentRegistry
    const collector = yield* RuntimeCollector
    const rows = yield* makeRuntimeRows
    const cluster = yield* ClusterRuntimes

    const explainRuntime = (agentId: string) =>
      Effect.gen(function*() {
        const view = yield* registry.get(agentId).pipe(Effect.option)
        const [row] = view._tag === "Some" && view.value.resident ? yield* rows.rowsOf([view.value]) : []
        if (row === undefined) return yield* RuntimeNotFound.of(agentId)
        return row
      })

    return handlers
      // A lone daemon is the whole cluster.
      .handle("list", ({ query }) => query.scope === "cluster" && cluster !== undefined ? cluster.list : rows.all)
      .handle("explain", ({ params }) => explainRuntime(params.id))
      .handle("collect", ({ params }) => Effect.map(collector.collectNow(params.id), collectResult))
      .handle("sweep", () => Effect.map(collector.sweep, sweepResult))
      .handle("memory", () => Effect.map(collector.memory, (status) => Option.isSome(status) ? memoryView(status.value) : null))
  })
)

const reserveHandlers = (reloadConfig: Effect.Effect<ConfigReloaded, ConfigReloadFailed>) =>
  HttpApiBuilder.group(
    QuiesceApi,
    "reserve",
    Effect.fn(function*(handlers) {
      const reserve = yield* WarmReserve
      const inspection = yield* ProcessInspection

      /** Each reserve with the memory of its processes, sampled in one query. */
      const rowsOf = (views: ReadonlyArray<WarmReserveView>) =>
        Effect.gen(function*() {
          const pids = views.flatMap((view) => view.ready.map((process) => process.pid))
          const samples = pids.length === 0 ? noSamples : yield* inspection.sampleAll(pids)
          return views.map((view): WarmReserveRow => ({
            ...view,
            ready: view.ready.map((process) => {
              const sample = samples.get(process.pid) ?? Option.none()
              return {
                ...process,
                rssBytes: Option.isSome(sample) ? sample.value.rssBytes : null,
                measuredProcesses: Option.isSome(sample) ? sample.value.measuredProcesses : null
              }
            })
          }))
        })

      return handlers
        .handle("list", () => Effect.flatMap(reserve.reserves, rowsOf))
        .handle("resize", ({ params, payload }) =>
          reserve.resize(params.provider, payload.target).pipe(
            Effect.flatMap((view) => rowsOf([view])),
            Effect.map((rows) => rows[0]!)
          ))
        .handle("reload", () => reloadConfig)
    })
  )

/** A host without a configuration file has nothing to reload. */
const noConfigFile = Effect.fail(new ConfigReloadFailed({ message: "This host has no configuration file to reload" }))

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
    Layer.provide(PageSessions.layer)
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
  AgentRegistry | AgentOperations | AgentClose | RuntimeCollector | ProcessInspection | DaemonLifecycle | InFlightRequests
> =>
  HttpRouter.serve(routes(options), { disableListenLog: true, disableLogger: options.logRequests === false }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, {
      host: options.host,
      port: options.port,
      // Shutdown must not wait long on requests (a waiting prompt ends only after runtimes close).
      gracefulShutdownTimeout: "1 second"
    })),
    Layer.provideMerge(Admission.layerWith("opening"))
  )

/** `NodeHttpServer.layerTest`, but listening on loopback only (that one listens on every interface). */
const testServer = HttpServer.layerTestClient.pipe(
  Layer.provide(FetchHttpClient.layer),
  Layer.provideMerge(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 }))
)

/**
 * The API on an ephemeral 127.0.0.1 port, for tests: also provides an `HttpClient` whose relative
 * URLs reach it, and the `Admission`.
 */
export const layerTest = (options: RouteOptions, admission: "opening" | "open" = "open"): Layer.Layer<
  Admission | HttpClient.HttpClient | HttpServer.HttpServer,
  HttpServerError.ServeError,
  AgentRegistry | AgentOperations | AgentClose | RuntimeCollector | ProcessInspection | DaemonLifecycle | InFlightRequests
> =>
  HttpRouter.serve(routes(options), { disableListenLog: true, disableLogger: true }).pipe(
    Layer.provideMerge(testServer),
    Layer.provideMerge(Admission.layerWith(admission))
  )
