/**
 * startLineProcess against a real child (time is real, so waits poll with a bound): output waits
 * for the reader, lines are handled one at a time in arrival order, the exit comes last.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import { maxLineBytes } from "../../../../src/domain/pluginProtocol.ts"
import { groupAlive } from "../../../../src/platform/processGroups.ts"
import { startLineProcess } from "../../../../src/layers/providers/process/lineProcess.ts"

/**
 * Writes a CRLF line, an oversized one, one the test cannot decode and an ordinary one; writes
 * "three" when told "go", then exits 3 a moment later (Node may report an exit before the last output).
 */
const child = `
process.stdout.write("one\\r\\n" + "x".repeat(${maxLineBytes + 10}) + "\\nbad\\ntwo\\n")
process.stdin.setEncoding("utf8")
process.stdin.on("data", (text) => {
  if (text.includes("go")) process.stdout.write("three\\n", () => setTimeout(() => process.exit(3), 100))
})
`

const eventually = (condition: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      if (condition()) return
      yield* Effect.sleep("25 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

describe("startLineProcess", () => {
  it.live("queues output until read, handles it in order one item at a time, and the exit last", () =>
    Effect.scoped(Effect.gen(function*() {
      const scope = yield* Effect.scope
      const lines = yield* startLineProcess({ command: process.execPath, args: ["-e", child] }, process.cwd(), {
        stripCarriageReturn: true
      })
      yield* Effect.addFinalizer(() => lines.terminate("1 second"))
      // Nothing is taken before the reader starts: the lines wait, counted as unread.
      yield* eventually(() => lines.unreadLines() === 3, "three lines are queued")

      const seen: Array<string> = []
      const done = yield* Deferred.make<void>()
      yield* lines.readLines(scope, {
        decode: (line) => line === "bad" ? Effect.fail(`cannot decode ${line}`) : Effect.succeed(line),
        onUndecodable: (error) => Effect.sync(() => seen.push(error)),
        onMessage: (line) =>
          Effect.gen(function*() {
            seen.push(`start ${line} (${lines.unreadLines()} unread)`)
            // A slow handler: the next line must wait for it.
            yield* Effect.sleep("20 millis")
            seen.push(`end ${line}`)
          }),
        onOversizedLine: (bytes) => Effect.sync(() => seen.push(`oversized ${bytes > maxLineBytes}`)),
        onExit: (code) => Effect.andThen(Effect.sync(() => seen.push(`exit ${code}`)), Deferred.succeed(done, undefined))
      })
      yield* eventually(() => seen.includes("end two"), "the queued lines are handled")
      lines.write("go")
      yield* Deferred.await(done).pipe(Effect.timeout("5 seconds"))

      assert.deepStrictEqual(seen, [
        "start one (2 unread)",
        "end one",
        "oversized true",
        "cannot decode bad",
        "start two (0 unread)",
        "end two",
        "start three (0 unread)",
        "end three",
        "exit 3"
      ])
      yield* eventually(() => !groupAlive(lines.pid), "the process group is gone")
    })))

  it.live("output still arriving when the exit is reported is handled before the exit", () =>
    Effect.scoped(Effect.gen(function*() {
      const scope = yield* Effect.scope
      // The shell exits at once; its background child writes a moment later, then closes stdout.
      const lines = yield* startLineProcess({ command: "sh", args: ["-c", "(sleep 0.05; echo late) & echo early"] }, process.cwd())
      yield* Effect.addFinalizer(() => lines.terminate("1 second"))
      const seen: Array<string> = []
      const done = yield* Deferred.make<void>()
      yield* lines.readLines(scope, {
        decode: (line: string) => Effect.succeed(line),
        onUndecodable: () => Effect.void,
        onMessage: (line) => Effect.sync(() => seen.push(line)),
        onOversizedLine: () => Effect.void,
        onExit: (code) => Effect.andThen(Effect.sync(() => seen.push(`exit ${code}`)), Deferred.succeed(done, undefined))
      })
      yield* Deferred.await(done).pipe(Effect.timeout("5 seconds"))
      assert.deepStrictEqual(seen, ["early", "late", "exit 0"])
    })))
})
