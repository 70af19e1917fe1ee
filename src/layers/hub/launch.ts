/**
 * Starting a home's daemon: `quiesce daemon --home DIR --port 0 --daemon-idle-timeout <hub
 * default>` in a session and process group of its own, detached and unreferenced so that neither a
 * hub restart nor a hub crash takes it down, its output appended to `<hub home>/logs/NAME.log`. It
 * is found through the `daemon.json` it writes once it is ready.
 */
import { Effect, Option } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { DaemonStartFailed, type ManagedHome } from "../../domain/hub.ts"
import { type DaemonIdentity, launchedByHubVariable, retiredExitCode } from "../../domain/retirement.ts"
import { longRunningNodeFlags, packageRoot, runsFromSources } from "../../domain/version.ts"
import { readRendezvous } from "../host/rendezvous.ts"
import { daemonLogFile } from "./hubFiles.ts"

// The `quiesce` command: from the sources, or as installed (bin/quiesce.mjs runs the CLI's bundle).
const cliPath = path.join(packageRoot, runsFromSources ? "src/programs/cli/main.ts" : "bin/quiesce.mjs")

export interface LaunchOptions {
  readonly hubHome: string
  readonly home: ManagedHome
  /** The Go duration passed as `--daemon-idle-timeout`. */
  readonly idleTimeout: string
  /** How long the daemon may take to become ready. */
  readonly readyTimeoutMillis: number
}

/** The end of a log from `offset`, for an error message. */
const tail = (file: string, offset: number) => {
  try {
    const text = fs.readFileSync(file).subarray(offset).toString("utf8").trim()
    const lines = text.split("\n").slice(-6).join("\n")
    return lines === "" ? "(it wrote nothing)" : lines
  } catch {
    return "(its log cannot be read)"
  }
}

const endGroup = (pid: number) => {
  try {
    process.kill(-pid, "SIGTERM")
  } catch {
    // Already gone.
  }
}

/**
 * Starts the home's daemon and waits until its record names it (or it has already retired: exit
 * 75, "retired"). Fails with `DaemonStartFailed`
 * (the log's last lines in the message) when it exits first or is not ready in time; one that is
 * not ready in time is ended (this hub started it, and it never admitted anything).
 */
export const launchDaemon = (options: LaunchOptions): Effect.Effect<DaemonIdentity | "retired", DaemonStartFailed> =>
  Effect.callback<DaemonIdentity | "retired", DaemonStartFailed>((resume) => {
    const { home } = options
    const log = daemonLogFile(options.hubHome, home.name)
    const fail = (message: string) => resume(Effect.fail(new DaemonStartFailed({ name: home.name, message })))
    let offset = 0
    let descriptor: number
    try {
      fs.mkdirSync(path.dirname(log), { recursive: true, mode: 0o700 })
      descriptor = fs.openSync(log, "a", 0o600)
      offset = fs.fstatSync(descriptor).size
    } catch (error) {
      fail(`Cannot open the daemon's log ${log}: ${error instanceof Error ? error.message : String(error)}`)
      return
    }
    const args = [...longRunningNodeFlags, cliPath, "--home", home.dir, "daemon", "--port", "0", "--daemon-idle-timeout", options.idleTimeout]
    let child: ChildProcess
    try {
      child = spawn(process.execPath, args, {
        detached: true,
        stdio: ["ignore", descriptor, descriptor],
        env: { ...process.env, [launchedByHubVariable]: "1" }
      })
    } catch (error) {
      fail(`Cannot start the daemon of ${home.name}: ${error instanceof Error ? error.message : String(error)}`)
      return
    } finally {
      fs.closeSync(descriptor)
    }
    // The hub's event loop must not wait for its daemons, nor they for it.
    child.unref()
    let settled = false
    const settle = () => {
      settled = true
      clearInterval(poll)
      clearTimeout(deadline)
    }
    child.once("error", (error) => {
      if (settled) return
      settle()
      fail(`Cannot start the daemon of ${home.name}: ${error.message}`)
    })
    child.once("exit", (code, signal) => {
      if (settled) return
      settle()
      // Ready, and already retired (a very short idle timeout): a clean exit, not a failure.
      if (code === retiredExitCode) return resume(Effect.succeed("retired"))
      fail(
        `The daemon of ${home.name} (${home.dir}) exited before it was ready (${
          signal === null ? `exit code ${code}` : signal
        }); its log ${log} ends with:\n${tail(log, offset)}`
      )
    })
    const poll = setInterval(() => {
      const record = readRendezvous(home.dir)
      if (settled || Option.isNone(record) || record.value.pid !== child.pid) return
      settle()
      resume(Effect.succeed(record.value))
    }, 10)
    const deadline = setTimeout(() => {
      if (settled) return
      settle()
      if (child.pid !== undefined) endGroup(child.pid)
      fail(
        `The daemon of ${home.name} (${home.dir}) was not ready within ${options.readyTimeoutMillis} ms and was ended; ` +
          `its log ${log} ends with:\n${tail(log, offset)}`
      )
    }, options.readyTimeoutMillis)
    return Effect.sync(() => {
      // An interrupted launch leaves the daemon to finish starting: the next discovery finds it.
      if (!settled) settle()
    })
  })
