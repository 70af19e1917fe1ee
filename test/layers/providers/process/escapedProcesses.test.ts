/**
 * escapedProcesses against real processes (time is real, so waits poll with a bound): a marked
 * shell keeps one child of its own and leaves an orphan behind (a double fork into a session of
 * its own, reparented away from the shell at once). The orphan is found by the marker while it
 * runs and no longer once it has ended; the shell and its own child are never counted; another
 * marker sees nothing. Everything started is ended by pid / process group and proved gone.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { groupAlive, signalGroup } from "../../../../src/platform/processGroups.ts"
import {
  escapedProcesses,
  escapedReason,
  runtimeEnv,
  runtimeMarkerName
} from "../../../../src/platform/escapedProcesses.ts"
import { startLineProcess } from "../../../../src/layers/providers/process/lineProcess.ts"
import { freshMarker, markerOf } from "../../../support/runtimeMarker.ts"

/** The orphan: `( … & )` forks twice, so it is reparented as soon as the subshell exits. */
const script = [
  `( setsid sh -c 'echo orphan $$; exec sleep 30 > /dev/null 2>&1' & )`,
  `sleep 30 > /dev/null 2>&1 &`,
  `echo child $!`,
  `wait`
].join("\n")

/** Polls for at most 10 s (init may take a second to reap an orphan). */
const eventuallyEffect = <E>(condition: Effect.Effect<boolean, E>, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 400; i++) {
      if (yield* condition) return
      yield* Effect.sleep("25 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

const eventually = (condition: () => boolean, what: string) => eventuallyEffect(Effect.sync(condition), what)

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("escapedProcesses", () => {
  it.live("finds a marked orphan while it runs, never the runtime's own tree, and nothing once it has ended", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const marker = freshMarker()
      const tree = yield* startLineProcess({ command: "sh", args: ["-c", script], env: runtimeEnv(marker) }, process.cwd())
      const pids = new Map<string, number>()
      yield* tree.readLines(scope, {
        decode: (line) => Effect.succeed(line.split(" ")),
        onMessage: ([name, pid]) => Effect.sync(() => pids.set(name ?? "", Number(pid))),
        onUndecodable: () => Effect.void,
        onOversizedLine: () => Effect.void,
        onExit: () => Effect.void
      })
      // Ended by pid / group whatever happens: the shell's group (it and its child), the orphan's session group.
      yield* Effect.addFinalizer(() =>
        tree.terminate("1 second").pipe(Effect.andThen(Effect.sync(() => {
          const orphan = pids.get("orphan")
          if (orphan !== undefined) signalGroup(orphan, "SIGKILL")
        })))
      )
      yield* eventually(() => pids.has("orphan") && pids.has("child"), "the tree has started")
      const orphan = pids.get("orphan")!
      const child = pids.get("child")!
      assert.isTrue(alive(orphan) && alive(child))
      assert.strictEqual(markerOf(tree.pid), marker, "runtimeEnv marks the process it is given to")

      const escaped = yield* escapedProcesses(tree.pid, marker)
      assert.deepStrictEqual(escaped.map((one) => one.pid), [orphan], "only the orphan is outside the tree")
      assert.include(escaped[0]!.command, "sleep 30")
      assert.match(escapedReason(escaped), /^1 process started by the runtime run outside it: sleep 30 \(pid \d+\)$/)
      assert.deepStrictEqual(yield* escapedProcesses(tree.pid, freshMarker()), [], "another runtime's marker")

      // The orphan ran in a session of its own: it is ended by its group, which it leads.
      signalGroup(orphan, "SIGKILL")
      // An ended process not yet reaped (by init, here) runs nothing and is not counted.
      yield* eventuallyEffect(
        Effect.map(escapedProcesses(tree.pid, marker), (escaped) => escaped.length === 0),
        "the ended orphan is no longer found"
      )
      assert.isTrue(alive(child), "the runtime's own child still runs and is not counted")

      yield* tree.terminate("1 second")
      yield* eventually(
        () => !groupAlive(tree.pid) && !alive(child) && !groupAlive(orphan),
        "the tree and the orphan are gone (reaped)"
      )
    }).pipe(Effect.scoped), 20_000)

  it("runtimeEnv is exactly the marker variable", () => {
    assert.deepStrictEqual(runtimeEnv("abc123"), { [runtimeMarkerName]: "abc123" })
    assert.strictEqual(runtimeMarkerName, "QUIESCE_RUNTIME")
  })

  it("names at most three processes in a reason", () => {
    const escaped = [1, 2, 3, 4, 5].map((pid) => ({ pid, command: `job ${pid}` }))
    assert.strictEqual(
      escapedReason(escaped),
      "5 processes started by the runtime run outside it: job 1 (pid 1); job 2 (pid 2); job 3 (pid 3) and 2 more"
    )
  })
})
