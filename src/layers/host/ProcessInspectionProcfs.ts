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
 * - Bounds: every query (one `sample`, one `sampleAll`) has one deadline, 1 s by default, shared
 *   by all its reads; at most 4 root samples are in flight across all callers of one layer.
 *   A root that finds every slot taken is left unmeasured at once rather than queued, and one
 *   whose reads are still running at the deadline is cancelled and left unmeasured; what a query
 *   completed before its deadline is kept. Nothing is cached: every query reads procfs again.
 * - Identity around every read: the root's start time is read before and after the tree's
 *   memory, and each descendant's after its own memory read; a process whose start time changed
 *   (its pid was reused) or that vanished is not counted, and the sample says how many processes
 *   were measured and how many found but not measured.
 *
 * Unknown liveness is never guessed: a root that cannot be read, in time or at all, is `None`.
 * Reads are asynchronous (libuv's thread pool), cancelled on interruption; an interrupted read
 * keeps its slot until the read has settled.
 */
import { execFileSync } from "node:child_process"
import { readdir, readFile } from "node:fs/promises"
import { Duration, Effect, Fiber, Layer, Option, Semaphore } from "effect"
import { isExited, parseStat, parseStatmResidentPages, type ProcStat } from "../../platform/procfs.ts"
import { ProcessInspection, type ProcessSample } from "../../services/ProcessInspection.ts"

/** How procfs is read; the layer's default is the real one, a test's can be slow or lie. */
export interface ProcfsReader {
  /** The pids `/proc` lists now. */
  readonly pids: Effect.Effect<ReadonlyArray<number>>
  /** `/proc/<pid>/stat`, or `undefined` when it cannot be read or parsed. */
  readonly stat: (pid: number) => Effect.Effect<ProcStat | undefined>
  /** `/proc/<pid>/statm` field 2, or `undefined` when it cannot be read or parsed. */
  readonly residentPages: (pid: number) => Effect.Effect<number | undefined>
}

/** Tuning for the procfs layer: its bounds on concurrent samples and query time, and test stand-ins. */
export interface ProcfsOptions {
  /** Roots sampled at once across every caller of the layer; default 4. */
  readonly admission?: number
  /** How long one query may take in all; roots not sampled by then are `None`. Default 1 second. */
  readonly deadline?: Duration.Input
  /** Default: the real `/proc`. */
  readonly reader?: ProcfsReader
  /** Default: `getconf PAGESIZE`. */
  readonly pageSize?: number
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

/** Every process's parent, group and identity, from one scan of /proc. */
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

/**
 * Reads one file, cancellable: on interruption the read is aborted and the interruption waits for
 * it to settle, so whoever holds a slot for it keeps the slot until the read is really over.
 */
const readProcFile = (file: string): Effect.Effect<string | undefined> =>
  Effect.callback<string | undefined>((resume, signal) => {
    const controller = new AbortController()
    const settled = readFile(file, { encoding: "latin1", signal: controller.signal }).then(
      (text) => resume(Effect.succeed(text)),
      () => resume(Effect.succeed(undefined))
    )
    if (signal.aborted) controller.abort()
    return Effect.promise(() => {
      controller.abort()
      return settled
    })
  })

/** The real `/proc`. */
export const procfsReader: ProcfsReader = {
  pids: Effect.promise(() => readdir("/proc").then((names) => names.filter((name) => /^\d+$/.test(name)).map(Number), () => [])),
  stat: (pid) => Effect.map(readProcFile(`/proc/${pid}/stat`), (text) => text === undefined ? undefined : parseStat(text)),
  residentPages: (pid) =>
    Effect.map(readProcFile(`/proc/${pid}/statm`), (text) => text === undefined ? undefined : parseStatmResidentPages(text))
}

const scanProcesses = (reader: ProcfsReader): Effect.Effect<ProcessTable> =>
  Effect.gen(function*() {
    const children = new Map<number, Array<number>>()
    const groups = new Map<number, Array<number>>()
    const stats = new Map<number, ProcStat>()
    for (const pid of yield* reader.pids) {
      // A process that exits between the listing and the read is simply not part of the table.
      const stat = yield* reader.stat(pid)
      if (stat === undefined) continue
      stats.set(stat.pid, stat)
      push(children, stat.ppid, stat.pid)
      push(groups, stat.pgid, stat.pid)
    }
    return { children, groups, stats }
  })

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
 * Samples one root. The root is read directly (not from the table) before and after the tree's
 * memory, and each descendant's start time is read again after its memory, so a pid reused in
 * between is never reported under the old identity.
 */
const sampleTree = (
  reader: ProcfsReader,
  pid: number,
  expectedStartTime: number | undefined,
  pageSize: number,
  table: Effect.Effect<ProcessTable>
): Effect.Effect<Option.Option<ProcessSample>> =>
  Effect.gen(function*() {
    if (!Number.isSafeInteger(pid) || pid <= 0) return Option.none()
    const before = yield* reader.stat(pid)
    if (before === undefined || isExited(before)) return Option.none()
    if (expectedStartTime !== undefined && before.startTime !== expectedStartTime) return Option.none()
    const rootPages = yield* reader.residentPages(pid)
    if (rootPages === undefined) return Option.none()
    let pages = rootPages
    let measuredProcesses = 1
    let unmeasuredProcesses = 0
    const processTable = yield* table
    for (const member of treeOf(pid, processTable)) {
      if (member === pid) continue
      const listed = processTable.stats.get(member)
      if (listed === undefined || isExited(listed)) continue
      const memberPages = yield* reader.residentPages(member)
      const still = memberPages === undefined ? undefined : yield* reader.stat(member)
      if (memberPages === undefined || still === undefined || still.startTime !== listed.startTime) {
        unmeasuredProcesses++
        continue
      }
      pages += memberPages
      measuredProcesses++
    }
    const after = yield* reader.stat(pid)
    if (after === undefined || after.startTime !== before.startTime || isExited(after)) return Option.none()
    return Option.some({ pid, startTime: before.startTime, rssBytes: pages * pageSize, measuredProcesses, unmeasuredProcesses })
  })

const positiveInteger = (name: string, value: number) => {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`)
  return value
}

/** ProcessInspection from Linux procfs; see the module comment for what is measured and its bounds. */
export const layer = (options?: ProcfsOptions): Layer.Layer<ProcessInspection> => {
  const admission = positiveInteger("admission", options?.admission ?? 4)
  const deadline = Duration.fromInputUnsafe(options?.deadline ?? "1 second")
  const reader = options?.reader ?? procfsReader
  return Layer.effect(
    ProcessInspection,
    Effect.gen(function*() {
      const pageSize = options?.pageSize ?? readPageSize()
      // Shared by every caller: a root sample holds one slot for as long as its reads run.
      const slots = yield* Semaphore.make(admission)
      const admitted = (effect: Effect.Effect<Option.Option<ProcessSample>>) =>
        Effect.map(slots.withPermitsIfAvailable(1)(effect), Option.flatten)

      // The reads a query left behind at its deadline finish (and give their slots back) here,
      // not in the caller's time: an aborted file read may still take as long as the disk does.
      const background = yield* Effect.scope

      /** Samples the roots within one deadline; a root not done by then (or never admitted) is `None`. */
      const query = (pids: ReadonlyArray<number>, expectedStartTime?: number) =>
        Effect.gen(function*() {
          const results = new Map<number, Option.Option<ProcessSample>>()
          const unique = Array.from(new Set(pids))
          if (unique.length === 0) return results
          // One scan of /proc per query, made by the first root that needs it, inside its slot.
          const table = yield* Effect.cached(scanProcesses(reader))
          const work = yield* Effect.forEach(
            unique,
            (pid) =>
              admitted(sampleTree(reader, pid, expectedStartTime, pageSize, table)).pipe(
                Effect.tap((sample) => Effect.sync(() => results.set(pid, sample)))
              ),
            { concurrency: admission, discard: true }
          ).pipe(Effect.forkIn(background))
          const stop = Effect.asVoid(Effect.forkIn(Fiber.interrupt(work), background))
          // At the deadline the caller gets what is done (a copy: late reads change nothing it
          // holds); a caller that goes away leaves the reads to stop on their own too.
          yield* Fiber.await(work).pipe(
            Effect.timeoutOption(deadline),
            Effect.onInterrupt(() => stop),
            Effect.tap((done) => Option.isNone(done) ? stop : Effect.void)
          )
          return new Map(unique.map((pid) => [pid, results.get(pid) ?? Option.none()]))
        })

      const sample = (pid: number, expectedStartTime?: number) =>
        Effect.map(query([pid], expectedStartTime), (results) => results.get(pid) ?? Option.none())

      return ProcessInspection.of({ sample, sampleAll: (pids) => query(pids) })
    })
  )
}
