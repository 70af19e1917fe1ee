/**
 * Running the daemon of a home: configuration, the home's lock and token, the services, the HTTP
 * API and the record the CLI and a hub find it by. The CLI loads this module only for
 * `quiesce daemon`, so a client command never loads the providers and the server.
 */
import { Cause, Context, Effect, Layer, Logger } from "effect"
import { HttpServer } from "effect/http"
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import { decodeConfig, type QuiesceConfig } from "../domain/config.ts"
import {
  daemonProtocolVersion,
  type DaemonIdentity,
  daemonShutdownDeadlineMillis,
  launchedByHubVariable
} from "../domain/retirement.ts"
import { packageVersion } from "../domain/version.ts"
import { Home } from "../layers/host/Home.ts"
import * as HomeLive from "../layers/host/Home.ts"
import { ConfigInvalid, type ConfigOverrides, loadConfig, resolveIdleTimeout } from "../layers/host/loadConfig.ts"
import { rotatingLogFile } from "../layers/host/logFile.ts"
import { readStat } from "../layers/host/ProcessInspectionProcfs.ts"
import { removeRendezvous, writeRendezvous } from "../layers/host/rendezvous.ts"
import * as ApiServer from "../layers/http/ApiServer.ts"
import { renderPrometheus } from "../layers/metrics/Metrics.ts"
import { killAllGroupsNow } from "../layers/providers/plugin/PluginProcess.ts"
import { DaemonLifecycle } from "../services/DaemonLifecycle.ts"
import { logReady, servicesLayer } from "./daemon.ts"
import { shutDownOnHangup } from "./hangup.ts"

/** What the process's exit code is decided by, once the daemon has run. */
export interface DaemonOutcome {
  /** Listening: from then on, an interruption (a signal) is an orderly shutdown. */
  running: boolean
  /** A retirement committed: the process exits with `retiredExitCode`. */
  retired: boolean
}

/** Once shutdown began: a second signal, or the deadline, ends the process at once (H3). */
const armForcedExit = () => {
  const force = () => {
    killAllGroupsNow()
    process.exit(1)
  }
  process.once("SIGINT", force)
  process.once("SIGTERM", force)
  process.once("SIGHUP", force)
  setTimeout(force, daemonShutdownDeadlineMillis).unref()
}

const flagChecks: ReadonlyArray<{ readonly key: keyof ConfigOverrides; readonly flag: string; readonly section: "agents" | "daemon" }> = [
  { key: "port", flag: "--port", section: "daemon" },
  { key: "host", flag: "--host", section: "daemon" },
  { key: "idlePeriod", flag: "--idle-period", section: "agents" },
  { key: "sweepInterval", flag: "--sweep-interval", section: "agents" }
]

/** Each flag given is decoded alone, as the configuration decodes it, and its error names the flag. */
const checkFlags = (overrides: ConfigOverrides) =>
  Effect.forEach(flagChecks, ({ flag, key, section }) => {
    const value = overrides[key]
    return value === undefined ? Effect.void : decodeConfig({ [section]: { [key]: value } }).pipe(
      Effect.mapError((error) => new ConfigInvalid({ message: `${flag}: ${error.message.split("\n")[0]}` }))
    )
  }, { discard: true })

/** Runs the daemon of `root` until a signal, or until it retires itself; `outcome` follows it. */
export const runDaemon = Effect.fn("runDaemon")(function*(
  root: string,
  overrides: ConfigOverrides,
  daemonIdleTimeout: string | undefined,
  outcome: DaemonOutcome
) {
  // Configuration is checked before anything is locked, opened or listening; a bad flag is
  // named as the flag, not as the configuration path it overrides.
  yield* checkFlags(overrides)
  const config = yield* loadConfig(path.join(root, "config.json"), overrides)
  // A hub that launches a daemon says so (its default is then the timeout's source); it is not
  // passed on to the agents' processes.
  const launchedByHub = process.env[launchedByHubVariable] === "1"
  delete process.env[launchedByHubVariable]
  const idleTimeout = yield* resolveIdleTimeout(daemonIdleTimeout, config, launchedByHub ? "hub" : "flag")
  yield* Effect.scoped(Effect.gen(function*() {
    const homeContext = yield* Layer.build(HomeLive.layer(root))
    const homeService = Context.get(homeContext, Home)
    // From here on the log goes to the home as well (quiesce logs), for the daemon and every fiber it starts.
    const fileLogger = yield* rotatingLogFile(root)
    yield* serveHome(root, config, idleTimeout, homeService, outcome).pipe(
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
  }))
})

/** Serves the home once it is locked: the services, the API, the record; until a signal or a retirement. */
const serveHome = Effect.fnUntraced(function*(
  root: string,
  config: QuiesceConfig,
  idleTimeout: DaemonIdentity["idleTimeout"],
  homeService: Home["Service"],
  outcome: DaemonOutcome
) {
  // Registered before the services, so it runs after they have closed and before the lock goes.
  yield* Effect.addFinalizer(() => removeRendezvous(root))
  const identity: DaemonIdentity = {
    pid: process.pid,
    startTime: readStat(process.pid)?.startTime ?? null,
    instanceId: randomBytes(8).toString("hex"),
    host: config.daemon.host,
    port: config.daemon.port,
    protocolVersion: daemonProtocolVersion,
    packageVersion,
    idleTimeout
  }
  const api = ApiServer.layer({
    host: config.daemon.host,
    port: config.daemon.port,
    token: homeService.token,
    maxRequestBytes: config.daemon.maxRequestBytes,
    renderMetrics: renderPrometheus,
    logRequests: false
  }).pipe(Layer.provideMerge(servicesLayer(homeService, config, identity)))
  const running = yield* Layer.build(api)
  // Registered last, so it runs first at shutdown: new work is refused (503) at once, and every
  // caller still waiting on a turn is answered (503, naming the turn) before the listener stops.
  yield* Effect.addFinalizer(() =>
    Context.get(running, ApiServer.Admission).close.pipe(
      Effect.andThen(Effect.logInfo("Quiesce shutting down: admission closed"))
    )
  )
  // Where this daemon listens and who it is, for the CLI and a hub (flags may differ from the
  // file, and port 0 means whichever port the system gave).
  const address = Context.get(running, HttpServer.HttpServer).address
  const listening: DaemonIdentity = { ...identity, port: address._tag === "UnixPathAddress" ? identity.port : address.port }
  yield* writeRendezvous(root, listening)
  yield* logReady(homeService, config, listening)
  outcome.running = true
  yield* shutDownOnHangup
  // Until a signal, or until the daemon retires itself: then everything closes in order.
  yield* Context.get(running, DaemonLifecycle).retired.pipe(
    Effect.onInterrupt(() => Effect.sync(armForcedExit))
  )
  outcome.retired = true
  armForcedExit()
})
