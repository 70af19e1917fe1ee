/**
 * Running the daemon of a home: configuration, the home's lock and token, the services, the HTTP
 * API and the record the CLI and a hub find it by. The CLI loads this module only for
 * `quiesce daemon`, so a client command never loads the providers and the server.
 *
 * Opening follows one order (H1), each stage over what the ones before acquired: configuration
 * (nothing is touched), `lock` (the home: its lock and token), `storage` (the database opened),
 * `migrations` (every store's tables), `providers` (composed, registration sealed, leftover
 * runtimes of a crashed daemon ended, the registry, delivery, finish subscriptions, the collector
 * and the daemon's lifecycle), `listener` (the HTTP server), `admission` (requests admitted).
 * Only then comes the one readiness event: the rendezvous record, the "ready" log line and
 * `READY=1` to a service manager. A failure or a signal before it releases what was acquired,
 * in reverse, and the home is left as it was (`Home.opened` is never reached).
 */
import { Cause, Console, Context, Duration, Effect, Layer, Logger } from "effect"
import { HttpServer } from "effect/http"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { type ClusterConfig, decodeConfig, largestCloseGrace, type QuiesceConfig } from "../domain/config.ts"
import {
  daemonProtocolVersion,
  type DaemonIdentity,
  launchedByHubVariable,
  shutdownDeadlineMillis
} from "../domain/retirement.ts"
import { ClusterJoinFailed } from "../domain/errors.ts"
import { longRunningNodeFlags, packageRoot, packageVersion } from "../domain/version.ts"
import { Home } from "../services/Home.ts"
import * as HomeLive from "../layers/host/Home.ts"
import { ConfigInvalid, type ConfigOverrides, loadConfig, missingProviderCommands, resolveIdleTimeout } from "../layers/host/loadConfig.ts"
import { rotatingLogFile } from "../layers/host/logFile.ts"
import { readStat } from "../platform/procfs.ts"
import { removeRendezvous, writeRendezvous } from "../layers/host/rendezvous.ts"
import { notifyReady, takeNotifySocket } from "../layers/host/serviceManager.ts"
import * as ApiServer from "../layers/http/ApiServer.ts"
import { ListenFailed } from "../layers/http/listenFailed.ts"
import { renderPrometheus } from "../layers/metrics/Metrics.ts"
import * as OtlpExport from "../layers/telemetry/OtlpExport.ts"
import { killAllGroupsNow } from "../platform/processGroups.ts"
import * as SqliteDatabase from "../layers/store/SqliteDatabase.ts"
import * as SqliteRuntimeLedger from "../layers/store/SqliteRuntimeLedger.ts"
import type * as PostgresDatabase from "../layers/store/PostgresDatabase.ts"
import * as AgentOperationsLive from "../layers/cluster/agentOperations.ts"
import * as RegistryOperations from "../layers/registry/registryOperations.ts"
import * as ClusterRunner from "../layers/cluster/ClusterRunner.ts"
import * as ClusterRuntimesLive from "../layers/cluster/ClusterRuntimes.ts"
import * as ClusterAgentEvents from "../layers/cluster/agentEvents.ts"
import { Admission } from "../services/Admission.ts"
import { AgentEvents } from "../services/AgentEvents.ts"
import { ClusterRuntimes } from "../services/ClusterRuntimes.ts"
import type { ProcessInspection } from "../services/ProcessInspection.ts"
import { AgentClose } from "../services/AgentClose.ts"
import { AgentOperations } from "../services/AgentOperations.ts"
import { AgentPlacement } from "../services/AgentPlacement.ts"
import { Sharding } from "effect/cluster"
import type { AgentRegistry } from "../services/AgentRegistry.ts"
import type { RuntimeCollector } from "../services/RuntimeCollector.ts"
import type { TurnJournal } from "../services/TurnJournal.ts"
import type { SqlClient } from "effect/sql"
import { DaemonLifecycle } from "../services/DaemonLifecycle.ts"
import { WarmReserve } from "../services/WarmReserve.ts"
import { makeConfigReload } from "../layers/reserve/configReload.ts"
import { logReady, servicesLayer } from "./daemon.ts"
import { shutDownOnHangup } from "./hangup.ts"
import { optionalPackageProblem } from "./optionalPackages.ts"
import { systemdUnit } from "./systemdUnit.ts"

/** The stages of opening, in order; each is reached once what it acquires is acquired. */
export type OpeningStage = "lock" | "storage" | "migrations" | "providers" | "listener" | "admission"

/** Watches the opening: a test makes a stage fail, or be interrupted, right after it is reached. */
export interface OpeningObserver {
  readonly reached: (stage: OpeningStage) => Effect.Effect<void>
}

const unobserved: OpeningObserver = { reached: () => Effect.void }

/**
 * Opening is mostly synchronous work (SQLite, files), during which the event loop never gets to
 * the signal handlers. Each stage ends with one turn of the loop, so a signal that arrived during
 * a stage interrupts the opening at its end.
 */
const letSignalsIn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

const stageDone = (observer: OpeningObserver, stage: OpeningStage) => Effect.andThen(letSignalsIn, observer.reached(stage))

/** What the process's exit code is decided by, once the daemon has run. */
export interface DaemonOutcome {
  /** Listening: from then on, an interruption (a signal) is an orderly shutdown. */
  running: boolean
  /** A retirement committed: the process exits with `retiredExitCode`. */
  retired: boolean
}

/** Once shutdown began: a second signal, or the deadline, ends the process at once (H3). */
const armForcedExit = (deadlineMillis: number) => {
  const force = () => {
    killAllGroupsNow()
    process.exit(1)
  }
  process.once("SIGINT", force)
  process.once("SIGTERM", force)
  process.once("SIGHUP", force)
  setTimeout(force, deadlineMillis).unref()
}

/** A flag's value alone, where the configuration has it. */
const at = (section: "agents" | "daemon", key: string) => (value: unknown) => ({ [section]: { [key]: value } })
/** A size flag decodes as any one size of `agents.memory` would (the watermarks' pairing is checked with the file). */
const size = (value: unknown) => ({ agents: { memory: { minAvailable: value } } })

const flagChecks: ReadonlyArray<{ readonly key: keyof ConfigOverrides; readonly flag: string; readonly config: (value: unknown) => unknown }> = [
  { key: "port", flag: "--port", config: at("daemon", "port") },
  { key: "host", flag: "--host", config: at("daemon", "host") },
  { key: "idlePeriod", flag: "--idle-period", config: at("agents", "idlePeriod") },
  { key: "sweepInterval", flag: "--sweep-interval", config: at("agents", "sweepInterval") },
  { key: "memoryHigh", flag: "--memory-high", config: size },
  { key: "memoryLow", flag: "--memory-low", config: size },
  { key: "minAvailable", flag: "--min-available", config: size },
  { key: "maxResident", flag: "--max-resident", config: at("agents", "maxResident") }
]

/** Each flag given is decoded alone, as the configuration decodes it, and its error names the flag. */
const checkFlags = (overrides: ConfigOverrides) =>
  Effect.forEach(flagChecks, ({ config, flag, key }) => {
    const value = overrides[key]
    return value === undefined ? Effect.void : decodeConfig(config(value)).pipe(
      Effect.mapError((error) => new ConfigInvalid({ message: `${flag}: ${error.message.split("\n")[0]}` }))
    )
  }, { discard: true })

/** The shutdown deadline a daemon with this configuration arms (H3). */
const shutdownDeadlineOf = (config: QuiesceConfig) => shutdownDeadlineMillis(Duration.toMillis(largestCloseGrace(config)))

/** Prints the systemd user unit of `root`'s daemon, with a stop timeout beyond its configured deadline. */
export const printSystemdUnit = Effect.fn("printSystemdUnit")(function*(root: string) {
  const config = yield* loadConfig(path.join(root, "config.json"), {})
  yield* Console.log(systemdUnit({
    node: process.execPath,
    nodeFlags: longRunningNodeFlags,
    // The built command, whichever way this one was started (from the sources too).
    cli: path.join(packageRoot, "bin/quiesce.mjs"),
    home: root,
    shutdownDeadlineMillis: shutdownDeadlineOf(config),
    path: process.env["PATH"]
  }))
})

/** Runs the daemon of `root` until a signal, or until it retires itself; `outcome` follows it. */
// Untraced: a span here would be the parent of every span the daemon makes in its lifetime, one
// trace for all of them; requests and sweeps each start their own trace instead.
export const runDaemon = Effect.fnUntraced(function*(
  root: string,
  overrides: ConfigOverrides,
  daemonIdleTimeout: string | undefined,
  outcome: DaemonOutcome,
  observer: OpeningObserver = unobserved
) {
  // A closed terminal stops an opening as it stops a running daemon: in order (SIGTERM).
  yield* shutDownOnHangup
  // Configuration is checked before anything is locked, opened or listening; a bad flag is
  // named as the flag, not as the configuration path it overrides.
  yield* checkFlags(overrides)
  const config = yield* loadConfig(path.join(root, "config.json"), overrides)
  // A hub that launches a daemon says so (its default is then the timeout's source); it is not
  // passed on to the agents' processes.
  const launchedByHub = process.env[launchedByHubVariable] === "1"
  delete process.env[launchedByHubVariable]
  const notifySocket = takeNotifySocket()
  const idleTimeout = yield* resolveIdleTimeout(daemonIdleTimeout, config, launchedByHub ? "hub" : "flag")
  yield* Effect.scoped(Effect.gen(function*() {
    const homeContext = yield* Layer.build(HomeLive.layer(root))
    const homeService = Context.get(homeContext, Home)
    // From here on the log goes to the home as well (quiesce logs), for the daemon and every fiber it starts.
    const fileLogger = yield* rotatingLogFile(root)
    yield* stageDone(observer, "lock").pipe(
      Effect.andThen(serveHome({ root, config, overrides, idleTimeout, home: homeService, outcome, observer, notifySocket })),
      // What ended the daemon goes to its log file too (the terminal gets it from the CLI), so
      // that quiesce logs says why a start failed.
      Effect.tapCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.void
          : Effect.logError("Quiesce stopped on an error", cause).pipe(
            Effect.provideService(Logger.CurrentLoggers, new Set([fileLogger]))
          )
      ),
      Effect.provideServiceEffect(Logger.CurrentLoggers, Effect.map(Logger.CurrentLoggers, (loggers) => new Set([...loggers, fileLogger])))
    )
  }).pipe(
    // OpenTelemetry export when OTEL_EXPORTER_OTLP_ENDPOINT is set; nothing at all otherwise.
    Effect.provide(OtlpExport.layer("quiesce-daemon"))
  ))
})

/** The PostgreSQL driver is an optional dependency, loaded only by a daemon that joins a cluster. */
const loadPostgres = Effect.tryPromise({
  try: () => import("../layers/store/PostgresDatabase.ts"),
  catch: (error) =>
    new ClusterJoinFailed({
      message: `A cluster ${optionalPackageProblem(["@effect/sql-pg"], error)}`
    })
})

/** This daemon's side of the cluster, over its services and the shared database. */
const joinCluster = Effect.fnUntraced(function*(
  cluster: ClusterConfig,
  services: Context.Context<AgentRegistry | RuntimeCollector | TurnJournal | ProcessInspection | AgentEvents>,
  shared: Context.Context<SqlClient.SqlClient>,
  postgres: typeof PostgresDatabase
) {
  const runner = yield* Layer.build(
    ClusterRunner.layer({
      host: cluster.runner.host,
      port: cluster.runner.port,
      shardsPerGroup: cluster.shardsPerGroup,
      shardGroup: cluster.group,
      shardGroups: cluster.groups,
      shardLockExpiration: cluster.shardLockExpiration,
      shardLockRefreshInterval: cluster.shardLockRefreshInterval
    }).pipe(Layer.provide(Layer.succeedContext(Context.merge(services, shared))))
  ).pipe(Effect.mapError((error) => new ClusterJoinFailed({ message: `Cannot join the cluster as ${cluster.runner.host}:${cluster.runner.port}: ${error.message}` })))
  const operations = yield* Layer.build(
    Layer.mergeAll(AgentOperationsLive.clusterLayer(cluster.group), AgentOperationsLive.clusterCloseLayer).pipe(
      Layer.provide(Layer.succeedContext(runner))
    )
  )
  // Readers of an agent's live events follow them on the runner that hosts it; publishing stays here.
  const events = yield* Layer.build(
    ClusterAgentEvents.layer.pipe(Layer.provide(Layer.succeedContext(Context.merge(services, runner))))
  )
  // This runner's runtimes, reported to the shared database for `GET /v1/runtimes?scope=cluster` on any runner.
  const runtimes = yield* Layer.build(
    ClusterRuntimesLive.layer(`${cluster.runner.host}:${cluster.runner.port}`).pipe(
      Layer.provide(Layer.succeedContext(Context.merge(services, shared)))
    )
  ).pipe(Effect.mapError((error) => new ClusterJoinFailed({ message: `Cannot report this runner's runtimes to the cluster: ${error.message}` })))
  yield* Effect.logInfo("Joined the cluster").pipe(
    Effect.annotateLogs({
      runner: `${cluster.runner.host}:${cluster.runner.port}`,
      group: cluster.group,
      storage: postgres.describeUrl(cluster.storage.url)
    })
  )
  const sharding = Context.get(runner, Sharding.Sharding)
  return {
    operations: Context.get(operations, AgentOperations),
    close: Context.get(operations, AgentClose),
    events: Context.get(events, AgentEvents),
    runtimes: Context.get(runtimes, ClusterRuntimes),
    hostsHere: (agentId: string) => ClusterRunner.hostsAgent(sharding, agentId)
  }
})

interface Opening {
  readonly root: string
  readonly config: QuiesceConfig
  readonly overrides: ConfigOverrides
  readonly idleTimeout: DaemonIdentity["idleTimeout"]
  readonly home: Home["Service"]
  readonly outcome: DaemonOutcome
  readonly observer: OpeningObserver
  readonly notifySocket: string | undefined
}

/** Opens the rest of the home once it is locked, then serves it until a signal or a retirement. */
const serveHome = Effect.fnUntraced(function*({ config, home, idleTimeout, notifySocket, observer, outcome, overrides, root }: Opening) {
  // Registered before the services, so it runs after they have closed and before the lock goes.
  yield* Effect.addFinalizer(() => removeRendezvous(root))
  const deadlineMillis = shutdownDeadlineOf(config)
  const identity: DaemonIdentity = {
    pid: process.pid,
    startTime: readStat(process.pid)?.startTime ?? null,
    instanceId: randomBytes(8).toString("hex"),
    host: config.daemon.host,
    port: config.daemon.port,
    protocolVersion: daemonProtocolVersion,
    packageVersion,
    idleTimeout,
    shutdownDeadlineMillis: deadlineMillis
  }
  const database = yield* Layer.build(SqliteDatabase.layer(home.databaseFile))
  const pluginHome = config.cluster?.pluginHome
  if (pluginHome !== undefined) {
    yield* Effect.try({
      try: () => fs.mkdirSync(pluginHome, { recursive: true, mode: 0o700 }),
      catch: (error) => new ClusterJoinFailed({ message: `Cannot create cluster.pluginHome ${pluginHome}: ${String(error)}` })
    })
  }
  // A cluster's runner keeps what the runners share on PostgreSQL; its process ledger stays local.
  const cluster = config.cluster
  const sharing = cluster === undefined ? undefined : yield* Effect.gen(function*() {
    const postgres = yield* loadPostgres
    return { cluster, postgres, shared: yield* Layer.build(postgres.layer(cluster.storage.url)) }
  })
  yield* stageDone(observer, "storage")
  const stores = yield* Layer.build(
    sharing === undefined
      ? SqliteDatabase.storesFromClient.pipe(Layer.provide(Layer.succeedContext(database)))
      : Layer.mergeAll(
        sharing.postgres.sharedStoresFromClient.pipe(Layer.provide(Layer.succeedContext(sharing.shared))),
        SqliteRuntimeLedger.layerFromClient.pipe(Layer.provide(Layer.succeedContext(database)))
      )
  )
  yield* stageDone(observer, "migrations")
  // A provider whose command is missing serves nothing, but the others do: said, not fatal.
  yield* Effect.forEach(missingProviderCommands(config), (problem) =>
    Effect.logWarning(`${problem}: creating or resuming its agents fails until it is installed (quiesce config check)`), { discard: true })
  // A runner hosts the agents of the shards it holds: none until it has joined.
  let hostsHere: (agentId: string) => boolean = config.cluster === undefined ? () => true : () => false
  // Once it has joined, message delivery and finish watches go to each agent's runner too.
  let clusterOperations: AgentOperations["Service"] | undefined
  const operations = sharing === undefined ? undefined : RegistryOperations.layerVia(() => clusterOperations)
  const local = yield* Layer.build(servicesLayer(home, config, identity, Layer.succeedContext(stores), operations)).pipe(
    Effect.provideService(AgentPlacement, { hostsHere: (agentId) => hostsHere(agentId) })
  )
  // On a cluster, this runner joins it, and the API's operations on an agent go to the agent's runner.
  let services = local
  if (sharing !== undefined) {
    const joined = yield* joinCluster(sharing.cluster, local, sharing.shared, sharing.postgres)
    hostsHere = joined.hostsHere
    clusterOperations = joined.operations
    services = local.pipe(
      Context.add(AgentOperations, joined.operations),
      Context.add(AgentClose, joined.close),
      Context.add(AgentEvents, joined.events),
      Context.add(ClusterRuntimes, joined.runtimes)
    )
  }
  yield* stageDone(observer, "providers")
  const reloadConfig = yield* makeConfigReload(path.join(root, "config.json"), overrides, config).pipe(
    Effect.provideService(WarmReserve, Context.get(services, WarmReserve))
  )
  const running = yield* Layer.build(ApiServer.layer({
    host: config.daemon.host,
    port: config.daemon.port,
    token: home.token,
    maxRequestBytes: config.daemon.maxRequestBytes,
    renderMetrics: renderPrometheus,
    reloadConfig,
    logRequests: false
  }).pipe(Layer.provide(Layer.succeedContext(services)))).pipe(
    Effect.catchTag("ServeError", (error) => Effect.fail(ListenFailed.of(config.daemon.host, config.daemon.port, error.cause, "--port or daemon.port in config.json")))
  )
  yield* stageDone(observer, "listener")
  const admission = Context.get(running, Admission)
  // Registered last, so it runs first at shutdown: new work is refused (503) at once, every
  // caller still waiting on a turn is answered (503, naming the turn) and every event stream ends,
  // before the listener stops (it would wait for open streams).
  yield* Effect.addFinalizer(() =>
    admission.close.pipe(
      Effect.andThen(Context.get(services, AgentEvents).endStreams),
      Effect.andThen(Effect.logInfo("Quiesce shutting down: admission closed"))
    )
  )
  yield* admission.admit
  yield* stageDone(observer, "admission")
  // The one readiness event. Where this daemon listens and who it is, for the CLI and a hub (flags
  // may differ from the file, and port 0 means whichever port the system gave).
  const address = Context.get(running, HttpServer.HttpServer).address
  const listening: DaemonIdentity = { ...identity, port: address._tag === "UnixPathAddress" ? identity.port : address.port }
  yield* writeRendezvous(root, listening)
  yield* home.opened
  yield* logReady(home, config, listening)
  yield* notifyReady(notifySocket, `Listening on http://${listening.host}:${listening.port}`)
  outcome.running = true
  // Until a signal, or until the daemon retires itself: then everything closes in order.
  yield* Context.get(services, DaemonLifecycle).retired.pipe(
    Effect.onInterrupt(() => Effect.sync(() => armForcedExit(deadlineMillis)))
  )
  outcome.retired = true
  armForcedExit(deadlineMillis)
})
