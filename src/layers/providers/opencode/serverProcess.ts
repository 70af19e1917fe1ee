/**
 * One `opencode serve` process for one agent runtime, in a process group of its own (started with
 * the plugin spawner, so it is tracked and always reaped).
 *
 * The port: `--port 0` does not mean "any free port" to 1.18.33 — it tries 4096 first — so the
 * address is read from the line the server prints once it listens
 * (`opencode server listening on http://127.0.0.1:4096`), then `GET /global/health` must answer.
 */
import { Deferred, Duration, Effect, Schedule } from "effect"
import { Health } from "./apiTypes.ts"
import { type Endpoint, getJson } from "./http.ts"
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
  /** The end of what it wrote to stderr, for failure messages. */
  readonly stderrTail: () => string
}

const listeningLine = /listening on (https?:\/\/\S+)/

/** The last few KB of stderr, for the message when the server will not start. */
const tail = () => {
  let text = ""
  return {
    add: (chunk: string) => {
      text = (text + chunk).slice(-2000)
    },
    get: () => text.trim()
  }
}

/** Starts the server and waits until it answers; the process is ended on any failure. */
export const startServer = (launch: ServerLaunch): Effect.Effect<OpenCodeServer, string> =>
  Effect.gen(function*() {
    const address = Deferred.makeUnsafe<string>()
    const stderr = tail()
    const cli = yield* startPluginProcess({ command: launch.command, args: launch.args, env: launch.env }, launch.cwd, {
      onLine: (line) => {
        const match = listeningLine.exec(line)
        if (match !== null) Deferred.doneUnsafe(address, Effect.succeed(match[1]!))
      },
      onOversizedLine: () => {},
      onStderr: stderr.add
    }).pipe(Effect.mapError((error) => `cannot start ${launch.command}: ${error.message}`))
    launch.onSpawn?.(cli.pid)

    const ready = Effect.gen(function*() {
      const baseUrl = yield* Effect.raceFirst(
        Deferred.await(address),
        Deferred.await(cli.exited).pipe(
          Effect.flatMap((code) => Effect.fail(`exited with code ${code} before listening: ${stderr.get()}`))
        )
      )
      const endpoint: Endpoint = { baseUrl }
      // It listens a moment before its routes are mounted: a few quick retries, bounded by the timeout.
      const health = yield* getJson(endpoint, "global/health", {}, Health).pipe(
        Effect.retry(Schedule.spaced("100 millis")),
        Effect.mapError((bad) => bad.message)
      )
      return { process: cli, endpoint, version: health.version, stderrTail: stderr.get }
    })
    const timeout = Duration.fromInputUnsafe(launch.startTimeout)
    return yield* ready.pipe(
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () => Effect.fail(`not ready within ${Duration.format(timeout)}: ${stderr.get()}`)
      }),
      Effect.onError(() => cli.terminate("1 second"))
    )
  })
