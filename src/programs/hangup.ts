/**
 * A closed terminal (SIGHUP) shuts a long-running command down in order, as SIGTERM does (H3):
 * the signal is turned into the SIGTERM the runtime already handles. The terminal is gone by
 * then, so writes to it fail (EIO, EPIPE); those failures are dropped rather than crashing the
 * shutdown — a daemon's log goes on in its home's daemon.log, a hub's in its daemons' logs.
 */
import { Effect } from "effect"

const ignoreClosedTerminal = (stream: NodeJS.WriteStream) => {
  stream.on("error", () => {})
}

let installed = false

/** From now on, SIGHUP is an orderly shutdown (installed once per process). */
export const shutDownOnHangup = Effect.sync(() => {
  if (installed) return
  installed = true
  process.once("SIGHUP", () => {
    installed = false
    ignoreClosedTerminal(process.stdout)
    ignoreClosedTerminal(process.stderr)
    process.kill(process.pid, "SIGTERM")
  })
})
