/**
 * The process groups an agent CLI's commands run in, apart from its own. Codex 0.171.0 (every
 * unified-exec command), Claude Code 2.1.332 (every background Bash task) and Pi 0.73 (every bash
 * command) start commands in a process group of their own, as children of the CLI, so ending the CLI's
 * process group does not reach them; when the CLI is SIGKILLed or crashes they are reparented to
 * init and outlive it. Adapters therefore note these groups while they are still the CLI's
 * descendants and end them themselves.
 *
 * Linux does not hand out a pid while it is still the id of a live process group, so a group id
 * noted while the group was the CLI's stays ours for as long as that group has a member.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { Duration, Effect } from "effect"
import { parseStat, type ProcStat } from "./procfs.ts"
import { groupAlive, signalGroup } from "./processGroups.ts"

const readStat = (pid: number | string) => {
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, "latin1"))
  } catch {
    // The process exited between the listing and the read.
    return undefined
  }
}

const live = (stat: ProcStat | undefined): stat is ProcStat =>
  stat !== undefined && stat.state !== "Z" && stat.state !== "X"

/** Whether this kernel lists each thread's children (CONFIG_PROC_CHILDREN); checked once. */
let childrenFiles: boolean | undefined
const hasChildrenFiles = (): boolean => {
  if (childrenFiles === undefined) childrenFiles = existsSync(`/proc/${process.pid}/task/${process.pid}/children`)
  return childrenFiles
}

/** The children of `pid` (every thread's), from /proc/<pid>/task/<tid>/children; empty once it is gone. */
const childrenOf = (pid: number): ReadonlyArray<number> => {
  let tids: ReadonlyArray<string>
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return []
  }
  const children: Array<number> = []
  for (const tid of tids) {
    let text: string
    try {
      text = readFileSync(`/proc/${pid}/task/${tid}/children`, "latin1")
    } catch {
      continue
    }
    for (const word of text.split(" ")) if (/^\d+$/.test(word)) children.push(Number(word))
  }
  return children
}

/** The tree below `root`, walked from the root (reads only the tree's own /proc entries). */
const walkTree = (root: number): ReadonlyArray<{ readonly pid: number; readonly pgid: number }> => {
  const found: Array<{ readonly pid: number; readonly pgid: number }> = []
  const seen = new Set<number>([root])
  const queue = [root]
  for (let i = 0; i < queue.length; i++) {
    for (const pid of childrenOf(queue[i]!)) {
      if (seen.has(pid)) continue
      seen.add(pid)
      const stat = readStat(pid)
      if (!live(stat)) continue
      found.push(stat)
      queue.push(pid)
    }
  }
  return found
}

/**
 * Every live process, from one scan of /proc; `undefined` where /proc cannot be listed. Processes
 * that exit between the listing and their read are left out.
 */
export const liveProcesses = (): ReadonlyArray<ProcStat> | undefined => {
  let names: ReadonlyArray<string>
  try {
    names = readdirSync("/proc")
  } catch {
    return undefined
  }
  const found: Array<ProcStat> = []
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue
    const stat = readStat(name)
    if (live(stat)) found.push(stat)
  }
  return found
}

/** The descendants of `root` among `processes`, by parent pid. */
export const descendantsIn = (root: number, processes: ReadonlyArray<ProcStat>): ReadonlyArray<ProcStat> => {
  const children = new Map<number, Array<ProcStat>>()
  for (const stat of processes) {
    const siblings = children.get(stat.ppid)
    if (siblings === undefined) children.set(stat.ppid, [stat])
    else siblings.push(stat)
  }
  const found: Array<ProcStat> = []
  const queue = [root]
  for (let i = 0; i < queue.length; i++) {
    for (const child of children.get(queue[i]!) ?? []) {
      queue.push(child.pid)
      found.push(child)
    }
  }
  return found
}

/** The tree below `root`, by parent pid from a scan of every process (kernels without children files). */
const scanTree = (root: number): ReadonlyArray<{ readonly pid: number; readonly pgid: number }> =>
  descendantsIn(root, liveProcesses() ?? [])

/**
 * The process groups, other than `root`'s own, of every descendant of `root`. Empty where /proc
 * cannot be read. `fullScan` forces the scan of every process (the fallback; for tests).
 */
export const descendantGroups = (root: number, fullScan = false): ReadonlyArray<number> => {
  const tree = !fullScan && hasChildrenFiles() ? walkTree(root) : scanTree(root)
  const groups = new Set<number>()
  for (const member of tree) if (member.pgid !== root) groups.add(member.pgid)
  return [...groups]
}

/**
 * The detached groups of one CLI, noted while they are its descendants and ended with it. A group
 * seen dead is dropped, so a group id is never kept past its group (after which it may be reused).
 */
export interface DetachedGroups {
  /** Notes the CLI's detached groups now; does nothing once the CLI has exited (its pid may be reused). */
  readonly note: () => void
  /** The groups noted and still alive. */
  readonly current: () => ReadonlyArray<number>
  /** Ends every noted group still alive (see `endGroups`). */
  readonly end: (grace: Duration.Input) => Effect.Effect<void>
}

export const trackDetachedGroups = (
  root: number,
  rootExited: () => boolean,
  onNew: (pgid: number) => void = () => {}
): DetachedGroups => {
  const groups = new Set<number>()
  const prune = () => {
    for (const pgid of groups) if (!groupAlive(pgid)) groups.delete(pgid)
  }
  return {
    note: () => {
      prune()
      if (rootExited()) return
      for (const pgid of descendantGroups(root)) {
        if (groups.has(pgid)) continue
        groups.add(pgid)
        onNew(pgid)
      }
    },
    current: () => {
      prune()
      return [...groups]
    },
    end: (grace) =>
      Effect.suspend(() => {
        prune()
        return endGroups([...groups], grace)
      })
  }
}

/** Ends each group still alive: SIGTERM, then SIGKILL for those still alive after `grace`. */
export const endGroups = (groups: Iterable<number>, grace: Duration.Input): Effect.Effect<void> =>
  Effect.gen(function*() {
    const alive = [...groups].filter(groupAlive)
    if (alive.length === 0) return
    for (const pgid of alive) signalGroup(pgid, "SIGTERM")
    yield* Effect.whileLoop({
      while: () => alive.some(groupAlive),
      body: () => Effect.sleep("50 millis"),
      step: () => {}
    }).pipe(Effect.timeoutOption(Duration.fromInputUnsafe(grace)))
    for (const pgid of alive) if (groupAlive(pgid)) signalGroup(pgid, "SIGKILL")
  })
