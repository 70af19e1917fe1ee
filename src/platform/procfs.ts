/**
 * Reading Linux procfs: a process's stat line (state, parent, group, start time) and its resident
 * pages. A pid with its start time names one process for the life of the machine, so every
 * check of a recorded process compares both.
 */
import { readFileSync } from "node:fs"

/** The fields of `/proc/<pid>/stat` Quiesce uses. */
export interface ProcStat {
  readonly pid: number
  /** Field 3, one letter (R, S, D, Z, T, X, ...). */
  readonly state: string
  /** Field 4. */
  readonly ppid: number
  /** Field 5. */
  readonly pgid: number
  /** Field 22, clock ticks since boot. */
  readonly startTime: number
}

/**
 * Parses one `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may itself
 * hold spaces and parentheses, so the fields after it are read from the text after the last `)`.
 */
export const parseStat = (text: string): ProcStat | undefined => {
  const open = text.indexOf(" (")
  const close = text.lastIndexOf(")")
  if (open <= 0 || close < open) return undefined
  const pid = Number(text.slice(0, open))
  // After ") ": field 3 (state) is rest[0], so field n is rest[n - 3].
  const rest = text.slice(close + 2).trim().split(" ")
  if (rest.length < 20) return undefined
  const state = rest[0]!
  const ppid = Number(rest[1])
  const pgid = Number(rest[2])
  const startTime = Number(rest[19])
  if (![pid, ppid, pgid, startTime].every(Number.isSafeInteger) || state.length === 0) return undefined
  return { pid, state, ppid, pgid, startTime }
}

/** Parses `/proc/<pid>/statm`: field 2, resident pages. */
export const parseStatmResidentPages = (text: string): number | undefined => {
  const pages = Number(text.trim().split(" ")[1])
  return Number.isSafeInteger(pages) && pages >= 0 ? pages : undefined
}

/** A small procfs (or other) file's text, or `undefined` when it cannot be read. */
export const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, "latin1")
  } catch {
    return undefined
  }
}

/** The stat of `pid` now, or `undefined` when it does not exist (or cannot be read or parsed). */
export const readStat = (pid: number): ProcStat | undefined => {
  const text = readText(`/proc/${pid}/stat`)
  return text === undefined ? undefined : parseStat(text)
}

/** A process that has exited, or a zombie its parent has not reaped yet. */
export const isExited = (stat: ProcStat) => stat.state === "Z" || stat.state === "X"

/**
 * Whether the process a record names (a daemon's, a hub's) still runs: alive, not a zombie, and
 * with the recorded start time, so a reused pid never passes. A record without one never does.
 */
export const recordedProcessAlive = (recorded: { readonly pid: number; readonly startTime: number | null }): boolean => {
  const stat = readStat(recorded.pid)
  return stat !== undefined && !isExited(stat) && recorded.startTime !== null && stat.startTime === recorded.startTime
}
