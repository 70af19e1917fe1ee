/**
 * Signalling process groups. Every runtime runs in a process group of its own (its leader's pid
 * is the group id), so its whole tree is ended together, and a forced exit can end every group
 * this process started.
 */

/**
 * Every provider process group this process started and has not seen exit. A forced exit (a
 * second signal at shutdown) kills them all synchronously, so no runtime outlives the daemon.
 */
const startedGroups = new Set<number>()

/** Records a provider process group until its leader exits. */
export const trackGroup = (pid: number, onExit: (listener: () => void) => void): void => {
  startedGroups.add(pid)
  onExit(() => {
    // Members the leader left behind are ended by terminate; the set only guards a forced exit.
    if (!groupAlive(pid)) startedGroups.delete(pid)
  })
}

/** SIGKILLs every provider process group still alive; for a forced exit only. */
export const killAllGroupsNow = (): void => {
  for (const pid of startedGroups) signalGroup(pid, "SIGKILL")
  startedGroups.clear()
}

/** `process.kill`, where a target that is already gone is not an error. */
const signalTarget = (target: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(target, signal)
  } catch (error) {
    if (!(error instanceof Error && "code" in error && error.code === "ESRCH")) throw error
  }
}

/**
 * Signals a whole process group; a group that is already gone is not an error. Throws a
 * `RangeError` for 0, 1 or anything else that is not an integer above 1: `kill(-0)` would signal
 * the caller's own group and `kill(-1)` every process it may signal.
 */
export const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  if (!Number.isSafeInteger(pgid) || pgid <= 1) throw new RangeError(`not a process group id: ${pgid}`)
  signalTarget(-pgid, signal)
}

/** Signals one process (not its group); a process that is already gone is not an error. */
export const signalProcess = (pid: number, signal: NodeJS.Signals): void => {
  if (!Number.isSafeInteger(pid) || pid <= 0) throw new RangeError(`not a process id: ${pid}`)
  signalTarget(pid, signal)
}

/** Whether any process of the group is still alive (pid-reuse is not a concern for a group we own until reaped). */
export const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}
