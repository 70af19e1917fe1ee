import { Deferred, Duration, Effect, Exit } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { maxLineBytes } from "../../../domain/pluginProtocol.ts"
import { groupAlive, signalGroup, trackGroup } from "../../../platform/processGroups.ts"

export interface PluginCommand {
  /** The executable and its arguments. */
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>> | undefined
}

export interface PluginProcessHandlers {
  /** One complete line of stdout, at most `maxLineBytes` long. */
  readonly onLine: (line: string) => void
  /** A line longer than `maxLineBytes`; its content is dropped. */
  readonly onOversizedLine: (bytes: number) => void
}

/**
 * One plugin child process in a process group of its own (its pid is the group id), so that the
 * runtime's whole tree — the plugin and everything it started — is ended together. Output is
 * always drained, so a chatty child never blocks on a full pipe.
 */
export interface PluginProcess {
  readonly pid: number
  readonly write: (line: string) => boolean
  /** Completes when the process has exited and been reaped. */
  readonly exited: Deferred.Deferred<number | null>
  /** Ends the process group: SIGTERM, then SIGKILL after `grace`; waits until it has exited. */
  readonly terminate: (grace: Duration.Input) => Effect.Effect<void>
  /** The last few KB of its stderr, trimmed: what a process that refuses to start says about why. */
  readonly stderrTail: () => string
}

/**
 * Runs a provider's line reader until `next` reports the process is done (false), so a
 * session's reader ends with its process instead of waiting on its queue for ever.
 */
export const readUntilDone = <E, R>(next: Effect.Effect<boolean, E, R>): Effect.Effect<void, E, R> => {
  let more = true
  return Effect.whileLoop({ while: () => more, body: () => next, step: (again) => { more = again } })
}

const splitLines = (handlers: PluginProcessHandlers) => {
  let buffer = ""
  let discarding = 0
  return (chunk: string) => {
    let start = 0
    for (let newline = chunk.indexOf("\n"); newline !== -1; newline = chunk.indexOf("\n", start)) {
      const piece = chunk.slice(start, newline)
      start = newline + 1
      if (discarding > 0) {
        handlers.onOversizedLine(discarding + Buffer.byteLength(piece))
        discarding = 0
        continue
      }
      const line = buffer + piece
      buffer = ""
      if (Buffer.byteLength(line) > maxLineBytes) handlers.onOversizedLine(Buffer.byteLength(line))
      else if (line.trim() !== "") handlers.onLine(line)
    }
    const rest = chunk.slice(start)
    if (discarding > 0) discarding += Buffer.byteLength(rest)
    else {
      buffer += rest
      if (Buffer.byteLength(buffer) > maxLineBytes) {
        discarding = Buffer.byteLength(buffer)
        buffer = ""
      }
    }
  }
}

/**
 * Spawns `command` with piped stdio as the leader of a process group of its own (its pid is the
 * group id), its environment merged over this process's. A synchronous spawn failure is returned.
 */
export const spawnGroupLeader = (command: PluginCommand, cwd: string): ChildProcess | Error => {
  try {
    return spawn(command.command, [...command.args], {
      cwd,
      env: { ...process.env, ...command.env },
      detached: true,
      stdio: ["pipe", "pipe", "pipe"]
    })
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error))
  }
}

/**
 * Ends the process group led by `pid`: SIGTERM, then SIGKILL after `grace` (or at once if the
 * leader is gone while members remain); waits until the leader has exited (`exited`).
 */
export const terminateGroup = <A>(pid: number, exited: Deferred.Deferred<A>, grace: Duration.Input): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (Deferred.isDoneUnsafe(exited) && !groupAlive(pid)) return
    signalGroup(pid, "SIGTERM")
    const done = yield* Deferred.await(exited).pipe(Effect.timeoutOption(Duration.fromInputUnsafe(grace)))
    // The leader may be gone while jobs it started still run: the group is ended either way.
    if (done._tag === "None" || groupAlive(pid)) signalGroup(pid, "SIGKILL")
    yield* Deferred.await(exited)
  })

/** How much of a process's stderr is kept. */
const stderrTailChars = 4096

/** How long an exited process's stdout may still deliver data before the exit is reported. */
const exitDrainMillis = 200

/** Starts the plugin in its own process group. */
export const startPluginProcess = (
  plugin: PluginCommand,
  cwd: string,
  handlers: PluginProcessHandlers
): Effect.Effect<PluginProcess, Error> =>
  Effect.callback<PluginProcess, Error>((resume) => {
    const child = spawnGroupLeader(plugin, cwd)
    if (child instanceof Error) {
      resume(Effect.fail(child))
      return
    }
    const exited = Deferred.makeUnsafe<number | null>()
    // Node may report the exit before the last stdout data: the exit completes once stdout has
    // ended too, so lines written just before exiting are read first. A descendant holding stdout
    // open must not hide the exit, hence the bound.
    let stdoutEnded = child.stdout === null
    child.stdout?.once("end", () => (stdoutEnded = true))
    child.on("exit", (code) => {
      const done = () => Deferred.doneUnsafe(exited, Exit.succeed(code))
      if (stdoutEnded || child.stdout === null) return done()
      const bound = setTimeout(done, exitDrainMillis)
      child.stdout.once("end", () => {
        clearTimeout(bound)
        done()
      })
    })
    child.stdout?.setEncoding("utf8")
    child.stdout?.on("data", splitLines(handlers))
    let stderrTail = ""
    child.stderr?.setEncoding("utf8")
    child.stderr?.on("data", (text: string) => {
      stderrTail = (stderrTail + text).slice(-stderrTailChars)
    })
    // Writes after the plugin died fail with EPIPE; the exit is what reports it.
    child.stdin?.on("error", () => {})
    child.once("error", (error) => {
      Deferred.doneUnsafe(exited, Exit.succeed(null))
      resume(Effect.fail(error))
    })
    child.once("spawn", () => {
      const pid = child.pid
      if (pid === undefined) return resume(Effect.fail(new Error(`${plugin.command} started without a pid`)))
      trackGroup(pid, (listener) => child.once("exit", listener))
      resume(Effect.succeed({
        pid,
        write: (line) => child.stdin?.write(line + "\n") ?? false,
        exited,
        terminate: (grace) => terminateGroup(pid, exited, grace),
        stderrTail: () => stderrTail.trim()
      }))
    })
  })
