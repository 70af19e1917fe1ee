/**
 * The hub process (R3–R6): one per user and hub home (a lock), on loopback, with a token of its
 * own. It launches each managed home's daemon on demand, detached, so that the hub stopping or
 * crashing never takes a daemon with it; a restarted hub finds them again through their records.
 */
import { Context, Effect, Layer } from "effect"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { HttpServer } from "effect/http"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { HomeUnavailable } from "../services/Home.ts"
import { acquireLock, readOrCreateToken } from "../layers/host/Home.ts"
import * as ProcessInspectionProcfs from "../layers/host/ProcessInspectionProcfs.ts"
import { readStat } from "../platform/procfs.ts"
import * as HubDaemons from "../layers/hub/HubDaemons.ts"
import { hubDefault, hubTokenFile, readHubConfig, removeHubAddress, writeHubAddress } from "../layers/hub/hubFiles.ts"
import * as HubServer from "../layers/http/HubServer.ts"
import { ListenFailed } from "../layers/http/listenFailed.ts"
import * as OtlpExport from "../layers/telemetry/OtlpExport.ts"
import { shutDownOnHangup } from "./hangup.ts"


/** The hub listens on loopback only. */
const hubHost = "127.0.0.1"

/** How to run the hub: its daemons' options, and the loopback port it listens on (0: any free port). */
export interface HubRunOptions extends HubDaemons.HubDaemonsOptions {
  readonly port: number
}

/** Runs the hub until it is interrupted (a signal); its daemons keep running. */
export const runHub = (options: HubRunOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const { hubHome } = options
    yield* shutDownOnHangup
    yield* Effect.try({
      try: () => fs.mkdirSync(hubHome, { recursive: true, mode: 0o700 }),
      catch: (error) =>
        new HomeUnavailable({ home: hubHome, message: `Cannot create ${hubHome}: ${error instanceof Error ? error.message : String(error)}` })
    })
    // hub.json is checked before anything is locked or listening.
    const config = yield* readHubConfig(hubHome)
    yield* acquireLock(hubHome, "hub.lock", "Quiesce hub")
    const token = yield* readOrCreateToken(hubTokenFile(hubHome), hubHome)
    yield* Effect.addFinalizer(() => removeHubAddress(hubHome))
    const server = HubServer.layer({ host: hubHost, port: options.port, token }).pipe(
      Layer.provide(HubDaemons.layer(options)),
      Layer.provide(Layer.mergeAll(NodeHttpClient.layerNodeHttp, ProcessInspectionProcfs.layer()))
    )
    const running = yield* Layer.build(server).pipe(
      Effect.catchTag("ServeError", (error) => Effect.fail(ListenFailed.of(hubHost, options.port, error.cause, "quiesce hub --port")))
    )
    const address = Context.get(running, HttpServer.HttpServer).address
    const port = address._tag === "UnixPathAddress" ? options.port : address.port
    yield* writeHubAddress(hubHome, {
      pid: process.pid,
      startTime: readStat(process.pid)?.startTime ?? null,
      host: hubHost,
      port,
      instanceId: randomBytes(8).toString("hex")
    })
    yield* Effect.logInfo(`Quiesce hub ready on http://${hubHost}:${port}`).pipe(
      Effect.annotateLogs({
        hubHome,
        homes: config.homes.length,
        daemonIdleTimeout: `${hubDefault(config).value} (${hubDefault(config).source})`
      })
    )
    return yield* Effect.never
  }).pipe(
    // OpenTelemetry export when OTEL_EXPORTER_OTLP_ENDPOINT is set; nothing at all otherwise.
    Effect.provide(OtlpExport.layer("quiesce-hub"))
  ))
