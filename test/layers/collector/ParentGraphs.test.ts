/**
 * The collector over any parent labels a host may supply: cycles (a → b → a), a runtime naming
 * itself, parents without a live runtime, deep chains. Every sweep must end, and release exactly
 * what the family rule (C5, docs/collector.md) allows. Each sweep is bounded under TestClock, so a
 * hang fails the test instead of holding it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Effect, Fiber, Option, Schema } from "effect"
import { TestClock } from "effect/testing"
import { stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import type { SweepReport } from "../../../src/domain/sweep.ts"
import { makeRuntimeCollector } from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { FakeCallerProtection, FakeRuntimes } from "../../../src/testing/FakeRuntimes.ts"
import { CallerProtection } from "../../../src/services/CallerProtection.ts"
import { RuntimeCandidates } from "../../../src/services/RuntimeCandidates.ts"

const idleHour = 60 * 60_000
/** No sweep here waits on the clock (probes answer at once); one still running after this has hung. */
const sweepBound = "1 minute"
/** Scheduler turns a sweep may take before the clock moves, so no probe times out early. */
const maxTurns = 100_000

const collectorOver = Effect.fnUntraced(function*(runtimes: FakeRuntimes, protection = new FakeCallerProtection()) {
  // Ticks pushed beyond every test's horizon: sweeps happen exactly where the test says.
  const collector = yield* makeRuntimeCollector({ tickInterval: "3650 days", probeConcurrency: 4 }).pipe(
    Effect.provideService(RuntimeCandidates, runtimes.service),
    Effect.provideService(CallerProtection, protection.service)
  )
  /**
   * One sweep an idle hour later; fails the test if it does not return within `sweepBound` once
   * the fibers have run out of work, i.e. when it hangs.
   */
  const boundedSweep = Effect.gen(function*() {
    yield* TestClock.adjust(idleHour)
    const sweeping = yield* collector.sweep.pipe(Effect.timeoutOption(sweepBound), Effect.forkChild)
    for (let turn = 0; turn < maxTurns && sweeping.pollUnsafe() === undefined; turn++) yield* Effect.yieldNow
    yield* TestClock.adjust(sweepBound)
    const report = yield* Fiber.join(sweeping)
    if (Option.isNone(report)) return assert.fail(`the sweep did not return within ${sweepBound}`)
    return report.value
  })
  return { collector, boundedSweep }
})

const collectedIds = (report: SweepReport) => report.collected.map((entry) => entry.agentId)

describe("RuntimeCollector: parent labels that do not form a tree", () => {
  it.effect("two runtimes whose parents name each other are released, and the next sweep returns too", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const a = runtimes.add("a", { parentAgentId: "b" })
      const b = runtimes.add("b", { parentAgentId: "a" })
      const { boundedSweep } = yield* collectorOver(runtimes)
      assert.deepStrictEqual(collectedIds(yield* boundedSweep), ["a", "b"], "cycle members close in snapshot order")
      assert.isTrue(a.closed && b.closed)
      assert.deepStrictEqual([a.closeRequests, b.closeRequests], [1, 1])
      // Single-flight (C11): a hung sweep would make this one join it for ever.
      runtimes.add("later")
      assert.deepStrictEqual(collectedIds(yield* boundedSweep), ["later"])
    }))

  it.effect("a runtime that names itself as parent is a root: its child's blocker retains it, and it closes first", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const child = runtimes.add("child", { parentAgentId: "self", busy: true })
      runtimes.add("self", { parentAgentId: "self" })
      const { boundedSweep } = yield* collectorOver(runtimes)
      assert.deepStrictEqual(collectedIds(yield* boundedSweep), [])
      child.busy = false
      yield* boundedSweep // the retention restarts a full idle period from here (C7)
      assert.deepStrictEqual(collectedIds(yield* boundedSweep), ["self", "child"])
    }))

  it.effect("a chain whose root has no live runtime starts at its first live member", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      runtimes.add("grandchild", { parentAgentId: "child" })
      runtimes.add("child", { parentAgentId: "missing" })
      const { boundedSweep } = yield* collectorOver(runtimes)
      assert.deepStrictEqual(collectedIds(yield* boundedSweep), ["child", "grandchild"])
    }))

  it.effect("a longer cycle is one family: a blocker below any member retains every member", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const cycle = [
        runtimes.add("a", { parentAgentId: "c" }),
        runtimes.add("b", { parentAgentId: "a" }),
        runtimes.add("c", { parentAgentId: "b" })
      ]
      const worker = runtimes.add("worker", { parentAgentId: "b", busy: true })
      const sibling = runtimes.add("sibling", { parentAgentId: "b" })
      const { boundedSweep } = yield* collectorOver(runtimes)
      assert.deepStrictEqual(collectedIds(yield* boundedSweep), ["sibling"], "only the clear leaf's own family")
      assert.isTrue(cycle.every((member) => !member.closed))
      worker.busy = false
      yield* boundedSweep // the retention restarts a full idle period from here (C7)
      assert.deepStrictEqual(collectedIds(yield* boundedSweep), ["a", "b", "c", "worker"])
      assert.isTrue(sibling.closed)
    }))

  it.effect("a veto anywhere in a cycle's family retains the whole cycle, probed once per runtime", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const a = runtimes.add("a", { parentAgentId: "b" })
      const b = runtimes.add("b", { parentAgentId: "a" })
      a.probe = Effect.succeed(stopPermitted)
      b.probe = Effect.succeed(stopVetoed("a job is running"))
      const { boundedSweep } = yield* collectorOver(runtimes)
      assert.deepStrictEqual(collectedIds(yield* boundedSweep), [])
      assert.isFalse(a.closed || b.closed)
      assert.deepStrictEqual([a.probeCalls, b.probeCalls], [1, 1])
    }))
})

// ---- random parent graphs ----------------------------------------------------------------------

/** What a runtime's parent label names. */
type ParentLabel =
  | { readonly _tag: "None" }
  | { readonly _tag: "Self" }
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Node"; readonly at: number }

/** A runtime's state as a sweep finds it; the first three retain its family, the rest do not. */
const NodeState = Schema.Literals(["busy", "caller-protected", "veto", "clear", "permit", "not-resumable"])
type NodeState = typeof NodeState.Type
const retains = (state: NodeState) => state === "busy" || state === "caller-protected" || state === "veto"

interface GraphNode {
  readonly parent: ParentLabel
  readonly state: NodeState
}

const agentIdOf = (at: number) => `agent-${at}`

/**
 * The reference model of C5 as docs/collector.md defines it: a runtime's family is every runtime
 * reachable from it by following "is the parent of" (a label naming itself or a runtime not in
 * the graph adds no edge), so the members of a cycle share one family. A resumable runtime is
 * released when no member of its family retains it. Deliberately naive: one search per runtime.
 */
const expectedReleases = (nodes: ReadonlyArray<GraphNode>): Set<string> => {
  const children: Array<Array<number>> = nodes.map(() => [])
  nodes.forEach((node, at) => {
    if (node.parent._tag === "Node" && node.parent.at !== at) children[node.parent.at]!.push(at)
  })
  const released = new Set<string>()
  nodes.forEach((node, root) => {
    if (node.state === "not-resumable") return
    const family = new Set([root])
    const queue = [root]
    while (queue.length > 0) {
      for (const child of children[queue.pop()!]!) {
        if (!family.has(child)) {
          family.add(child)
          queue.push(child)
        }
      }
    }
    if ([...family].every((member) => !retains(nodes[member]!.state))) released.add(agentIdOf(root))
  })
  return released
}

/**
 * One sweep over the graph, an idle hour after everything's last activity: it returns within the
 * bound, releases exactly the model's runtimes, asks to close each of them once (so no close was
 * declined for a family changed by an earlier close of the same sweep) and no other. A second
 * sweep returns too, releasing nothing.
 */
const sweepMatchesModel = Effect.fnUntraced(function*(nodes: ReadonlyArray<GraphNode>) {
  const runtimes = new FakeRuntimes()
  const protection = new FakeCallerProtection()
  const fakes = nodes.map((node, at) => {
    const parent = node.parent
    const runtime = runtimes.add(agentIdOf(at), {
      parentAgentId: parent._tag === "None"
        ? undefined
        : parent._tag === "Self"
        ? agentIdOf(at)
        : parent._tag === "Missing"
        ? `released-${at}`
        : agentIdOf(parent.at),
      busy: node.state === "busy",
      resumable: node.state !== "not-resumable"
    })
    if (node.state === "caller-protected") protection.protect(runtime.agentId)
    if (node.state === "veto") runtime.probe = Effect.succeed(stopVetoed("a job is running"))
    if (node.state === "permit") runtime.probe = Effect.succeed(stopPermitted)
    return runtime
  })
  const { boundedSweep } = yield* collectorOver(runtimes, protection)
  const report = yield* boundedSweep
  const expected = expectedReleases(nodes)
  assert.deepStrictEqual(report.failures, [])
  assert.deepStrictEqual(new Set(collectedIds(report)), expected)
  assert.strictEqual(report.collected.length, expected.size, "each runtime released once")
  for (const runtime of fakes) {
    const released = expected.has(runtime.agentId)
    assert.strictEqual(runtime.closed, released, runtime.agentId)
    assert.strictEqual(runtime.closeRequests, released ? 1 : 0, `${runtime.agentId} close requests`)
  }
  // The next sweep ends too, and what the first one kept is still kept: nothing in it has changed.
  assert.deepStrictEqual(collectedIds(yield* boundedSweep), [])
})

/**
 * Small graphs, any shape, shrunk to a minimal counterexample on failure. Each runtime draws two
 * numbers: its parent (another runtime mostly, else none, itself or a missing one) and its state
 * (clear half the time, so that whole families, cycles included, are often clear).
 */
const SmallGraph = Arbitrary.map(
  Arbitrary.array(Arbitrary.schema(Schema.Tuple([Schema.Int, Schema.Int])), { minLength: 1, maxLength: 40 }),
  (drawn): ReadonlyArray<GraphNode> => {
    const states = NodeState.literals
    return drawn.map(([parentDraw, stateDraw]) => {
      const pick = Math.abs(parentDraw) % (drawn.length + 3)
      const parent: ParentLabel = pick < drawn.length
        ? { _tag: "Node", at: pick }
        : pick === drawn.length
        ? { _tag: "None" }
        : pick === drawn.length + 1
        ? { _tag: "Self" }
        : { _tag: "Missing" }
      const stateAt = Math.abs(stateDraw) % (2 * states.length)
      return { parent, state: stateAt < states.length ? states[stateAt]! : "clear" }
    })
  }
)

/** A small deterministic generator, so one drawn seed stands for a whole large graph. */
const mulberry32 = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/**
 * Large graphs: thousands of runtimes, mostly long chains (each runtime under the one before),
 * with roots, parent labels pointing anywhere or a little way down their own chain (which close
 * cycles), self-parents and missing parents mixed in, and a few runtimes that retain their families.
 */
const LargeGraph = Arbitrary.map(
  Arbitrary.schema(Schema.Struct({
    size: Schema.Int.check(Schema.isBetween({ minimum: 1000, maximum: 3000 })),
    seed: Schema.Int
  })),
  ({ seed, size }): ReadonlyArray<GraphNode> => {
    const random = mulberry32(seed)
    const states: ReadonlyArray<NodeState> = ["busy", "caller-protected", "veto", "permit", "not-resumable"]
    return Array.from({ length: size }, (_, at): GraphNode => {
      const roll = random()
      const parent: ParentLabel = roll < 0.96 && at > 0
        ? { _tag: "Node", at: at - 1 }
        : roll < 0.97
        ? { _tag: "None" }
        : roll < 0.98
        ? { _tag: "Node", at: Math.floor(random() * size) }
        : roll < 0.988
        // A little way down the same chain: unless the chain breaks before, a cycle.
        ? { _tag: "Node", at: Math.min(size - 1, at + 1 + Math.floor(random() * 40)) }
        : roll < 0.994
        ? { _tag: "Self" }
        : { _tag: "Missing" }
      const state = random() < 0.01 ? states[Math.floor(random() * states.length)]! : "clear"
      return { parent, state }
    })
  }
)

describe("RuntimeCollector: random parent graphs (C5, C11)", () => {
  it.effect.prop("every sweep ends and releases exactly the clear families", [SmallGraph], ([nodes]) =>
    sweepMatchesModel(nodes), { timeout: 60_000, arbitrary: { runs: 300 } })

  it.effect.prop("so it does over thousands of runtimes in deep chains and cycles", [LargeGraph], ([nodes]) =>
    sweepMatchesModel(nodes), { timeout: 120_000, arbitrary: { runs: 6 } })
})
