/**
 * Opening a daemon in its order (H1), in this process over a real home, SQLite file and listener:
 * a failure, or an interruption (what a signal does), right after each stage releases what was
 * acquired and leaves the home as it was: no token, database, record, lock or plugins folder
 * (the log that says why is the one file a failed start writes). Then the home opens normally.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type DaemonOutcome, type OpeningStage, runDaemon } from "../../src/programs/runDaemon.ts"
import { quietLogs } from "../support/logs.ts"

const stages: ReadonlyArray<OpeningStage> = ["lock", "storage", "migrations", "providers", "listener", "admission"]

const tempHome = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-opening-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Runs the daemon of `home` on any free port, with `onStage` run right after each stage. */
const open = (home: string, onStage: (stage: OpeningStage) => Effect.Effect<void>, reached: Array<OpeningStage>) => {
  const outcome: DaemonOutcome = { running: false, retired: false }
  return runDaemon(home, { port: 0 }, undefined, outcome, {
    reached: (stage) => Effect.sync(() => reached.push(stage)).pipe(Effect.andThen(onStage(stage)))
  }).pipe(Effect.map(() => outcome), quietLogs("the daemon's log"))
}

describe("opening a daemon, stage by stage (H1)", () => {
  for (const stage of stages) {
    it.live(`a failure right after ${stage} leaves the home as it was`, () =>
      Effect.gen(function*() {
        const home = yield* tempHome
        const reached: Array<OpeningStage> = []
        const exit = yield* Effect.exit(open(home, (at) => at === stage ? Effect.die(new Error(`injected at ${at}`)) : Effect.void, reached))
        assert.isTrue(Exit.isFailure(exit))
        assert.deepStrictEqual(reached, stages.slice(0, stages.indexOf(stage) + 1), "stages are reached in order")
        assert.deepStrictEqual(readdirSync(home), ["daemon.log"])
      }))

    it.live(`an interruption (a signal) right after ${stage} leaves the home as it was`, () =>
      Effect.gen(function*() {
        const home = yield* tempHome
        const reached: Array<OpeningStage> = []
        const exit = yield* Effect.exit(open(home, (at) => at === stage ? Effect.interrupt : Effect.void, reached))
        assert.isTrue(Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause))
        assert.deepStrictEqual(readdirSync(home), ["daemon.log"])
      }))
  }

  it.live("with no fault the home opens, is ready only after admission, and keeps its files once stopped", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      const reached: Array<OpeningStage> = []
      const running = yield* Effect.forkChild(open(home, () => Effect.void, reached))
      for (let i = 0; i < 200 && !readdirSync(home).includes("daemon.json"); i++) yield* Effect.sleep("25 millis")
      assert.deepStrictEqual(reached, stages, "the record is written after the last stage")
      yield* Fiber.interrupt(running)
      assert.deepStrictEqual(readdirSync(home).sort(), ["daemon.log", "plugins", "quiesce.sqlite", "token"])
    }))
})
