/**
 * A runtime's background jobs as /proc shows them: the processes that carry the runtime's
 * `QUIESCE_RUNTIME` marker (inherited from the runtime, wherever they were reparented), found by
 * their command line. For tests that prove a job outlived, or did not outlive, a close.
 */
import { readFileSync } from "node:fs"
import { liveProcesses } from "../../src/platform/detachedGroups.ts"
import { until } from "./daemonProcess.ts"
import { markerOf } from "./runtimeMarker.ts"

const readOrUndefined = <A>(read: () => A): A | undefined => {
  try {
    return read()
  } catch {
    return undefined
  }
}

/** The pids of the live processes started by the runtime `runtimePid` whose command line is `command` ("sleep 301"). */
export const jobPids = (runtimePid: number, command: string): ReadonlyArray<number> => {
  const marker = markerOf(runtimePid)
  if (marker === undefined) throw new Error(`runtime ${runtimePid} carries no marker`)
  return (liveProcesses() ?? []).flatMap((stat) => {
    const cmdline = readOrUndefined(() => readFileSync(`/proc/${stat.pid}/cmdline`, "latin1"))
    if (cmdline?.split("\0").filter((part) => part !== "").join(" ") !== command) return []
    return readOrUndefined(() => markerOf(stat.pid)) === marker ? [stat.pid] : []
  })
}

/**
 * The pid of the runtime's job `command`, waited for: a job started with `&` may still be a forked
 * shell, not yet `command`, when the turn that started it ends.
 */
export const awaitJobPid = async (runtimePid: number, command: string): Promise<number> => {
  let found: number | undefined
  await until(() => {
    found = jobPids(runtimePid, command)[0]
    return found !== undefined
  }, `runtime ${runtimePid} runs ${command}`)
  if (found === undefined) throw new Error(`no ${command} of runtime ${runtimePid} in /proc`)
  return found
}

/** Whether `pid` is a live process (a zombie is not). */
export const processRuns = (pid: number) => (liveProcesses() ?? []).some((stat) => stat.pid === pid)
