import * as RuntimeCollectorLive from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { TestClock } from "effect/testing"
import { RuntimeCloseFailed, RuntimeProbeFailed, RuntimeProbeTimedOut } from "../../../src/domain/errors.ts"
import { type StopAnswer, stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import { makeRuntimeCollector } from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { FakeCallerProtection, FakeRuntimes } from "../../../src/testing/FakeRuntimes.ts"
import { CallerProtection } from "../../../src/services/CallerProtection.ts"
import { RuntimeCandidates } from "../../../src/services/RuntimeCandidates.ts"
import type { RuntimeCollectorOptions } from "../../../src/services/RuntimeCollector.ts"
import { type LogEntry, recordingLogs } from "../../support/logs.ts"

const minutes = (n: number) => n * 60_000

/**
 * One root agent "agent" and a collector over it. Scheduled ticks are pushed beyond every test's
 * horizon unless a test asks for them, so sweeps happen exactly where the test says.
 */
const scenario = Effect.fnUntraced(function*(options: RuntimeCollectorOptions = {}) {
  const runtimes = new FakeRuntimes()
  const protection = new FakeCallerProtection()
  const runtime = runtimes.add("agent")
  const collector = yield* makeRuntimeCollector({ tickInterval: "3650 days", ...options }).pipe(
    Effect.provideService(RuntimeCandidates, runtimes.service),
    Effect.provideService(CallerProtection, protection.service)
  )
  const sweepAt = (minute: number) =>
    TestClock.setTime(minutes(minute)).pipe(Effect.andThen(collector.sweep))
  const collectedAt = (minute: number) =>
    Effect.map(sweepAt(minute), (report) => report.collected.map((entry) => entry.agentId))
  return { runtimes, protection, runtime, collector, sweepAt, collectedAt }
})

/** The veto reason the collector's own tests give; a real provider names the work it would lose. */
const testVeto = "test veto"

/** A probe that always answers the same: `true` permits, `false` vetoes with `testVeto`. */
const always = (canStop: boolean) => Effect.succeed(canStop ? stopPermitted : stopVetoed(testVeto))

/** A probe that signals when it starts and answers only when told. */
const heldProbe = Effect.fnUntraced(function*() {
  const started = yield* Deferred.make<void>()
  const answer = yield* Deferred.make<StopAnswer>()
  const probe = Deferred.succeed(started, undefined).pipe(Effect.andThen(Deferred.await(answer)))
  return { started, answer, probe }
})

describe("RuntimeCollector: the seed scenarios", () => {
  it.effect("a runtime without a provider check is collected at exactly one idle hour (C1)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      assert.deepStrictEqual((yield* s.sweepAt(59)).collected, [])
      assert.deepStrictEqual((yield* s.sweepAt(60)).collected, [
        { agentId: "agent", provider: "test", sessionId: "session-agent" }
      ])
      assert.isTrue(s.runtime.closed)
    }))

  it.effect("activity restarts the idle period", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      yield* s.sweepAt(59)
      s.runtime.activity = minutes(59)
      assert.deepStrictEqual(yield* s.collectedAt(118), [])
      assert.deepStrictEqual(yield* s.collectedAt(119), ["agent"])
    }))

  for (const blocker of ["foreground turn", "caller protection"] as const) {
    it.effect(`a permitting provider check cannot override a ${blocker} (C4, C6, C7)`, () =>
      Effect.gen(function*() {
        const s = yield* scenario()
        s.runtime.probe = always(true)
        if (blocker === "foreground turn") s.runtime.busy = true
        else s.protection.protect("agent")
        assert.deepStrictEqual(yield* s.collectedAt(61), [])
        assert.strictEqual(s.runtime.probeCalls, 0, "a blocked family is never probed")
        s.runtime.busy = false
        s.protection.protect("agent", false)
        assert.deepStrictEqual(yield* s.collectedAt(62), [])
        assert.deepStrictEqual(yield* s.collectedAt(121), [], "the fresh idle hour starts when seen clear")
        assert.deepStrictEqual(yield* s.collectedAt(122), ["agent"])
      }))
  }

  for (const decision of ["veto", "failure"] as const) {
    it.effect(`a provider ${decision} retains the runtime until a fresh idle hour passes (C6, C7)`, () =>
      Effect.gen(function*() {
        const s = yield* scenario()
        s.runtime.probe = decision === "veto"
          ? always(false)
          : Effect.fail(new RuntimeProbeFailed({ agentId: "agent", message: "probe failed" }))
        const blocked = yield* s.sweepAt(61)
        assert.deepStrictEqual(blocked.collected, [])
        assert.strictEqual(blocked.failures.length, decision === "failure" ? 1 : 0)
        if (decision === "failure") assert.strictEqual(blocked.failures[0]!.error._tag, "RuntimeProbeFailed")
        yield* s.sweepAt(119)
        s.runtime.probe = always(true)
        assert.deepStrictEqual(yield* s.collectedAt(120), [])
        assert.deepStrictEqual(yield* s.collectedAt(179), [])
        assert.deepStrictEqual(yield* s.collectedAt(180), ["agent"])
      }))
  }

  it.effect("an idle managed descendant with provider-held work vetoes its parent (C5)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const child = s.runtimes.add("child", { parentAgentId: "agent" })
      child.probe = always(false)
      assert.deepStrictEqual(yield* s.collectedAt(61), [])
      assert.isFalse(s.runtime.closed)
      child.probe = always(true)
      assert.deepStrictEqual(yield* s.collectedAt(62), [])
      assert.deepStrictEqual(yield* s.collectedAt(121), [])
      assert.deepStrictEqual(yield* s.collectedAt(122), ["agent", "child"])
    }))

  it.effect("caller protection that starts during an async probe prevents a stale collection (C8)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const held = yield* heldProbe()
      s.runtime.probe = held.probe
      const sweeping = yield* s.sweepAt(61).pipe(Effect.forkChild)
      yield* Deferred.await(held.started)
      s.protection.protect("agent")
      yield* Deferred.succeed(held.answer, stopPermitted)
      assert.deepStrictEqual((yield* Fiber.join(sweeping)).collected, [])
      assert.isFalse(s.runtime.closed)
      s.protection.protect("agent", false)
      assert.deepStrictEqual(yield* s.collectedAt(62), [])
      assert.deepStrictEqual(yield* s.collectedAt(122), ["agent"])
    }))

  it.effect("a probe timeout retains the runtime even if the probe later answers true (C6)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const held = yield* heldProbe()
      s.runtime.probe = held.probe
      const sweeping = yield* s.sweepAt(61).pipe(Effect.forkChild)
      yield* Deferred.await(held.started)
      yield* TestClock.adjust("9 seconds")
      assert.isUndefined(sweeping.pollUnsafe(), "still waiting for the probe before its timeout")
      yield* TestClock.adjust("1 second")
      const report = yield* Fiber.join(sweeping)
      assert.deepStrictEqual(report.collected, [])
      assert.deepStrictEqual(report.failures, [
        { agentId: "agent", error: RuntimeProbeTimedOut.of("agent", 10_000) }
      ])
      yield* Deferred.succeed(held.answer, stopPermitted)
      yield* Effect.yieldNow
      const residency = yield* s.collector.explain("agent")
      assert.strictEqual(residency.veto?.outcome, "timed-out", "the late answer is never recorded")
      assert.isFalse(s.runtime.closed)
      assert.deepStrictEqual(yield* s.collectedAt(62), [])
      assert.isFalse(s.runtime.closed)
    }))

  it.effect("the host opt-out disables explicit sweeps and scheduled ticks (C3)", () =>
    Effect.gen(function*() {
      const s = yield* scenario({ enabled: false, tickInterval: "1 minute" })
      s.runtime.probe = always(true)
      assert.deepStrictEqual(yield* s.collectedAt(61), [])
      yield* TestClock.adjust("3 hours")
      assert.strictEqual(s.runtime.probeCalls, 0)
      assert.isFalse(s.runtime.closed)
    }))

  it.effect("a working descendant without persistence protects its parent and is never collected (C5)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const child = s.runtimes.add("initializing-child", { parentAgentId: "agent", resumable: false, busy: true })
      assert.deepStrictEqual(yield* s.collectedAt(61), [])
      assert.strictEqual(s.runtime.closeRequests, 0, "a blocked family is never offered for closing")
      child.busy = false
      assert.deepStrictEqual(yield* s.collectedAt(62), [])
      assert.deepStrictEqual(yield* s.collectedAt(122), ["agent"])
      assert.isFalse(child.closed)
    }))
})

describe("RuntimeCollector: the tick loop and its scope", () => {
  it.effect("scheduled ticks collect an idle runtime once a minute, after a full idle hour (C1)", () =>
    Effect.gen(function*() {
      const s = yield* scenario({ tickInterval: "1 minute" })
      yield* TestClock.adjust("59 minutes")
      assert.isFalse(s.runtime.closed)
      yield* TestClock.adjust("1 minute")
      assert.isTrue(s.runtime.closed)
    }))

  it.effect("closing the layer's scope stops the ticks", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const runtime = runtimes.add("agent")
      const scope = yield* Scope.make()
      yield* Layer.buildWithScope(
        RuntimeCollectorLive.layer().pipe(Layer.provide([runtimes.layer, CallerProtection.layerNone])),
        scope
      )
      yield* TestClock.adjust("30 minutes")
      yield* Scope.close(scope, Exit.void)
      yield* TestClock.adjust("2 hours")
      assert.isFalse(runtime.closed)
    }))

  it.effect("closing the scope interrupts probes in flight", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const runtime = runtimes.add("agent")
      const started = yield* Deferred.make<void>()
      let interrupted = false
      runtime.probe = Deferred.succeed(started, undefined).pipe(
        Effect.andThen(Effect.never),
        Effect.onInterrupt(() => Effect.sync(() => (interrupted = true)))
      )
      const scope = yield* Scope.make()
      const collector = yield* makeRuntimeCollector({ tickInterval: "1 minute" }).pipe(
        Effect.provideService(RuntimeCandidates, runtimes.service),
        Effect.provideService(CallerProtection, new FakeCallerProtection().service),
        Scope.provide(scope)
      )
      yield* TestClock.adjust("1 minute")
      yield* Deferred.await(started)
      yield* Scope.close(scope, Exit.void)
      assert.isTrue(interrupted)
      assert.deepStrictEqual(yield* collector.sweep, { collected: [], failures: [] }, "a closed collector sweeps nothing")
    }))

  it.effect("closing the scope returns within the probe timeout when a probe ignores its interruption (X4)", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const runtime = runtimes.add("agent")
      const started = yield* Deferred.make<void>()
      runtime.probe = Deferred.succeed(started, undefined).pipe(Effect.andThen(Effect.never), Effect.uninterruptible)
      const scope = yield* Scope.make()
      yield* makeRuntimeCollector({ tickInterval: "1 minute" }).pipe(
        Effect.provideService(RuntimeCandidates, runtimes.service),
        Effect.provideService(CallerProtection, new FakeCallerProtection().service),
        Scope.provide(scope)
      )
      yield* TestClock.setTime(minutes(61))
      yield* Deferred.await(started)
      const closing = yield* Scope.close(scope, Exit.void).pipe(Effect.forkChild)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      assert.isUndefined(closing.pollUnsafe(), "the probe is given its timeout to end")
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(closing)
      assert.isFalse(runtime.closed)
    }))

  it.effect("a close that has begun is never interrupted and is awaited by scope closure", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const runtime = runtimes.add("agent")
      const closeStarted = yield* Deferred.make<void>()
      const finishClose = yield* Deferred.make<void>()
      runtime.closing = Deferred.succeed(closeStarted, undefined).pipe(Effect.andThen(Deferred.await(finishClose)))
      const scope = yield* Scope.make()
      yield* makeRuntimeCollector({ tickInterval: "1 minute" }).pipe(
        Effect.provideService(RuntimeCandidates, runtimes.service),
        Effect.provideService(CallerProtection, new FakeCallerProtection().service),
        Scope.provide(scope)
      )
      yield* TestClock.adjust("60 minutes")
      yield* Deferred.await(closeStarted)
      const closing = yield* Scope.close(scope, Exit.void).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      assert.isUndefined(closing.pollUnsafe(), "scope closure waits for the close in progress")
      yield* Deferred.succeed(finishClose, undefined)
      yield* Fiber.join(closing)
      assert.isTrue(runtime.closed)
    }))
})

describe("RuntimeCollector: sweeps", () => {
  it.effect("a sweep requested while one runs joins it (C11)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const held = yield* heldProbe()
      s.runtime.probe = held.probe
      yield* TestClock.setTime(minutes(61))
      const first = yield* s.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(held.started)
      const second = yield* s.collector.sweep.pipe(Effect.forkChild({ startImmediately: true }))
      yield* Deferred.succeed(held.answer, stopPermitted)
      const [a, b] = [yield* Fiber.join(first), yield* Fiber.join(second)]
      assert.strictEqual(s.runtime.probeCalls, 1)
      assert.strictEqual(a, b)
      assert.deepStrictEqual(a.collected.map((entry) => entry.agentId), ["agent"])
    }))

  it.effect("an interrupted caller does not cancel the sweep it started", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const held = yield* heldProbe()
      s.runtime.probe = held.probe
      yield* TestClock.setTime(minutes(61))
      const caller = yield* s.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(held.started)
      yield* Fiber.interrupt(caller)
      yield* Deferred.succeed(held.answer, stopPermitted)
      // Joins the sweep still in flight; a cancelled sweep would have made this one probe again.
      yield* s.collector.sweep
      assert.strictEqual(s.runtime.probeCalls, 1)
      assert.isTrue(s.runtime.closed)
    }))

  it.effect("probes run concurrently up to probeConcurrency (X4)", () =>
    Effect.gen(function*() {
      const s = yield* scenario({ probeConcurrency: 4 })
      s.runtime.closed = true
      const firstBatch = yield* Deferred.make<void>()
      let running = 0
      let peak = 0
      for (let i = 0; i < 12; i++) {
        s.runtimes.add(`agent-${i}`).probe = Effect.gen(function*() {
          running++
          peak = Math.max(peak, running)
          if (running === 4) yield* Deferred.succeed(firstBatch, undefined)
          yield* Effect.sleep("1 second")
          running--
          return stopPermitted
        })
      }
      yield* TestClock.setTime(minutes(61))
      const sweeping = yield* s.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(firstBatch)
      yield* TestClock.adjust("2 seconds")
      assert.isUndefined(sweeping.pollUnsafe(), "12 probes of 1 s at 4 at a time need 3 s")
      yield* TestClock.adjust("1 second")
      const report = yield* Fiber.join(sweeping)
      assert.strictEqual(report.collected.length, 12)
      assert.strictEqual(peak, 4)
    }))

  it.effect("within a family the first veto stops the other probes (X4)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = always(false)
      const children = [1, 2, 3].map((i) => {
        const child = s.runtimes.add(`worker-${i}`, { parentAgentId: "agent", resumable: false })
        child.probe = always(true)
        return child
      })
      assert.deepStrictEqual(yield* s.collectedAt(61), [])
      assert.strictEqual(s.runtime.probeCalls, 1)
      assert.deepStrictEqual(children.map((child) => child.probeCalls), [0, 0, 0])
    }))

  it.effect("a runtime in two families is probed once per sweep", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const child = s.runtimes.add("child", { parentAgentId: "agent" })
      const grandchild = s.runtimes.add("grandchild", { parentAgentId: "child" })
      grandchild.probe = always(true)
      assert.deepStrictEqual(yield* s.collectedAt(61), ["agent", "child", "grandchild"])
      assert.strictEqual(grandchild.probeCalls, 1)
      assert.isTrue(child.closed)
    }))

  it.effect("a hung probe delays other families by at most its timeout (X4)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const hung = yield* heldProbe()
      s.runtime.probe = hung.probe
      const other = s.runtimes.add("other")
      other.probe = always(true)
      yield* TestClock.setTime(minutes(61))
      const sweeping = yield* s.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(hung.started)
      yield* TestClock.adjust("10 seconds")
      const report = yield* Fiber.join(sweeping)
      assert.deepStrictEqual(report.collected.map((entry) => entry.agentId), ["other"])
      assert.deepStrictEqual(report.failures.map((failure) => failure.error._tag), ["RuntimeProbeTimedOut"])
    }))

  it.effect("a hung probe delays no other family: the others are closed while it still waits (X4)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const hung = yield* heldProbe()
      s.runtime.probe = hung.probe
      const others = ["one", "two", "three"].map((name) => {
        const other = s.runtimes.add(name)
        other.probe = always(true)
        return other
      })
      yield* TestClock.setTime(minutes(61))
      const sweeping = yield* s.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(hung.started)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      assert.isTrue(others.every((other) => other.closed), "released before the hung probe's timeout")
      assert.isUndefined(sweeping.pollUnsafe(), "the sweep still waits for the hung probe")
      yield* TestClock.adjust("10 seconds")
      const report = yield* Fiber.join(sweeping)
      assert.sameMembers(report.collected.map((entry) => entry.agentId), ["one", "two", "three"])
      assert.isFalse(s.runtime.closed)
    }))

  it.effect("families retained below a hung probe do not hold the probe concurrency while it hangs (X4)", () =>
    Effect.gen(function*() {
      const s = yield* scenario({ probeConcurrency: 2 })
      const hung = yield* heldProbe()
      s.runtime.probe = hung.probe
      for (const name of ["vetoing-1", "vetoing-2"]) s.runtimes.add(name, { parentAgentId: "agent" }).probe = always(false)
      // Decided after the vetoing children (same depth, later in the snapshot), under a busy parent.
      s.runtimes.add("busy", { busy: true })
      const idle = s.runtimes.add("idle", { parentAgentId: "busy" })
      yield* TestClock.setTime(minutes(61))
      const sweeping = yield* s.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(hung.started)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      assert.isTrue(idle.closed, "released while the hung probe still waits")
      yield* TestClock.adjust("10 seconds")
      const report = yield* Fiber.join(sweeping)
      assert.deepStrictEqual(report.collected.map((entry) => entry.agentId), ["idle"])
    }))

  it.effect("a child's probe failure is reported once per sweep, not once per family that holds it", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = always(true)
      const child = s.runtimes.add("child", { parentAgentId: "agent" })
      child.probe = Effect.fail(new RuntimeProbeFailed({ agentId: "child", message: "no answer" }))
      const report = yield* s.sweepAt(61)
      assert.deepStrictEqual(report.collected, [])
      assert.deepStrictEqual(report.failures.map((failure) => failure.agentId), ["child"])
      assert.isFalse(s.runtime.closed)
      assert.isFalse(child.closed)
    }))

  it.effect("a parent and its child decided in one sweep close parent first, each once", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const held = yield* heldProbe()
      s.runtime.probe = held.probe
      const child = s.runtimes.add("child", { parentAgentId: "agent" })
      child.probe = always(true)
      const sweeping = yield* s.sweepAt(61).pipe(Effect.forkChild)
      yield* Deferred.await(held.started)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      assert.isFalse(child.closed, "the child waits for its parent's family to be decided")
      yield* Deferred.succeed(held.answer, stopPermitted)
      const report = yield* Fiber.join(sweeping)
      assert.deepStrictEqual(report.collected.map((entry) => entry.agentId), ["agent", "child"])
    }))

  it.effect("a probe defect is a typed failure that retains the runtime", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = Effect.die(new Error("socket closed"))
      const report = yield* s.sweepAt(61)
      assert.deepStrictEqual(report.collected, [])
      assert.deepStrictEqual(report.failures, [
        { agentId: "agent", error: new RuntimeProbeFailed({ agentId: "agent", message: "Error: socket closed" }) }
      ])
    }))

  it.effect("a family that gains a member during the probe is not collected (C8)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const held = yield* heldProbe()
      s.runtime.probe = held.probe
      const sweeping = yield* s.sweepAt(61).pipe(Effect.forkChild)
      yield* Deferred.await(held.started)
      s.runtimes.add("late-child", { parentAgentId: "agent", activity: minutes(61) })
      yield* Deferred.succeed(held.answer, stopPermitted)
      assert.deepStrictEqual((yield* Fiber.join(sweeping)).collected, [])
      assert.isFalse(s.runtime.closed)
      s.runtime.probe = always(true)
      assert.deepStrictEqual(yield* s.collectedAt(62), [], "a declined close restarts the idle period")
      assert.deepStrictEqual(yield* s.collectedAt(122), ["agent", "late-child"])
    }))

  it.effect("activity during the probe prevents the collection (C8)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const held = yield* heldProbe()
      s.runtime.probe = held.probe
      const sweeping = yield* s.sweepAt(61).pipe(Effect.forkChild)
      yield* Deferred.await(held.started)
      s.runtime.activity = minutes(61)
      yield* Deferred.succeed(held.answer, stopPermitted)
      assert.deepStrictEqual((yield* Fiber.join(sweeping)).collected, [])
      assert.isFalse(s.runtime.closed)
    }))

  it.effect("a failed close is reported, keeps the runtime and restarts its idle period (C10, C12)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const failure = new RuntimeCloseFailed({ agentId: "agent", message: "process did not exit" })
      s.runtime.closeFailure = failure
      const report = yield* s.sweepAt(60)
      assert.deepStrictEqual(report, { collected: [], failures: [{ agentId: "agent", error: failure }] })
      s.runtime.closeFailure = undefined
      assert.deepStrictEqual(yield* s.collectedAt(61), [])
      assert.deepStrictEqual(yield* s.collectedAt(121), ["agent"])
    }))

  it.effect("logs info per collection, debug per retention and warn per failure (C12)", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const s = yield* scenario()
      const busy = s.runtimes.add("busy", { busy: true })
      const broken = s.runtimes.add("broken")
      broken.probe = Effect.fail(new RuntimeProbeFailed({ agentId: "broken", message: "no answer" }))
      yield* s.sweepAt(60)
      const seen = entries.map((entry) => [entry.level, entry.message, entry.annotations["agentId"]])
      // Families are decided concurrently: the lines, not their order.
      assert.sameDeepMembers(seen, [
        ["Debug", "Idle runtime retained", "busy"],
        ["Warn", "Idle runtime cleanup failed", "broken"],
        ["Info", "Collected idle agent runtime", "agent"]
      ])
      assert.lengthOf(seen, 3)
      assert.strictEqual(entries.find((entry) => entry.level === "Debug")!.annotations["reason"], "foreground-turn")
      assert.isFalse(busy.closed)
    }).pipe(recordingLogs(entries))
  })
})

/** Lets the collector's forked fibers run until `done` holds (bounded: a test never spins forever). */
const settle = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200 && !done(); i++) yield* Effect.yieldNow
    assert.isTrue(done(), "settled")
  })

describe("RuntimeCollector: the probe after a turn ends", () => {
  it.effect("a turn's end asks the provider at once: the veto shows long before any sweep", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = always(false)
      yield* TestClock.setTime(minutes(1))
      s.runtimes.endTurn("agent")
      yield* settle(() => s.runtime.probeCalls === 1)
      const residency = yield* s.collector.explain("agent")
      assert.strictEqual(residency.state, "vetoed")
      assert.deepStrictEqual(residency.veto, { agentId: "agent", at: minutes(1), outcome: "vetoed", message: testVeto, since: minutes(1) })
      assert.deepStrictEqual(yield* s.collector.retirementBlockers(false), [
        { category: "veto", agentId: "agent", detail: testVeto, since: new Date(minutes(1)).toISOString() }
      ])
      assert.isFalse(s.runtime.closed, "a probe closes nothing")
    }))

  it.effect("turn ends pile up into one probe running and one behind it, never more", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const held = yield* heldProbe()
      s.runtime.probe = held.probe
      s.runtimes.endTurn("agent")
      yield* Deferred.await(held.started)
      for (let i = 0; i < 5; i++) s.runtimes.endTurn("agent")
      for (let i = 0; i < 50; i++) yield* Effect.yieldNow
      assert.strictEqual(s.runtime.probeCalls, 1, "one at a time per runtime")
      yield* Deferred.succeed(held.answer, stopVetoed(testVeto))
      yield* settle(() => s.runtime.probeCalls === 2)
      for (let i = 0; i < 50; i++) yield* Effect.yieldNow
      assert.strictEqual(s.runtime.probeCalls, 2, "the five ends that came meanwhile make one more probe")
    }))

  it.effect("an after-turn probe that hangs ends at the probe timeout as a failure", () =>
    Effect.gen(function*() {
      const s = yield* scenario({ probeTimeout: "10 seconds" })
      s.runtime.probe = Effect.never
      s.runtimes.endTurn("agent")
      yield* settle(() => s.runtime.probeCalls === 1)
      yield* TestClock.adjust("10 seconds")
      yield* settle(() => s.runtime.probeCalls === 1)
      for (let i = 0; i < 50; i++) yield* Effect.yieldNow
      assert.strictEqual((yield* s.collector.explain("agent")).veto?.outcome, "timed-out")
      s.runtime.probe = always(true)
      s.runtimes.endTurn("agent")
      yield* settle(() => s.runtime.probeCalls === 2)
    }))

  it.effect("a runtime busy again, or one that cannot veto, is not asked", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = always(false)
      s.runtime.busy = true
      s.runtimes.endTurn("agent")
      s.runtimes.add("quiet")
      s.runtimes.endTurn("quiet")
      for (let i = 0; i < 50; i++) yield* Effect.yieldNow
      assert.strictEqual(s.runtime.probeCalls, 0)
      assert.isNull((yield* s.collector.explain("quiet")).veto)
    }))

  it.effect("each release names its reason to the owner: the sweep idle, collect now collect, retirement retirement", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const collected = s.runtimes.add("collected")
      const retired = s.runtimes.add("retired")
      collected.activity = minutes(100)
      retired.activity = minutes(100)
      assert.deepStrictEqual(yield* s.collectedAt(61), ["agent"])
      yield* s.collector.collectNow("collected")
      yield* s.collector.releaseAll
      assert.deepStrictEqual(s.runtime.closeReasons, ["idle"])
      assert.deepStrictEqual(collected.closeReasons, ["collect"])
      assert.deepStrictEqual(retired.closeReasons, ["retirement"])
    }))
})

describe("RuntimeCollector: explain and collect now", () => {
  it.effect("explain names every blocker in the family and when the runtime could be released (X1)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.activity = minutes(5)
      const child = s.runtimes.add("child", { parentAgentId: "agent", busy: true })
      s.protection.protect("child")
      yield* TestClock.setTime(minutes(10))
      const blocked = yield* s.collector.explain("agent")
      assert.deepStrictEqual(blocked.family, ["agent", "child"])
      assert.deepStrictEqual(blocked.blockers, [
        { agentId: "child", kind: "foreground-turn" },
        { agentId: "child", kind: "caller-protected" }
      ])
      assert.strictEqual(blocked.state, "blocked")
      assert.isNull(blocked.releasableAt)

      child.busy = false
      s.protection.protect("child", false)
      const idle = yield* s.collector.explain("agent")
      assert.strictEqual(idle.state, "idle")
      assert.strictEqual(idle.idleSince, minutes(5))
      assert.strictEqual(idle.releasableAt, minutes(65))
    }))

  it.effect("explain reports the last veto, and explaining changes nothing (X1)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = always(false)
      yield* s.sweepAt(61)
      const vetoed = yield* s.collector.explain("agent")
      assert.strictEqual(vetoed.state, "vetoed")
      assert.deepStrictEqual(vetoed.veto, { agentId: "agent", at: minutes(61), outcome: "vetoed", message: testVeto, since: minutes(61) })
      assert.strictEqual(vetoed.idleSince, minutes(61))
      assert.strictEqual(s.runtime.probeCalls, 1, "explain never probes")
      s.runtime.probe = always(true)
      yield* s.sweepAt(62)
      const idle = yield* s.collector.explain("agent")
      assert.strictEqual(idle.state, "idle")
      assert.isNull(idle.veto)
      assert.strictEqual(idle.releasableAt, minutes(122))
    }))

  it.effect("explain with probe asks the provider now; its answer is what later explanations show, and the idle clock is kept", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = always(false)
      const unasked = yield* s.collector.explain("agent")
      assert.strictEqual(unasked.state, "idle", "never probed: no veto known")
      assert.strictEqual(s.runtime.probeCalls, 0)
      yield* TestClock.adjust("5 minutes")
      const asked = yield* s.collector.explain("agent", { probe: true })
      assert.strictEqual(s.runtime.probeCalls, 1)
      assert.strictEqual(asked.state, "vetoed")
      assert.deepStrictEqual(asked.veto, { agentId: "agent", at: minutes(5), outcome: "vetoed", message: testVeto, since: minutes(5) })
      assert.deepStrictEqual((yield* s.collector.explain("agent")).veto, asked.veto)
      assert.strictEqual(asked.idleSince, unasked.idleSince, "an explanation restarts no idle period")
      s.runtime.probe = always(true)
      assert.isNull((yield* s.collector.explain("agent", { probe: true })).veto)
    }))

  it.effect("a veto's reason survives the sweep: explain shows it as the veto and the last probe (C6, X1)", () =>
    Effect.gen(function*() {
      const reason = "background task bash-3 `sleep 600`"
      const s = yield* scenario()
      s.runtime.probe = Effect.succeed(stopVetoed(reason))
      assert.deepStrictEqual(yield* s.collectedAt(61), [], "a vetoing runtime is retained")
      assert.isFalse(s.runtime.closed)
      const vetoed = yield* s.collector.explain("agent")
      assert.strictEqual(vetoed.state, "vetoed")
      assert.strictEqual(vetoed.veto?.outcome, "vetoed")
      assert.strictEqual(vetoed.veto?.message, reason)
      assert.deepStrictEqual(vetoed.veto, { agentId: "agent", at: minutes(61), outcome: "vetoed", message: reason, since: minutes(61) })
    }))

  it.effect("a child's veto reason reaches its parent's explanation (C5, X1)", () =>
    Effect.gen(function*() {
      const reason = "background task bash-3 `sleep 600`"
      const s = yield* scenario()
      const child = s.runtimes.add("child", { parentAgentId: "agent" })
      child.probe = Effect.succeed(stopVetoed(reason))
      assert.deepStrictEqual(yield* s.collectedAt(61), [])
      const vetoed = yield* s.collector.explain("agent")
      assert.strictEqual(vetoed.state, "vetoed")
      assert.deepStrictEqual(vetoed.veto, { agentId: "child", at: minutes(61), outcome: "vetoed", message: reason, since: minutes(61) })
    }))

  it.effect("retirement blockers carry a veto's reason as its detail, asked fresh, then as last answered (R4)", () =>
    Effect.gen(function*() {
      const reason = "background task bash-3 `sleep 600`"
      const s = yield* scenario()
      s.runtime.probe = Effect.succeed(stopVetoed(reason))
      const permitting = s.runtimes.add("permitting")
      permitting.probe = always(true)
      yield* TestClock.setTime(minutes(1))
      assert.deepStrictEqual(yield* s.collector.retirementBlockers(false), [], "never asked: no veto known")
      assert.strictEqual(s.runtime.probeCalls, 0)
      const veto = { category: "veto", agentId: "agent", detail: reason, since: new Date(minutes(1)).toISOString() }
      assert.deepStrictEqual(yield* s.collector.retirementBlockers(true), [veto])
      assert.strictEqual(s.runtime.probeCalls, 1)
      yield* TestClock.setTime(minutes(30))
      assert.deepStrictEqual(yield* s.collector.retirementBlockers(false), [veto], "the last answer, not asked again")
      assert.strictEqual(s.runtime.probeCalls, 1)
      const residency = yield* s.collector.explain("agent")
      assert.deepStrictEqual(residency.veto, { agentId: "agent", at: minutes(1), outcome: "vetoed", message: reason, since: minutes(1) })
      assert.isFalse(s.runtime.closed || permitting.closed, "nothing is closed")
    }))

  it.effect("a veto's since is its first refusal in a row: kept while it refuses, new after a permit", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = always(false)
      yield* TestClock.setTime(minutes(1))
      yield* s.collector.explain("agent", { probe: true })
      yield* TestClock.setTime(minutes(200))
      const held = (yield* s.collector.explain("agent", { probe: true })).veto
      assert.strictEqual(held?.at, minutes(200))
      assert.strictEqual(held?.since, minutes(1), "vetoed since the first refusal")
      s.runtime.probe = always(true)
      yield* TestClock.setTime(minutes(201))
      assert.isNull((yield* s.collector.explain("agent", { probe: true })).veto)
      s.runtime.probe = always(false)
      yield* TestClock.setTime(minutes(202))
      assert.strictEqual((yield* s.collector.explain("agent", { probe: true })).veto?.since, minutes(202), "a new veto after a permit")
    }))

  it.effect("explain fails with RuntimeNotFound for an agent without a live runtime", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      const error = yield* Effect.flip(s.collector.explain("nobody"))
      assert.strictEqual(error._tag, "RuntimeNotFound")
      assert.strictEqual(error.agentId, "nobody")
    }))

  it.effect("collect now skips the idle period (X2)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtime.probe = always(true)
      yield* TestClock.setTime(minutes(1))
      const outcome = yield* s.collector.collectNow("agent")
      assert.deepStrictEqual(outcome, {
        _tag: "Collected",
        runtime: { agentId: "agent", provider: "test", sessionId: "session-agent" }
      })
      assert.isTrue(s.runtime.closed)
    }))

  it.effect("collect now keeps every safety check and reports fresh blockers (X2)", () =>
    Effect.gen(function*() {
      const s = yield* scenario()
      s.runtimes.add("child", { parentAgentId: "agent", busy: true })
      const blocked = yield* s.collector.collectNow("agent")
      assert.strictEqual(blocked._tag, "Retained")
      if (blocked._tag === "Retained") {
        assert.deepStrictEqual(blocked.residency.blockers, [{ agentId: "child", kind: "foreground-turn" }])
      }

      const lone = s.runtimes.add("lone")
      lone.probe = always(false)
      const vetoed = yield* s.collector.collectNow("lone")
      assert.strictEqual(vetoed._tag === "Retained" && vetoed.residency.state, "vetoed")

      const unsaved = s.runtimes.add("unsaved", { resumable: false })
      const kept = yield* s.collector.collectNow("unsaved")
      assert.strictEqual(kept._tag === "Retained" && kept.residency.state, "not-resumable")
      assert.isFalse(unsaved.closed || lone.closed || s.runtime.closed)

      const failing = s.runtimes.add("failing")
      failing.probe = Effect.fail(new RuntimeProbeFailed({ agentId: "failing", message: "boom" }))
      const failed = yield* s.collector.collectNow("failing")
      assert.strictEqual(failed._tag, "Failed")
    }))

  it.effect("collect now works when scheduled collection is disabled", () =>
    Effect.gen(function*() {
      const s = yield* scenario({ enabled: false })
      s.runtime.busy = true
      const blocked = yield* s.collector.collectNow("agent")
      assert.strictEqual(blocked._tag === "Retained" && blocked.residency.state, "blocked")
      s.runtime.busy = false
      const outcome = yield* s.collector.collectNow("agent")
      assert.strictEqual(outcome._tag, "Collected")
    }))

  it.effect("explain says when collection is disabled", () =>
    Effect.gen(function*() {
      const s = yield* scenario({ enabled: false })
      const residency = yield* s.collector.explain("agent")
      assert.strictEqual(residency.state, "collection-disabled")
      assert.isNull(residency.releasableAt)
    }))
})
