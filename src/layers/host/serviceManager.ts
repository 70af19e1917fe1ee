/**
 * Telling a service manager that the daemon is ready (H1): when systemd started it as a
 * `Type=notify` service it set `$NOTIFY_SOCKET`, and expects `READY=1` there once the daemon is
 * ready. Node cannot write to a Unix datagram socket, so systemd's own `systemd-notify` sends it,
 * which is why the unit `quiesce daemon --print-systemd-unit` writes says `NotifyAccess=all`.
 * `systemd-notify` waits until the manager has read the message, so it is attributed correctly.
 */
import { spawn } from "node:child_process"
import { Effect } from "effect"

const notifyTimeoutMillis = 10_000

/**
 * Takes `$NOTIFY_SOCKET` out of this process's environment, so no agent's process inherits it
 * (with `NotifyAccess=all` anything in the service could otherwise speak for the daemon).
 */
export const takeNotifySocket = (): string | undefined => {
  const socket = process.env["NOTIFY_SOCKET"]
  delete process.env["NOTIFY_SOCKET"]
  return socket === "" ? undefined : socket
}

/** Runs `systemd-notify` in a process group of its own; ends it (and waits) if it takes too long. */
const runSystemdNotify = (socket: string, args: ReadonlyArray<string>) =>
  Effect.callback<void, Error>((resume) => {
    const child = spawn("systemd-notify", [...args], {
      env: { ...process.env, NOTIFY_SOCKET: socket },
      stdio: ["ignore", "ignore", "pipe"],
      detached: true
    })
    let stderr = ""
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      if (stderr.length < 2000) stderr += chunk
    })
    const end = () => {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(-child.pid, "SIGKILL")
        } catch {
          // gone already
        }
      }
    }
    const timer = setTimeout(end, notifyTimeoutMillis)
    child.on("error", (error) => {
      clearTimeout(timer)
      resume(Effect.fail(error))
    })
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resume(
        code === 0
          ? Effect.void
          : Effect.fail(new Error(`systemd-notify ${signal === null ? `exited ${code}` : `was ended (${signal})`}${stderr.trim() === "" ? "" : `: ${stderr.trim()}`}`))
      )
    })
    // Interrupted (a signal while it waits): it is ended now, not left to its timer.
    return Effect.sync(() => {
      clearTimeout(timer)
      end()
    })
  })

/** `READY=1` with a status line, when a service manager asked for it; a failure is logged, never fatal. */
export const notifyReady = (socket: string | undefined, status: string) =>
  socket === undefined ? Effect.void : runSystemdNotify(socket, ["--ready", `--status=${status}`]).pipe(
    Effect.andThen(Effect.logDebug("Told the service manager the daemon is ready")),
    Effect.catch((error) =>
      Effect.logWarning(`Could not tell the service manager the daemon is ready (${error.message}); is systemd-notify installed?`)
    )
  )
