/**
 * One `opencode serve` process for one agent runtime, in a process group of its own (started with
 * the plugin spawner, so it is tracked and always reaped).
 *
 * The port: `--port 0` does not mean "any free port" to 1.18.33 — it tries 4096 first — so the
 * address is read from the line the server prints once it listens
 * (`opencode server listening on http://127.0.0.1:4096`), then `GET /global/health` must answer.
 *
 * Each server gets a password of its own (`OPENCODE_SERVER_PASSWORD`, 32 random bytes) and every
 * request carries it as HTTP basic auth, user `opencode`: other local users cannot drive it.
 */
import * as http from "node:http"
import { randomBytes } from "node:crypto"
import { Deferred, Duration, Effect, Schedule, Schema } from "effect"
import { Health } from "./apiTypes.ts"
import { basicAuth, type Endpoint, getJson } from "./http.ts"
import { type PluginProcess, startPluginProcess } from "../plugin/PluginProcess.ts"

export interface ServerLaunch {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly cwd: string
  /** How long the server may take to listen and answer its health route. */
  readonly startTimeout: Duration.Input
  readonly onSpawn?: ((pid: number) => void) | undefined
}

export interface OpenCodeServer {
  readonly process: PluginProcess
  readonly endpoint: Endpoint
  /** The release, from `GET /global/health`. */
  readonly version: string
}

/** The server could not be started, or did not answer in time. */
export class OpenCodeServerFailed extends Schema.TaggedError<OpenCodeServerFailed>()("OpenCodeServerFailed", {
  message: Schema.String
}) {}

/** The user name the server checks (1.18.33 reads `OPENCODE_SERVER_USERNAME`, default "opencode"). */
const serverUser = "opencode"

const listeningLine = /listening on (https?:\/\/\S+)/


/** Starts the server and waits until it answers; the process is ended on any failure. */
export const startServer = (launch: ServerLaunch): Effect.Effect<OpenCodeServer, OpenCodeServerFailed> =>
  Effect.gen(function*() {
    const address = Deferred.makeUnsafe<string>()
    const password = randomBytes(32).toString("base64url")
    // Keep-alive to this server only: a probe makes several requests, each would pay a connect.
    const connections = new http.Agent({ keepAlive: true, maxSockets: 8 })
    const dropConnections = Effect.sync(() => connections.destroy())
    const env = { ...launch.env, OPENCODE_SERVER_USERNAME: serverUser, OPENCODE_SERVER_PASSWORD: password }
    const cli = yield* startPluginProcess({ command: launch.command, args: launch.args, env }, launch.cwd, {
      onLine: (line) => {
        const match = listeningLine.exec(line)
        if (match !== null) Deferred.doneUnsafe(address, Effect.succeed(match[1]!))
      },
      onOversizedLine: () => {}
    }).pipe(Effect.mapError((error) => new OpenCodeServerFailed({ message: `cannot start ${launch.command}: ${error.message}` }))
    )
    launch.onSpawn?.(cli.pid)

    const ready = Effect.gen(function*() {
      const baseUrl = yield* Effect.raceFirst(
        Deferred.await(address),
        Deferred.await(cli.exited).pipe(
          Effect.flatMap((code) =>
            Effect.fail(new OpenCodeServerFailed({ message: `exited with code ${code} before listening: ${cli.stderrTail()}` }))
          )
        )
      )
      const endpoint: Endpoint = { baseUrl, headers: basicAuth(serverUser, password), connections }
      // It listens a moment before its routes are mounted: a few quick retries, bounded by the timeout.
      const health = yield* getJson(endpoint, "global/health", {}, Health).pipe(
        Effect.retry(Schedule.spaced("100 millis")),
        Effect.mapError((bad) => new OpenCodeServerFailed({ message: bad.message }))
      )
      // The server's pooled connections go with it, so a later server on the same port never gets one.
      const process = { ...cli, terminate: (grace: Duration.Input) => Effect.ensuring(cli.terminate(grace), dropConnections) }
      return { process, endpoint, version: health.version }
    })
    const timeout = Duration.fromInputUnsafe(launch.startTimeout)
    return yield* ready.pipe(
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () =>
          Effect.fail(new OpenCodeServerFailed({ message: `not ready within ${Duration.format(timeout)}: ${cli.stderrTail()}` }))
      }),
      Effect.onError(() => Effect.ensuring(cli.terminate("1 second"), dropConnections))
    )
  })
