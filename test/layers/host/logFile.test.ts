import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { formatLogLine, lastLogLines, logFile, rotatedLogFile, rotatingLogFile } from "../../../src/layers/host/logFile.ts"
import { keptStderr } from "../../support/logs.ts"

const tempHome = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-log-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

describe("the daemon's log file", () => {
  it.effect("appends JSON lines, rotates by size, keeps the newest files and drops the oldest", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      yield* Effect.scoped(Effect.gen(function*() {
        const logger = yield* rotatingLogFile(home, { maxBytes: 1000, keep: 2 })
        yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => i + 1), (n) =>
          Effect.logInfo(`line ${n}`).pipe(Effect.annotateLogs({ n })), { discard: true }).pipe(
            Effect.provide(Logger.layer([logger]))
          )
      }))
      const sizes = [logFile(home), rotatedLogFile(home, 1), rotatedLogFile(home, 2)].map((file) => readFileSync(file).length)
      for (const size of sizes) assert.isAtMost(size, 1000)
      assert.isFalse(existsSync(rotatedLogFile(home, 3)), "only two rotated files are kept")
      // The newest lines survive, in order, across the rotated files.
      const lines = lastLogLines(home, 100, 2)
      const numbers = lines.map((line) => Number(JSON.parse(line).annotations.n))
      assert.strictEqual(numbers.at(-1), 40)
      assert.deepStrictEqual(numbers, Array.from({ length: numbers.length }, (_, i) => 40 - numbers.length + 1 + i))
      assert.isBelow(numbers[0]!, 35, "lines come from the rotated files too")
      assert.isAbove(numbers[0]!, 1, "the oldest file was dropped")
      assert.deepStrictEqual(lastLogLines(home, 3, 2).map((line) => JSON.parse(line).message), ["line 38", "line 39", "line 40"])
      assert.match(formatLogLine(lines.at(-1)!), /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO  line 40 n=40$/)
      assert.strictEqual(formatLogLine("not json"), "not json")
    }))

  it.effect("a home whose log cannot be written does not fail the logging fiber", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      // The logger says once, on stderr, that it cannot write: kept, shown if the test fails.
      yield* keptStderr("what the logger wrote to stderr")
      yield* Effect.scoped(Effect.gen(function*() {
        // Small enough that the second line rotates: the rename fails once the home is gone.
        const logger = yield* rotatingLogFile(home, { maxBytes: 10, keep: 1 })
        yield* Effect.logInfo("before").pipe(Effect.provide(Logger.layer([logger])))
        rmSync(home, { recursive: true, force: true })
        yield* Effect.logInfo("after the home went away").pipe(Effect.provide(Logger.layer([logger])))
      }))
    }))
})
