/**
 * Ending what a dead daemon left. Runtime processes run in process groups of their own, so they
 * outlive a daemon that is SIGKILLed; the `RuntimeLedger` keeps each live runtime's group leader
 * (pid == pgid), its start time and its `QUIESCE_RUNTIME` marker, and the next daemon on the home
 * calls {@link endLeftovers} with those entries before it admits work.
 *
 * What is judged ours, per entry (nothing else is ever signalled):
 * - The leader's pid is alive, leads its own group, and its start time (stat field 22) is the one
 *   recorded: it is the very process recorded, so its whole group is ours and is signalled as a
 *   group (`-pid`). Linux hands out no pid that is still the id of a live group, so the group id
 *   stays ours while the group has a member.
 * - Otherwise (the leader exited, or its pid now names another process) the group id is never
 *   signalled: only processes whose /proc/<pid>/environ carries the entry's marker are ours,
 *   each signalled by its pid: members the leader left in its group, processes that moved to
 *   groups or sessions of their own, daemons reparented to init. The same holds for marked
 *   processes outside a verified group.
 * - A process whose environ cannot be read (another user's, or gone) is not ours. This daemon and
 *   its own process group are never signalled.
 *
 * Ending: SIGTERM to everything judged ours at once, then polling (a bounded wait of `grace`)
 * until it has gone, then SIGKILL to what is left, after checking again that each pid is still
 * the process judged ours (same start time), then a bounded wait until that has gone too.
 * Exited processes not yet reaped (state Z or X) run nothing and count as gone: the init of a
 * container may reap them late or never.
 *
 * Linux procfs only (like `src/platform/`): when /proc cannot be read the whole call
 * fails with `ProcessScanFailed` and nothing is signalled.
 */
import { Clock, Duration, Effect } from "effect"
import type {
  EndedProcess,
  LeftoverEntryReport,
  LeftoverReason,
  LeftoverReport,
  RuntimeProcess,
  SkippedProcess
} from "../../domain/runtimeProcess.ts"
import { signalGroup, signalProcess } from "../../platform/processGroups.ts"
import {
  carriesMarker,
  commandOf,
  type ProcessScanFailed,
  readEnviron,
  scanLiveProcesses
} from "../../platform/escapedProcesses.ts"
import type { ProcStat } from "../../platform/procfs.ts"

/** Tuning for {@link endLeftovers}: how gently the leftover processes are ended. */
export interface EndLeftoversOptions {
  /** How long the processes have between SIGTERM and SIGKILL. Default 2 seconds. */
  readonly grace?: Duration.Input
}

/** How long processes may take to go after SIGKILL before they are reported as still running. */
const killWait = Duration.seconds(5)

/** How often liveness is polled while waiting. */
const pollInterval = Duration.millis(25)

const leaderVerified: LeftoverReason = "group leader verified by start time"
const memberMarked: LeftoverReason = "group member carrying the marker"
const escapedMarked: LeftoverReason = "escaped process carrying the marker"

/** One process judged ours: identified by pid and start time, so a reused pid is never taken for it. */
interface Target {
  readonly pid: number
  readonly pgid: number
  readonly startTime: number
  readonly command: string
  readonly reason: LeftoverReason
  /** The last signal sent to it; none before the first. */
  signal: "SIGTERM" | "SIGKILL" | undefined
}

/** What is to be done for one entry. */
interface Plan {
  readonly entry: RuntimeProcess
  /** The group signalled as a whole: the leader verified by start time. */
  group: number | undefined
  /** The last signal the group was sent. */
  groupSignal: "SIGTERM" | "SIGKILL" | undefined
  readonly targets: Array<Target>
  readonly skipped: Array<SkippedProcess>
}

const targetOf = (stat: ProcStat, reason: LeftoverReason): Target => ({
  pid: stat.pid,
  pgid: stat.pgid,
  startTime: stat.startTime,
  command: commandOf(stat.pid),
  reason,
  signal: undefined
})

const describeError = (error: unknown) => error instanceof Error ? error.message : String(error)

/** Runs one signal; a failure (other than the target being gone already) is returned as a message. */
const attempt = (send: () => void): string | undefined => {
  try {
    send()
    return undefined
  } catch (error) {
    return describeError(error)
  }
}

/** Decides, from one scan of every live process, what is ours for each entry. */
const planFor = (entries: ReadonlyArray<RuntimeProcess>, processes: ReadonlyArray<ProcStat>): Array<Plan> => {
  const self = process.pid
  const byPid = new Map(processes.map((stat) => [stat.pid, stat]))
  const ownGroup = byPid.get(self)?.pgid
  const claimed = new Set<number>()
  const plans: Array<Plan> = entries.map((entry) => ({
    entry,
    group: undefined,
    groupSignal: undefined,
    targets: [],
    skipped: []
  }))

  // First every verified group, so that a group's members are attributed to it whatever marker
  // they carry.
  for (const plan of plans) {
    const { pid, startTime } = plan.entry
    const leader = byPid.get(pid)
    const skip = (reason: string) => plan.skipped.push({ pid, reason })
    if (leader === undefined) skip(`pid ${pid} has exited`)
    else if (pid === self) skip(`pid ${pid} is this daemon`)
    else if (leader.startTime !== startTime) skip(`pid ${pid} now belongs to another process (start time differs)`)
    else if (leader.pgid !== pid) {
      skip(`pid ${pid} no longer leads a process group (it is in group ${leader.pgid}), so no group is signalled for it`)
    } else if (pid === ownGroup) skip(`process group ${pid} is this daemon's own, so it is not signalled`)
    else {
      plan.group = pid
      for (const stat of processes) {
        if (stat.pgid !== pid || stat.pid === self || claimed.has(stat.pid)) continue
        claimed.add(stat.pid)
        plan.targets.push(targetOf(stat, leaderVerified))
      }
    }
  }

  // Then the processes carrying each entry's marker; each environ is read once.
  const environs = new Map<number, string | undefined>()
  const environOf = (pid: number) => {
    if (!environs.has(pid)) environs.set(pid, readEnviron(pid))
    return environs.get(pid)
  }
  for (const plan of plans) {
    const { pid: leader, marker, startTime } = plan.entry
    // Whether group `leader` may still hold the runtime's processes unsignalled: its leader has
    // exited, or is the process recorded but its group is not signalled. (A pid now naming another
    // process cannot be a group id still held by old members: Linux does not reuse such a pid.)
    const leaderNow = byPid.get(leader)
    const groupUnsignalled = plan.group === undefined &&
      (leaderNow === undefined || leaderNow.startTime === startTime)
    for (const stat of processes) {
      if (stat.pid === self || claimed.has(stat.pid)) continue
      const environ = environOf(stat.pid)
      if (environ !== undefined && carriesMarker(environ, marker)) {
        claimed.add(stat.pid)
        plan.targets.push(targetOf(stat, stat.pgid === leader ? memberMarked : escapedMarked))
      } else if (groupUnsignalled && stat.pgid === leader && stat.pid !== leader) {
        // Left running: it may be the runtime's, but nothing proves it.
        plan.skipped.push({
          pid: stat.pid,
          reason: `pid ${stat.pid} (${commandOf(stat.pid) || "?"}) is in process group ${leader} but ${
            environ === undefined ? "its environment cannot be read" : "does not carry the marker"
          }`
        })
      }
    }
  }
  return plans
}

/** Whether `target` still runs: its pid is live and still the same process. */
const runs = (target: Target, byPid: ReadonlyMap<number, ProcStat>) =>
  byPid.get(target.pid)?.startTime === target.startTime

/**
 * Takes a fresh scan: adds members that joined a verified group since (they are ours too) and
 * tells whether anything judged ours still runs.
 */
const anythingRuns = (plans: ReadonlyArray<Plan>, processes: ReadonlyArray<ProcStat>): boolean => {
  const byPid = new Map(processes.map((stat) => [stat.pid, stat]))
  let running = false
  for (const plan of plans) {
    if (plan.group !== undefined) {
      const known = new Set(plan.targets.map((target) => target.pid))
      for (const stat of processes) {
        if (stat.pgid !== plan.group || stat.pid === process.pid) continue
        running = true
        if (!known.has(stat.pid)) plan.targets.push({ ...targetOf(stat, leaderVerified), signal: plan.groupSignal })
      }
    }
    if (plan.targets.some((target) => runs(target, byPid))) running = true
  }
  return running
}

/** Polls until nothing judged ours runs or `bound` has passed; true when nothing runs. */
const waitUntilGone = (plans: ReadonlyArray<Plan>, bound: Duration.Duration) =>
  Effect.gen(function*() {
    const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(bound)
    while (true) {
      if (!anythingRuns(plans, yield* scanLiveProcesses)) return true
      if ((yield* Clock.currentTimeMillis) >= deadline) return false
      yield* Effect.sleep(pollInterval)
    }
  })

/**
 * Sends `signal` to each verified group that still has a live member and to each other target
 * still running (checked against `processes`, a fresh scan). A signal that cannot be sent is noted
 * as skipped; its targets keep the last signal they did get.
 */
const signalAll = (plans: ReadonlyArray<Plan>, processes: ReadonlyArray<ProcStat>, signal: "SIGTERM" | "SIGKILL") => {
  const byPid = new Map(processes.map((stat) => [stat.pid, stat]))
  for (const plan of plans) {
    const group = plan.group
    if (group !== undefined && processes.some((stat) => stat.pgid === group)) {
      const failure = attempt(() => signalGroup(group, signal))
      if (failure === undefined) {
        plan.groupSignal = signal
        for (const target of plan.targets) {
          if (target.reason === leaderVerified && runs(target, byPid)) target.signal = signal
        }
      } else plan.skipped.push({ pid: group, reason: `process group ${group} could not be sent ${signal}: ${failure}` })
    }
    for (const target of plan.targets) {
      if (target.reason === leaderVerified || !runs(target, byPid)) continue
      const failure = attempt(() => signalProcess(target.pid, signal))
      if (failure === undefined) target.signal = signal
      else plan.skipped.push({ pid: target.pid, reason: `pid ${target.pid} could not be sent ${signal}: ${failure}` })
    }
  }
}

const reportOf = (plan: Plan, processes: ReadonlyArray<ProcStat>): LeftoverEntryReport => {
  const byPid = new Map(processes.map((stat) => [stat.pid, stat]))
  const ended: Array<EndedProcess> = []
  for (const target of plan.targets) {
    // A target that went before it was signalled was not ended by us.
    if (target.signal === undefined) continue
    ended.push({
      pid: target.pid,
      pgid: target.pgid,
      command: target.command,
      reason: target.reason,
      signal: target.signal,
      exited: !runs(target, byPid)
    })
  }
  return { entry: plan.entry, ended, skipped: plan.skipped }
}

/**
 * Ends the processes the runtimes of `entries` left (see the module comment for what is judged
 * ours): SIGTERM, then SIGKILL after `grace` (default 2 s) to whatever still runs, then a bounded
 * wait (5 s) for that to go. Returns one report per entry, in the entries' order. Fails with
 * `ProcessScanFailed` when /proc cannot be read; the first scan, before anything is signalled,
 * is where that shows. With no entries nothing is read.
 */
export const endLeftovers: (
  entries: ReadonlyArray<RuntimeProcess>,
  options?: EndLeftoversOptions
) => Effect.Effect<LeftoverReport, ProcessScanFailed> = Effect.fn("endLeftovers")(function*(
  entries: ReadonlyArray<RuntimeProcess>,
  options?: EndLeftoversOptions
) {
  const grace = Duration.fromInputUnsafe(options?.grace ?? "2 seconds")
  // Nothing to look for: /proc is not needed.
  if (entries.length === 0) return { entries: [] }
  const plans = planFor(entries, yield* scanLiveProcesses)
  if (plans.some((plan) => plan.targets.length > 0)) {
    signalAll(plans, yield* scanLiveProcesses, "SIGTERM")
    if (!(yield* waitUntilGone(plans, grace))) {
      signalAll(plans, yield* scanLiveProcesses, "SIGKILL")
      yield* waitUntilGone(plans, killWait)
    }
  }
  const processes = yield* scanLiveProcesses
  return { entries: plans.map((plan) => reportOf(plan, processes)) }
})

/** One log line for a process ended for the runtime of agent `agentId`. */
export const describeEnded = (agentId: string, ended: EndedProcess): string =>
  `Ended ${ended.command || "?"} (pid ${ended.pid}, group ${ended.pgid}) left by agent ${agentId}'s runtime: ${ended.reason}; ${ended.signal}${
    ended.exited ? "" : ", still running afterwards"
  }`

/** One log line for a process left alone for the runtime of agent `agentId`. */
export const describeSkipped = (agentId: string, skipped: SkippedProcess): string =>
  `Left alone for agent ${agentId}'s runtime: ${skipped.reason}`
