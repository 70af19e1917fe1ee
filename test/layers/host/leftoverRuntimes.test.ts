/**
 * endLeftovers against real processes (time is real, so every wait polls with a bound): what a
 * dead daemon's runtimes left is ended when it is provably theirs (a group leader with the start
 * time recorded, or a process carrying the runtime's marker) and left alone otherwise.
 *
 * Every process a test starts either carries a marker the test made or is tracked by pid and start
 * time as soon as it is known. Each test ends by proving none of them runs; `afterEach` SIGKILLs,
 * by pid, whatever a failed test left and waits (bounded) until it has gone. Exited processes not
 * yet reaped count as gone: the init of this machine reaps orphans late.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import type { LeftoverEntryReport, RuntimeProcess } from "../../../src/domain/runtimeProcess.ts"
import { describeEnded, describeSkipped, endLeftovers } from "../../../src/layers/host/leftoverRuntimes.ts"
import { type ProcStat, readStat } from "../../../src/platform/procfs.ts"
import { signalProcess } from "../../../src/platform/processGroups.ts"
import {
  carriesMarker,
  commandOf,
  readEnviron,
  runtimeMarkerName
} from "../../../src/platform/escapedProcesses.ts"
import { liveProcesses } from "../../../src/platform/detachedGroups.ts"
import { freshMarker } from "../../support/runtimeMarker.ts"

// --- what a test started ------------------------------------------------------------

/** The markers the running test handed out: every process carrying one is the test's. */
const markers = new Set<string>()
/** Processes the running test started without a marker of its own: pid → start time. */
const tracked = new Map<number, number>()

/** A fresh marker, owned by the running test. */
const marker = (): string => {
  const value = freshMarker()
  markers.add(value)
  return value
}

/** Notes a process the test started, by pid and its start time now; `undefined` when it is gone already. */
const track = (pid: number): number | undefined => {
  const stat = readStat(pid)
  if (stat !== undefined) tracked.set(pid, stat.startTime)
  return stat?.startTime
}

/** The test's processes that still run (exited but unreaped ones do not). */
const survivors = (): ReadonlyArray<ProcStat> => {
  const processes = liveProcesses()
  if (processes === undefined) return assert.fail("cannot list /proc")
  return processes.filter((stat) => {
    if (tracked.get(stat.pid) === stat.startTime) return true
    if (stat.pid === process.pid) return false
    const environ = readEnviron(stat.pid)
    return environ !== undefined && [...markers].some((one) => carriesMarker(environ, one))
  })
}

const sleepMillis = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis))

/** SIGKILLs, by pid, every process of the test still running; waits up to 5 s until all have gone. */
const killSurvivors = async (): Promise<ReadonlyArray<number>> => {
  const deadline = Date.now() + 5_000
  let left = survivors()
  while (left.length > 0 && Date.now() < deadline) {
    for (const stat of left) signalProcess(stat.pid, "SIGKILL")
    await sleepMillis(25)
    left = survivors()
  }
  return left.map((stat) => stat.pid)
}

afterEach(async () => {
  const left = await killSurvivors()
  markers.clear()
  tracked.clear()
  if (left.length > 0) throw new Error(`processes a test started still run after SIGKILL: ${left.join(", ")}`)
})

/** Polls `condition` for at most `timeoutMillis`. */
const eventually = (condition: () => boolean, what: string, timeoutMillis = 10_000) =>
  Effect.gen(function*() {
    const deadline = (yield* Clock.currentTimeMillis) + timeoutMillis
    while (!condition()) {
      if ((yield* Clock.currentTimeMillis) > deadline) return assert.fail(`timed out waiting until ${what}`)
      yield* Effect.sleep("25 millis")
    }
  })

/** Proves that nothing the test started runs any more. */
const noneLeft = eventually(() => survivors().length === 0, "none of the test's processes runs")

// --- starting processes -----------------------------------------------------------

/** The environment of this process without any runtime marker. */
const unmarkedEnv = (): NodeJS.ProcessEnv => {
  const env = { ...process.env }
  delete env[runtimeMarkerName]
  return env
}

interface Started {
  readonly child: ChildProcess
  readonly pid: number
  readonly startTime: number
  /** The pids the script printed, as `name pid` lines; each is tracked when it arrives. */
  readonly printed: Map<string, number>
  /** Everything it printed so far. */
  readonly output: () => string
  /** Whether it has exited (and Node has reaped it). */
  readonly exited: () => boolean
  /** Closes its stdin, so a script waiting in `read _` goes on. */
  readonly release: () => void
}

/**
 * Runs `sh -c script` with piped stdin and stdout, unref'd (Node reaps it when it exits), with
 * `marker` in its environment when given; tracked by pid and start time.
 */
const startShell = (script: string, options: { readonly marker?: string; readonly detached?: boolean } = {}) =>
  Effect.callback<Started, Error>((resume) => {
    const env = unmarkedEnv()
    if (options.marker !== undefined) env[runtimeMarkerName] = options.marker
    const child = spawn("sh", ["-c", script], {
      detached: options.detached ?? false,
      env,
      stdio: ["pipe", "pipe", "ignore"]
    })
    child.unref()
    const printed = new Map<string, number>()
    let output = ""
    let buffered = ""
    child.stdout?.setEncoding("utf8")
    child.stdout?.on("data", (text: string) => {
      output += text
      buffered += text
      const lines = buffered.split("\n")
      buffered = lines.pop() ?? ""
      for (const line of lines) {
        const [name, pid] = line.trim().split(" ")
        if (name === undefined || pid === undefined || !/^[1-9]\d*$/.test(pid)) continue
        track(Number(pid))
        printed.set(name, Number(pid))
      }
    })
    child.stdin?.on("error", () => {})
    child.once("error", (error) => resume(Effect.fail(error)))
    child.once("spawn", () => {
      const pid = child.pid
      const startTime = pid === undefined ? undefined : track(pid)
      if (pid === undefined || startTime === undefined) {
        return resume(Effect.fail(new Error(`sh ${pid ?? "without a pid"} is not running once spawned`)))
      }
      resume(Effect.succeed({
        child,
        pid,
        startTime,
        printed,
        output: () => output,
        exited: () => child.exitCode !== null || child.signalCode !== null,
        release: () => child.stdin?.end()
      }))
    })
  })

/** Waits until the script has printed every name in `names`, then returns their pids in that order. */
const printedPids = (started: Started, ...names: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    yield* eventually(() => names.every((name) => started.printed.has(name)), `${names.join(", ")} are printed`)
    return names.map((name) => started.printed.get(name) ?? assert.fail(`${name} was not printed`))
  })

/** The live members of process group `pgid`. */
const groupMembers = (pgid: number): ReadonlyArray<number> =>
  (liveProcesses() ?? []).filter((stat) => stat.pgid === pgid).map((stat) => stat.pid)

/** Whether group `pgid` holds its leader and exactly `sleeps` processes that have exec'd `sleep 300`. */
const groupReady = (pgid: number, sleeps: number) => () => {
  const members = groupMembers(pgid)
  return members.length === sleeps + 1 && members.filter((pid) => commandOf(pid) === "sleep 300").length === sleeps
}

const isRunning = (pid: number, startTime: number): boolean => {
  const stat = readStat(pid)
  return stat !== undefined && stat.state !== "Z" && stat.state !== "X" && stat.startTime === startTime
}

const entryOf = (agentId: string, pid: number, startTime: number, runtimeMarker: string): RuntimeProcess => ({
  agentId,
  pid,
  startTime,
  marker: runtimeMarker,
  recordedAt: 1_000
})

const endedPids = (report: LeftoverEntryReport) => report.ended.map((ended) => ended.pid).sort((a, b) => a - b)
const sorted = (pids: ReadonlyArray<number>) => [...pids].sort((a, b) => a - b)

/** Background jobs write nowhere, so only the script's own `echo`es reach its stdout. */
const quiet = ">/dev/null 2>&1"

// --- tests ------------------------------------------------------------------------------

describe("endLeftovers", () => {
  it.effect("no entries: nothing is looked for", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* endLeftovers([]), { entries: [] })
    }))

  it.live("a detached group leader whose start time matches: its whole group is ended", () =>
    Effect.gen(function*() {
      const runtimeMarker = marker()
      const leader = yield* startShell(`sleep 300 ${quiet} & sleep 300 ${quiet} & wait`, {
        marker: runtimeMarker,
        detached: true
      })
      yield* eventually(groupReady(leader.pid, 2), "the leader and both sleeps run")
      const group = groupMembers(leader.pid)

      const report = yield* endLeftovers([entryOf("agent-a", leader.pid, leader.startTime, runtimeMarker)])
      const [only] = report.entries
      assert.strictEqual(report.entries.length, 1)
      assert.deepStrictEqual(endedPids(only!), sorted(group))
      for (const ended of only!.ended) {
        assert.strictEqual(ended.reason, "group leader verified by start time")
        assert.strictEqual(ended.pgid, leader.pid)
        // SIGTERM was enough: the sleeps, reparented to an init that reaps late, counted as gone as zombies.
        assert.strictEqual(ended.signal, "SIGTERM")
        assert.isTrue(ended.exited)
      }
      const commands = only!.ended.map((ended) => ended.command).sort()
      assert.deepStrictEqual(commands, ["sh -c " + `sleep 300 ${quiet} & sleep 300 ${quiet} & wait`, "sleep 300", "sleep 300"])
      assert.deepStrictEqual(only!.skipped, [])
      assert.match(
        describeEnded("agent-a", only!.ended[0]!),
        /^Ended .+ \(pid \d+, group \d+\) left by agent agent-a's runtime: group leader verified by start time; SIGTERM$/
      )
      yield* noneLeft
    }), 30_000)

  it.live("a verified group that ignores SIGTERM is SIGKILLed once the grace period is over", () =>
    Effect.gen(function*() {
      const runtimeMarker = marker()
      // SIG_IGN is inherited: the sleep ignores SIGTERM too.
      const leader = yield* startShell(`trap '' TERM; sleep 300 ${quiet} & wait`, {
        marker: runtimeMarker,
        detached: true
      })
      yield* eventually(groupReady(leader.pid, 1), "the leader and its sleep run")
      const started = yield* Clock.currentTimeMillis
      const report = yield* endLeftovers([entryOf("agent-a", leader.pid, leader.startTime, runtimeMarker)], {
        grace: "400 millis"
      })
      const elapsed = (yield* Clock.currentTimeMillis) - started
      assert.isAtLeast(elapsed, 400, "SIGKILL waited for the grace period")
      const [only] = report.entries
      assert.strictEqual(only!.ended.length, 2)
      for (const ended of only!.ended) {
        assert.strictEqual(ended.signal, "SIGKILL")
        assert.isTrue(ended.exited)
      }
      yield* noneLeft
    }), 30_000)

  it.live("leader gone: the members carrying the marker are ended; the group id is never signalled", () =>
    Effect.gen(function*() {
      const runtimeMarker = marker()
      const leader = yield* startShell(
        [
          `nohup sleep 300 ${quiet} &`,
          `echo member $!`,
          // Same group, environment scrubbed: nothing proves it is the runtime's.
          `env -u ${runtimeMarkerName} sleep 300 ${quiet} &`,
          `echo scrubbed $!`,
          `read _`
        ].join("\n"),
        { marker: runtimeMarker, detached: true }
      )
      const [member, scrubbed] = yield* printedPids(leader, "member", "scrubbed")
      const scrubbedStart = tracked.get(scrubbed!)!
      yield* eventually(() => {
        const environ = readEnviron(scrubbed!)
        return environ !== undefined && !carriesMarker(environ, runtimeMarker)
      }, "env has exec'd sleep without the marker")
      leader.release()
      yield* eventually(() => leader.exited(), "the leader has exited")
      assert.sameMembers([...groupMembers(leader.pid)], [member!, scrubbed!], "the members outlive their leader")

      const report = yield* endLeftovers([entryOf("agent-a", leader.pid, leader.startTime, runtimeMarker)])
      const [only] = report.entries
      assert.deepStrictEqual(endedPids(only!), [member!])
      assert.strictEqual(only!.ended[0]!.reason, "group member carrying the marker")
      assert.strictEqual(only!.ended[0]!.pgid, leader.pid)
      assert.strictEqual(only!.ended[0]!.command, "sleep 300")
      assert.deepStrictEqual(only!.skipped.map((skipped) => skipped.pid), [leader.pid, scrubbed!])
      assert.strictEqual(only!.skipped[0]!.reason, `pid ${leader.pid} has exited`)
      assert.include(only!.skipped[1]!.reason, "does not carry the marker")
      assert.match(describeSkipped("agent-a", only!.skipped[1]!), /^Left alone for agent agent-a's runtime: pid \d+/)

      // Had the group been signalled, the scrubbed member would be gone (sleep dies of SIGTERM).
      yield* Effect.sleep("200 millis")
      assert.isTrue(isRunning(scrubbed!, scrubbedStart), "the unmarked member still runs")
      signalProcess(scrubbed!, "SIGKILL")
      yield* noneLeft
    }), 30_000)

  it.live("an escaped process (a session and group of its own, reparented to init) carrying the marker is ended", () =>
    Effect.gen(function*() {
      const runtimeMarker = marker()
      // Not a group leader inside the shell, so setsid calls setsid() and execs sleep in place: $! is the sleep.
      const leader = yield* startShell(`setsid sleep 300 ${quiet} &\necho escaped $!\nread _`, {
        marker: runtimeMarker,
        detached: true
      })
      const [escaped] = yield* printedPids(leader, "escaped")
      yield* eventually(() => readStat(escaped!)?.pgid === escaped, "the escaped process leads its own group")
      leader.release()
      yield* eventually(() => leader.exited(), "the leader has exited")
      assert.notStrictEqual(readStat(escaped!)?.ppid, leader.pid, "reparented away from its dead parent")

      const report = yield* endLeftovers([entryOf("agent-a", leader.pid, leader.startTime, runtimeMarker)])
      const [only] = report.entries
      assert.deepStrictEqual(endedPids(only!), [escaped!])
      assert.strictEqual(only!.ended[0]!.reason, "escaped process carrying the marker")
      assert.strictEqual(only!.ended[0]!.pgid, escaped!)
      assert.isTrue(only!.ended[0]!.exited)
      yield* noneLeft
    }), 30_000)

  it.live("a verified group and its escaped process are both ended, each for its own reason", () =>
    Effect.gen(function*() {
      const runtimeMarker = marker()
      const leader = yield* startShell(`setsid sleep 300 ${quiet} &\necho escaped $!\nsleep 300 ${quiet} &\nwait`, {
        marker: runtimeMarker,
        detached: true
      })
      const [escaped] = yield* printedPids(leader, "escaped")
      yield* eventually(
        () => readStat(escaped!)?.pgid === escaped && groupReady(leader.pid, 1)(),
        "the group's two processes and the escaped one run"
      )
      const group = groupMembers(leader.pid)

      const report = yield* endLeftovers([entryOf("agent-a", leader.pid, leader.startTime, runtimeMarker)])
      const [only] = report.entries
      assert.deepStrictEqual(endedPids(only!), sorted([...group, escaped!]))
      for (const ended of only!.ended) {
        assert.strictEqual(
          ended.reason,
          ended.pid === escaped ? "escaped process carrying the marker" : "group leader verified by start time"
        )
      }
      yield* noneLeft
    }), 30_000)

  it.live("an ended process that its parent never reaps (a zombie) counts as gone", () =>
    Effect.gen(function*() {
      const gone = yield* startShell(`read _`, { detached: true })
      gone.release()
      yield* eventually(() => gone.exited(), "the leader has exited")
      const runtimeMarker = marker()
      // The parent execs sleep, which never waits for the marked child it inherits.
      const parent = yield* startShell(
        `${runtimeMarkerName}=${runtimeMarker} sleep 300 ${quiet} &\necho child $!\nexec sleep 300`,
        { detached: true }
      )
      const [child] = yield* printedPids(parent, "child")
      yield* eventually(() => commandOf(parent.pid) === "sleep 300" && commandOf(child!) === "sleep 300", "both sleep")

      const started = yield* Clock.currentTimeMillis
      const report = yield* endLeftovers([entryOf("agent-a", gone.pid, gone.startTime, runtimeMarker)], {
        grace: "1 second"
      })
      const [only] = report.entries
      assert.deepStrictEqual(endedPids(only!), [child!])
      assert.strictEqual(only!.ended[0]!.signal, "SIGTERM", "no SIGKILL: the zombie was gone")
      assert.isTrue(only!.ended[0]!.exited)
      assert.isBelow((yield* Clock.currentTimeMillis) - started, 1_000, "it did not wait out the grace period")
      assert.strictEqual(readStat(child!)?.state, "Z", "the child is a zombie of its living parent")
      assert.isTrue(isRunning(parent.pid, parent.startTime), "the unmarked parent was left alone")
      signalProcess(parent.pid, "SIGKILL")
      yield* noneLeft
    }), 30_000)

  it.live("pid reuse: a live unmarked process whose start time differs from the entry's is never signalled", () =>
    Effect.gen(function*() {
      // Detached, so signalling the entry's pid as a group would reach it as well.
      const stranger = yield* startShell(`exec sleep 300`, { detached: true })
      yield* eventually(() => readStat(stranger.pid)?.pgid === stranger.pid, "it leads its own group")

      const report = yield* endLeftovers(
        [entryOf("agent-a", stranger.pid, stranger.startTime + 1, marker())],
        { grace: "200 millis" }
      )
      const [only] = report.entries
      assert.deepStrictEqual(only!.ended, [])
      assert.deepStrictEqual(only!.skipped, [{
        pid: stranger.pid,
        reason: `pid ${stranger.pid} now belongs to another process (start time differs)`
      }])
      // sleep dies of SIGTERM: still running a moment later, it was sent nothing.
      yield* Effect.sleep("200 millis")
      assert.isTrue(isRunning(stranger.pid, stranger.startTime))
      signalProcess(stranger.pid, "SIGKILL")
      yield* noneLeft
    }), 30_000)

  it.live("start time matches but the pid no longer leads a group: neither its group nor anything unmarked is signalled", () =>
    Effect.gen(function*() {
      // An unmarked group whose member is named by the entry as if it were a leader.
      const group = yield* startShell(`sleep 300 ${quiet} &\necho member $!\nwait`, { detached: true })
      const [member] = yield* printedPids(group, "member")
      const memberStart = tracked.get(member!)!

      const report = yield* endLeftovers([entryOf("agent-a", member!, memberStart, marker())], { grace: "200 millis" })
      const [only] = report.entries
      assert.deepStrictEqual(only!.ended, [])
      assert.deepStrictEqual(only!.skipped, [{
        pid: member!,
        reason: `pid ${member} no longer leads a process group (it is in group ${group.pid}), so no group is signalled for it`
      }])
      yield* Effect.sleep("200 millis")
      assert.isTrue(isRunning(group.pid, group.startTime), "the group's leader still runs")
      assert.isTrue(isRunning(member!, memberStart), "the member still runs")
      signalProcess(member!, "SIGKILL")
      signalProcess(group.pid, "SIGKILL")
      yield* noneLeft
    }), 30_000)

  it.live("a process carrying another entry's marker is not ended for this entry (nor one whose marker merely starts with it)", () =>
    Effect.gen(function*() {
      // An entry whose leader has exited: only marked processes can be its.
      const gone = yield* startShell(`read _`, { detached: true })
      gone.release()
      yield* eventually(() => gone.exited(), "the leader has exited")
      const mine = marker()
      const others = marker()
      const longer = `${mine}0`
      markers.add(longer)
      const ofMine = yield* startShell(`exec sleep 300`, { marker: mine, detached: true })
      const ofOthers = yield* startShell(`exec sleep 300`, { marker: others, detached: true })
      const ofLonger = yield* startShell(`exec sleep 300`, { marker: longer, detached: true })
      yield* eventually(
        () => [ofMine, ofOthers, ofLonger].every((one) => commandOf(one.pid) === "sleep 300"),
        "the three sleeps run"
      )
      const mineEntry = entryOf("agent-mine", gone.pid, gone.startTime, mine)
      const othersEntry = entryOf("agent-others", gone.pid, gone.startTime, others)

      const first = yield* endLeftovers([mineEntry], { grace: "200 millis" })
      assert.deepStrictEqual(endedPids(first.entries[0]!), [ofMine.pid])
      yield* Effect.sleep("200 millis")
      assert.isTrue(isRunning(ofOthers.pid, ofOthers.startTime), "another entry's process still runs")
      assert.isTrue(isRunning(ofLonger.pid, ofLonger.startTime), "a longer marker is another marker")

      // With both entries, each process is reported under its own entry.
      const both = yield* endLeftovers([mineEntry, othersEntry], { grace: "200 millis" })
      assert.deepStrictEqual(both.entries.map((one) => one.entry.agentId), ["agent-mine", "agent-others"])
      assert.deepStrictEqual(both.entries[0]!.ended, [])
      assert.deepStrictEqual(endedPids(both.entries[1]!), [ofOthers.pid])
      assert.strictEqual(both.entries[1]!.ended[0]!.reason, "escaped process carrying the marker")
      assert.isTrue(isRunning(ofLonger.pid, ofLonger.startTime))
      signalProcess(ofLonger.pid, "SIGKILL")
      yield* noneLeft
    }), 30_000)

  it.live("a daemon started inside a leftover runtime signals neither itself nor its own process group", () =>
    Effect.gen(function*() {
      const runtimeMarker = marker()
      const module = (name: string) => JSON.stringify(path.resolve(import.meta.dirname, "../../../src", name))
      // Runs in the group of the shell that started it, with the marker: the daemon's situation.
      const daemon = [
        `import { Effect } from "effect"`,
        `import { endLeftovers } from ${module("layers/host/leftoverRuntimes.ts")}`,
        `import { readStat } from ${module("platform/procfs.ts")}`,
        `const leader = process.ppid`,
        `const entry = { agentId: "agent-a", pid: leader, startTime: readStat(leader).startTime,`,
        `  marker: process.env.${runtimeMarkerName}, recordedAt: 0 }`,
        `const report = await Effect.runPromise(endLeftovers([entry], { grace: "200 millis" }))`,
        `console.log("report " + process.pid)`,
        `console.log(JSON.stringify(report))`
      ].join("\n")
      // The shell (an unmarked group leader) starts the daemon with the marker, then waits for it.
      const shell = yield* startShell(
        `${runtimeMarkerName}=${runtimeMarker} "${process.execPath}" --input-type=module -e '${daemon}'\necho status=$?\nread _`,
        { detached: true }
      )
      yield* eventually(() => shell.output().includes("status=") || shell.exited(), "the daemon has exited", 20_000)
      assert.include(shell.output(), "status=0", "the daemon exited normally")
      const json = shell.output().split("\n").find((line) => line.startsWith("{"))
      if (json === undefined) return assert.fail(`the daemon printed no report: ${shell.output()}`)
      const report: unknown = JSON.parse(json)
      assert.deepNestedInclude(report, { "entries[0].ended": [] })
      assert.deepNestedInclude(report, {
        "entries[0].skipped[0]": {
          pid: shell.pid,
          reason: `process group ${shell.pid} is this daemon's own, so it is not signalled`
        }
      })
      assert.isTrue(isRunning(shell.pid, shell.startTime), "the shell still runs")
      shell.release()
      yield* eventually(() => shell.exited(), "the shell has exited")
      yield* noneLeft
    }), 30_000)
})
