/**
 * The process groups an agent CLI's commands run in, apart from its own. Codex 0.171.0 (every
 * unified-exec command) and Claude Code 2.1.332 (every background Bash task) start commands in a
 * session and process group of their own (setsid), as children of the CLI, so ending the CLI's
 * process group does not reach them; when the CLI is SIGKILLed or crashes they are reparented to
 * init and outlive it. Adapters therefore note these groups while they are still the CLI's
 * descendants and end them themselves.
 *
 * Linux does not hand out a pid while it is still the id of a live process group, so a group id
 * noted while the group was the CLI's stays ours for as long as that group has a member.
 */
import { readdirSync, readFileSync } from "node:fs"
import { Duration, Effect } from "effect"
import { parseStat } from "../../host/ProcessInspectionProcfs.ts"
import { groupAlive, signalGroup } from "../plugin/PluginProcess.ts"

const readStat = (pid: string) => {
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, "latin1"))
  } catch {
    // The process exited between the listing and the read.
    return undefined
  }
}

/**
 * The process groups, other than `root`'s own, of every descendant of `root` (by parent pid).
 * Empty where /proc cannot be read.
 */
export const descendantGroups = (root: number): ReadonlyArray<number> => {
  let names: ReadonlyArray<string>
  try {
    names = readdirSync("/proc")
  } catch {
    return []
  }
  const children = new Map<number, Array<{ readonly pid: number; readonly pgid: number }>>()
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue
    const stat = readStat(name)
    if (stat === undefined || stat.state === "Z" || stat.state === "X") continue
    const siblings = children.get(stat.ppid)
    if (siblings === undefined) children.set(stat.ppid, [stat])
    else siblings.push(stat)
  }
  const groups = new Set<number>()
  const queue = [root]
  for (let i = 0; i < queue.length; i++) {
    for (const child of children.get(queue[i]!) ?? []) {
      queue.push(child.pid)
      if (child.pgid !== root) groups.add(child.pgid)
    }
  }
  return [...groups]
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
