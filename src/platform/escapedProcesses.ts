/**
 * Processes a runtime started that run outside it. Pi 0.73 and OpenCode 1.18.33 run each bash
 * command detached (a session and process group of its own); a job a command backgrounds with `&`
 * is reparented to init as soon as its shell exits, so neither the CLI's inventories nor the walk
 * of the CLI's descendants (`detachedGroups.ts`) sees it.
 *
 * Every process inherits its parent's environment, so each runtime's CLI is started with a marker
 * variable of its own (`QUIESCE_RUNTIME=<random id>`); a process whose environment carries it
 * and that is neither the CLI nor one of its descendants has escaped the runtime.
 *
 * What is read: one listing of /proc, every process's `stat` (parent pid), and the `environ` of
 * each process outside the CLI's tree (`cmdline` only of those that carry the marker). A process
 * whose environ cannot be read (another user's, or gone) is not ours or no longer runs, and is
 * skipped. /proc/<pid>/environ is the environment the process was exec'd with: a process started
 * with a scrubbed environment (`env -i`, a sandbox) carries no marker and is not seen.
 */
import { readFileSync } from "node:fs"
import { Effect, Schema } from "effect"
import type { ProcStat } from "./procfs.ts"
import { descendantsIn, liveProcesses } from "./detachedGroups.ts"

/** The environment variable that marks a runtime's processes. */
export const runtimeMarkerName = "QUIESCE_RUNTIME"

/** The environment that marks a runtime's processes with its marker (`SessionConfig.runtimeMarker`). */
export const runtimeEnv = (marker: string): Readonly<Record<string, string>> => ({ [runtimeMarkerName]: marker })

export interface EscapedProcess {
  readonly pid: number
  /** Its command line, arguments joined by spaces (empty when it could not be read). */
  readonly command: string
}

/** /proc could not be read, so whether anything escaped is unknown. */
export class ProcessScanFailed extends Schema.TaggedError<ProcessScanFailed>()("ProcessScanFailed", {
  message: Schema.String
}) {}

const readOrUndefined = (path: string): string | undefined => {
  try {
    return readFileSync(path, "latin1")
  } catch {
    // Another user's process, or one that exited since the listing.
    return undefined
  }
}

/**
 * The environment `pid` was exec'd with (NUL-separated), or `undefined` when it cannot be read:
 * another user's process, or one that has exited.
 */
export const readEnviron = (pid: number): string | undefined => readOrUndefined(`/proc/${pid}/environ`)

/** Whether a NUL-separated environment (see {@link readEnviron}) carries the runtime marker `marker`. */
export const carriesMarker = (environ: string, marker: string): boolean => {
  const entry = `${runtimeMarkerName}=${marker}`
  return environ.includes(entry) && environ.split("\0").includes(entry)
}

/** The command line of `pid`, arguments joined by spaces (empty when it cannot be read). */
export const commandOf = (pid: number): string =>
  (readOrUndefined(`/proc/${pid}/cmdline`) ?? "").split("\0").filter((arg) => arg !== "").join(" ")

/**
 * Every live process (not exited), from one scan of /proc. Fails when /proc cannot be listed or
 * does not show this very process: an unreadable /proc is never "no processes".
 */
export const scanLiveProcesses: Effect.Effect<ReadonlyArray<ProcStat>, ProcessScanFailed> = Effect.suspend(() => {
  const processes = liveProcesses()
  if (processes === undefined || !processes.some((stat) => stat.pid === process.pid)) {
    return Effect.fail(new ProcessScanFailed({ message: "cannot read the process table from /proc" }))
  }
  return Effect.succeed(processes)
})

/**
 * The live processes carrying `marker` that are not `root` nor its descendants. Fails when /proc
 * cannot be read (see {@link scanLiveProcesses}).
 */
export const escapedProcesses = (root: number, marker: string): Effect.Effect<ReadonlyArray<EscapedProcess>, ProcessScanFailed> =>
  Effect.map(scanLiveProcesses, (processes) => {
    const inside = new Set<number>([root])
    for (const stat of descendantsIn(root, processes)) inside.add(stat.pid)
    const escaped: Array<EscapedProcess> = []
    for (const stat of processes) {
      if (inside.has(stat.pid)) continue
      const environ = readEnviron(stat.pid)
      if (environ === undefined || !carriesMarker(environ, marker)) continue
      escaped.push({ pid: stat.pid, command: commandOf(stat.pid) })
    }
    return escaped
  })

/** A veto reason naming the escaped processes (the first few, shortened). */
export const escapedReason = (escaped: ReadonlyArray<EscapedProcess>): string => {
  const shown = escaped.slice(0, 3).map((one) => `${one.command.slice(0, 80) || "?"} (pid ${one.pid})`)
  const more = escaped.length > shown.length ? ` and ${escaped.length - shown.length} more` : ""
  const count = escaped.length === 1 ? "1 process" : `${escaped.length} processes`
  return `${count} started by the runtime run outside it: ${shown.join("; ")}${more}`
}
