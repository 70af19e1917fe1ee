/**
 * descendantGroups and trackDetachedGroups against a real process tree (time is real, so waits
 * poll with a bound): a root in its own group with a child in the root's group, a child in a
 * group of its own, and that child's child in a third group. The tree walk and the full /proc
 * scan find the same groups; the tracker notes nothing once the root has exited, drops groups
 * that died, and ends the rest.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import { groupAlive, signalGroup } from "../../../../src/platform/processGroups.ts"
import { descendantGroups, trackDetachedGroups } from "../../../../src/platform/detachedGroups.ts"
import { startLineProcess } from "../../../../src/layers/providers/process/lineProcess.ts"

const idle = `setInterval(() => {}, 1000)`
/** Starts `script` detached (a group of its own) and prints its pid. */
const detachedChild = (script: string) =>
  `const c = require("node:child_process").spawn(process.execPath, ["-e", ${JSON.stringify(script)}], { detached: true, stdio: ["ignore", "inherit", "ignore"] })`
/** The middle child: a grandchild in a third group, then its own pid; stays alive. */
const middle = `${detachedChild(`console.log("grandchild " + process.pid); ${idle}`)}; console.log("child " + process.pid); ${idle}`
/** The root: a child in its own group (same group), the middle child detached; prints its readiness. */
const root = `
const { spawn } = require("node:child_process")
spawn(process.execPath, ["-e", ${JSON.stringify(idle)}], { stdio: "ignore" })
${detachedChild(middle)}
${idle}
`

const eventually = (condition: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      if (condition()) return
      yield* Effect.sleep("25 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

const startTree = Effect.gen(function*() {
  const scope = yield* Effect.scope
  const tree = yield* startLineProcess({ command: process.execPath, args: ["-e", root] }, process.cwd())
  const pids = new Map<string, number>()
  yield* tree.readLines(scope, {
    decode: (line) => Effect.succeed(line.split(" ")),
    onMessage: ([name, pid]) => Effect.sync(() => pids.set(name ?? "", Number(pid))),
    onUndecodable: () => Effect.void,
    onOversizedLine: () => Effect.void,
    onExit: () => Effect.void
  })
  yield* eventually(() => pids.has("child") && pids.has("grandchild"), "the tree has started")
  const child = pids.get("child")!
  const grandchild = pids.get("grandchild")!
  // Whatever the test leaves is ended by pid / process group: the root's group, then the two detached ones.
  yield* Effect.addFinalizer(() =>
    tree.terminate("1 second").pipe(Effect.andThen(Effect.sync(() => {
      for (const pgid of [child, grandchild]) signalGroup(pgid, "SIGKILL")
    })))
  )
  return { tree, child, grandchild }
})

describe("descendantGroups", () => {
  it.live("finds a child's own group and a grandchild's, by the tree walk and by the full scan", () =>
    Effect.scoped(Effect.gen(function*() {
      const { tree, child, grandchild } = yield* startTree
      assert.sameMembers([...descendantGroups(tree.pid)], [child, grandchild])
      assert.sameMembers([...descendantGroups(tree.pid, true)], [child, grandchild])
      // A process with no descendants has no groups below it.
      assert.deepStrictEqual(descendantGroups(grandchild), [])
    })))
})

describe("trackDetachedGroups", () => {
  it.live("notes groups while the root lives, drops dead ones, notes nothing after the root exited, ends the rest", () =>
    Effect.scoped(Effect.gen(function*() {
      const { tree, child, grandchild } = yield* startTree
      let exited = false
      const reported: Array<number> = []
      const groups = trackDetachedGroups(tree.pid, () => exited, (pgid) => reported.push(pgid))
      groups.note()
      groups.note()
      assert.sameMembers(reported, [child, grandchild])
      // A group that died is dropped: its id could be handed to an unrelated group later.
      signalGroup(grandchild, "SIGKILL")
      yield* eventually(() => !groupAlive(grandchild), "the grandchild's group is gone")
      groups.note()
      assert.deepStrictEqual(groups.current(), [child])
      // Once the root is known to have exited nothing more is noted, even if its pid has descendants.
      const fresh = trackDetachedGroups(tree.pid, () => true)
      fresh.note()
      assert.deepStrictEqual(fresh.current(), [])
      exited = true
      yield* groups.end("1 second")
      assert.isFalse(groupAlive(child))
      assert.isFalse(Deferred.isDoneUnsafe(tree.exited))
    })))
})
