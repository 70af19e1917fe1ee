/**
 * signalGroup and signalProcess refuse the ids for which `kill` means something else than "this
 * group" or "this process" (0: the caller's own group; -1: every process it may signal), and a
 * target that is already gone is not an error. A real detached sleep is signalled by pid and
 * proved gone.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { readStat } from "../../../../src/platform/procfs.ts"
import { groupAlive, signalGroup, signalProcess } from "../../../../src/platform/processGroups.ts"

const noSuchId = 4_194_305

describe("signalGroup and signalProcess", () => {
  it("throw a RangeError for ids that would reach this process's group or every process", () => {
    for (const pgid of [0, 1, -5, 2.5, Number.NaN]) {
      assert.throws(() => signalGroup(pgid, "SIGTERM"), RangeError, "not a process group id")
    }
    for (const pid of [0, -1, -5, 2.5, Number.NaN]) {
      assert.throws(() => signalProcess(pid, "SIGTERM"), RangeError, "not a process id")
    }
  })

  it.live("signal one process by pid; a target that does not exist is not an error", () =>
    Effect.gen(function*() {
      const child = spawn("sleep", ["300"], { detached: true, stdio: "ignore" })
      child.unref()
      const pid = child.pid
      if (pid === undefined) return assert.fail("sleep started without a pid")
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
      )
      assert.strictEqual(readStat(pid)?.pgid, pid)
      signalProcess(pid, "SIGTERM")
      yield* Effect.promise(() => exited).pipe(Effect.timeout("5 seconds"))
      assert.isFalse(groupAlive(pid), "gone, and reaped")
      // Above the largest pid_max Linux allows (2^22): no process nor group can have this id.
      signalProcess(noSuchId, "SIGTERM")
      signalGroup(noSuchId, "SIGTERM")
    }).pipe(Effect.scoped))
})
