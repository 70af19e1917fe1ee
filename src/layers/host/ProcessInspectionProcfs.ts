/**
 * ProcessInspection (H5) from Linux procfs.
 *
 * - Identity: `/proc/<pid>/stat` field 22 (start time, clock ticks since boot). With the pid it
 *   names one process for the life of the machine, so a caller that passes the start time it
 *   expects never gets a reused pid's figures.
 * - Tree: one scan of `/proc` per call reads every process's ppid (field 4) and process group
 *   (field 5). A runtime's tree is the root, every process of the group the root leads
 *   (pgid = pid: jobs whose parent died and that were reparented to init or a subreaper still
 *   belong to the runtime), and every descendant of those by ppid. Processes that vanish during
 *   the scan, or cannot be read, are skipped.
 * - Memory: `/proc/<pid>/statm` field 2 (resident pages) times the page size, summed over the
 *   tree (pages shared between processes count once per process, as `ps` shows them). The page
 *   size comes from `getconf PAGESIZE` once per layer; if that fails, 4096 (the page size of
 *   x86-64 and of most arm64 kernels) is assumed.
 * - Exited processes waiting to be reaped (state Z or X) hold no memory and run nothing: a root in
 *   that state is gone (`None`), and such descendants are not counted.
 *
 * Unknown liveness is never guessed: a root that cannot be read is `None`. Reads are synchronous
 * (procfs files are small and served from kernel memory).
 */
import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { Duration, Effect, Layer, Option } from "effect"
import { ProcessInspection, type ProcessSample } from "../../services/ProcessInspection.ts"

export interface ProcfsOptions {
  /** How many pids `sampleAll` works on at once; default 8. */
  readonly concurrency?: number
  /** How long `sampleAll` may take in all; pids not sampled by then are `None`. Default 2 seconds. */
  readonly deadline?: Duration.Input
}

/** The fields of `/proc/<pid>/stat` this layer uses. */
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

const readText = (path: string): string | undefined => {
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

const readResidentPages = (pid: number): number | undefined => {
  const text = readText(`/proc/${pid}/statm`)
  return text === undefined ? undefined : parseStatmResidentPages(text)
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

const fallbackPageSize = 4096

const readPageSize = (): number => {
  try {
    const size = Number(execFileSync("getconf", ["PAGESIZE"], { encoding: "utf8", timeout: 2000 }).trim())
    return Number.isSafeInteger(size) && size > 0 ? size : fallbackPageSize
  } catch {
    return fallbackPageSize
  }
}

/** Every process's parent and group, from one scan of /proc. */
interface ProcessTable {
  readonly children: ReadonlyMap<number, ReadonlyArray<number>>
  readonly groups: ReadonlyMap<number, ReadonlyArray<number>>
  readonly stats: ReadonlyMap<number, ProcStat>
}

const push = (map: Map<number, Array<number>>, key: number, value: number) => {
  const list = map.get(key)
  if (list === undefined) map.set(key, [value])
  else list.push(value)
}

const scanProcesses = (): ProcessTable => {
  const children = new Map<number, Array<number>>()
  const groups = new Map<number, Array<number>>()
  const stats = new Map<number, ProcStat>()
  let names: ReadonlyArray<string>
  try {
    names = readdirSync("/proc")
  } catch {
    names = []
  }
  for (const name of names) {
    const first = name.charCodeAt(0)
    if (first < 48 || first > 57) continue
    // A process that exits between the listing and the read is simply not part of the table.
    const stat = readStat(Number(name))
    if (stat === undefined) continue
    stats.set(stat.pid, stat)
    push(children, stat.ppid, stat.pid)
    push(groups, stat.pgid, stat.pid)
  }
  return { children, groups, stats }
}

/** The root, the members of the group it leads, and all their descendants, each once. */
const treeOf = (root: number, table: ProcessTable): ReadonlyArray<number> => {
  const seen = new Set<number>([root])
  const queue = [root]
  for (const member of table.groups.get(root) ?? []) {
    if (!seen.has(member)) {
      seen.add(member)
      queue.push(member)
    }
  }
  for (let i = 0; i < queue.length; i++) {
    for (const child of table.children.get(queue[i]!) ?? []) {
      if (!seen.has(child)) {
        seen.add(child)
        queue.push(child)
      }
    }
  }
  return queue
}

/**
 * Samples one root against a table. The root is read directly (not from the table) before and
 * after its memory, so a pid reused in between is never reported under the old identity.
 */
const sampleWith = (
  pid: number,
  expectedStartTime: number | undefined,
  pageSize: number,
  table: () => ProcessTable
): Option.Option<ProcessSample> => {
  if (!Number.isSafeInteger(pid) || pid <= 0) return Option.none()
  const before = readStat(pid)
  if (before === undefined || isExited(before)) return Option.none()
  if (expectedStartTime !== undefined && before.startTime !== expectedStartTime) return Option.none()
  const rootPages = readResidentPages(pid)
  if (rootPages === undefined) return Option.none()
  let pages = rootPages
  let processes = 1
  const processTable = table()
  for (const member of treeOf(pid, processTable)) {
    if (member === pid) continue
    const stat = processTable.stats.get(member)
    if (stat === undefined || isExited(stat)) continue
    const memberPages = readResidentPages(member)
    if (memberPages === undefined) continue
    pages += memberPages
    processes++
  }
  const after = readStat(pid)
  if (after === undefined || after.startTime !== before.startTime || isExited(after)) return Option.none()
  return Option.some({ pid, startTime: before.startTime, rssBytes: pages * pageSize, processes })
}

/** ProcessInspection from Linux procfs; see the module comment for what is measured. */
export const layer = (options?: ProcfsOptions): Layer.Layer<ProcessInspection> => {
  const concurrency = options?.concurrency ?? 8
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`)
  }
  const deadline = Duration.fromInputUnsafe(options?.deadline ?? "2 seconds")
  return Layer.effect(
    ProcessInspection,
    Effect.sync(() => {
      const pageSize = readPageSize()

      const sample = (pid: number, expectedStartTime?: number) =>
        Effect.sync(() => sampleWith(pid, expectedStartTime, pageSize, scanProcesses))

      const sampleAll = (
        pids: ReadonlyArray<number>
      ): Effect.Effect<ReadonlyMap<number, Option.Option<ProcessSample>>> =>
        Effect.suspend(() => {
          const results = new Map<number, Option.Option<ProcessSample>>()
          const unique = Array.from(new Set(pids))
          for (const pid of unique) results.set(pid, Option.none())
          let table: ProcessTable | undefined
          const shared = () => (table ??= scanProcesses())
          const work = Effect.forEach(
            unique,
            (pid) =>
              Effect.yieldNow.pipe(
                Effect.andThen(Effect.sync(() => {
                  results.set(pid, sampleWith(pid, undefined, pageSize, shared))
                }))
              ),
            { concurrency, discard: true }
          )
          // The results gathered so far are kept; the rest stay `None`.
          return work.pipe(Effect.timeoutOption(deadline), Effect.as(results))
        })

      return ProcessInspection.of({ sample, sampleAll })
    })
  )
}
