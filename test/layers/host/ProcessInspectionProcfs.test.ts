/**
 * ProcessInspection from procfs (H5) against real process groups. Time is real (processes run),
 * so waits poll with a bound; every group started here is killed when its test ends.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import * as ProcessInspectionProcfs from "../../../src/layers/host/ProcessInspectionProcfs.ts"
import { parseStat } from "../../../src/platform/procfs.ts"
import { ProcessInspection, type ProcessSample } from "../../../src/services/ProcessInspection.ts"

/** Live (not exited) processes whose process group is `pgid`, read straight from /proc. */
const liveGroupMembers = (pgid: number): ReadonlyArray<number> => {
  const members: Array<number> = []
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    let text: string
    try {
      text = readFileSync(`/proc/${name}/stat`, "latin1")
    } catch {
      continue
    }
    const stat = parseStat(text)
    if (stat !== undefined && stat.pgid === pgid && stat.state !== "Z" && stat.state !== "X") members.push(stat.pid)
  }
  return members
}

const killGroup = (pgid: number) => {
  try {
    process.kill(-pgid, "SIGKILL")
  } catch {
    // already gone
  }
}

/** A shell script in a process group of its own; the group is killed, and proven gone, at scope close. */
const group = (script: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn("sh", ["-c", script], { detached: true, stdio: "ignore" })
      const pid = child.pid
      if (pid === undefined) throw new Error("sh did not start")
      return pid
    }),
    (pid) =>
      Effect.gen(function*() {
        killGroup(pid)
        yield* poll(() => liveGroupMembers(pid).length === 0, `group ${pid} gone`)
      })
  )

/** Polls until the condition holds, at most `tries` times 50 ms apart. */
const poll = (condition: () => boolean, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      if (condition()) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

/** Polls the effect until it gives a value the predicate accepts. */
const sampleUntil = <A>(effect: Effect.Effect<A>, accept: (a: A) => boolean, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      const value = yield* effect
      if (accept(value)) return value
      yield* Effect.sleep("50 millis")
    }
    return assert.fail(`timed out waiting until ${what}`)
  })

const atLeast = (processes: number) => (sample: Option.Option<ProcessSample>) =>
  Option.isSome(sample) && sample.value.measuredProcesses >= processes

describe("parseStat", () => {
  it("reads the fields after the last ')' whatever the command name holds", () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3))
    fields[0] = "S"
    fields[1] = "17" // ppid
    fields[2] = "42" // pgid
    fields[19] = "123456" // start time
    const stat = parseStat(`4242 (a) (b c) ) ${fields.join(" ")}\n`)
    assert.deepStrictEqual(stat, { pid: 4242, state: "S", ppid: 17, pgid: 42, startTime: 123456 })
  })

  it("rejects truncated text", () => {
    assert.isUndefined(parseStat("12 (sh) S 1 12"))
    assert.isUndefined(parseStat(""))
  })
})

describe("ProcessInspectionProcfs", () => {
  it.live("samples a process group, checks the start time, and reports None once it is gone", () =>
    Effect.gen(function*() {
      const inspection = yield* ProcessInspection
      const pid = yield* group("sleep 30 & sleep 30 & wait")

      const first = yield* sampleUntil(inspection.sample(pid), atLeast(3), "the shell and both sleeps are seen")
      assert.isTrue(Option.isSome(first))
      if (Option.isNone(first)) return
      assert.strictEqual(first.value.pid, pid)
      assert.isAtLeast(first.value.measuredProcesses, 3)
      assert.isAbove(first.value.rssBytes, 0)

      const second = yield* inspection.sample(pid, first.value.startTime)
      assert.isTrue(Option.isSome(second))
      if (Option.isSome(second)) assert.strictEqual(second.value.startTime, first.value.startTime)

      assert.isTrue(Option.isNone(yield* inspection.sample(pid, first.value.startTime + 1)))

      const all = yield* inspection.sampleAll([pid, pid])
      assert.strictEqual(all.size, 1)
      const fromAll = all.get(pid)
      assert.isTrue(fromAll !== undefined && Option.isSome(fromAll) && fromAll.value.startTime === first.value.startTime)

      killGroup(pid)
      yield* sampleUntil(inspection.sample(pid, first.value.startTime), Option.isNone, "the killed root is None")
      yield* poll(() => liveGroupMembers(pid).length === 0, "no process of the group is left")
    }).pipe(Effect.scoped, Effect.provide(ProcessInspectionProcfs.layer())))

  it.live("counts a job whose parent died (reparented, same process group)", () =>
    Effect.gen(function*() {
      const inspection = yield* ProcessInspection
      // The subshell starts a sleep and exits at once: that sleep is orphaned but keeps the group.
      const pid = yield* group("(sleep 30 &); sleep 30; true")
      const sample = yield* sampleUntil(inspection.sample(pid), atLeast(3), "the shell, its sleep and the orphan")
      assert.isTrue(Option.isSome(sample))
      yield* poll(() => liveGroupMembers(pid).length === 3, "the group holds exactly three live processes")
    }).pipe(Effect.scoped, Effect.provide(ProcessInspectionProcfs.layer())))

  it.live("sampleAll: unknown and invalid pids are None, live ones are sampled", () =>
    Effect.gen(function*() {
      const inspection = yield* ProcessInspection
      const pid = yield* group("sleep 30 & wait")
      yield* sampleUntil(inspection.sample(pid), atLeast(2), "the shell and its sleep are seen")
      // pid_max is at most 2^22, so this pid cannot exist.
      const missing = 4_194_305
      const all = yield* inspection.sampleAll([pid, missing, -1, process.pid])
      assert.deepStrictEqual([...all.keys()], [pid, missing, -1, process.pid])
      assert.isTrue(Option.isSome(all.get(pid)!))
      assert.isTrue(Option.isNone(all.get(missing)!))
      assert.isTrue(Option.isNone(all.get(-1)!))
      assert.isTrue(Option.isSome(all.get(process.pid)!))
    }).pipe(Effect.scoped, Effect.provide(ProcessInspectionProcfs.layer({ admission: 2, deadline: "5 seconds" }))))
})
