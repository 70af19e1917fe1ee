import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import { stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import { evictionOrder, familyRecency } from "../../../src/layers/collector/memoryPressure.ts"
import { indexFamilies } from "../../../src/layers/collector/FamilyIndex.ts"
import { makeRuntimeCollector } from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { FakeCallerProtection, FakeRuntimes } from "../../../src/testing/FakeRuntimes.ts"
import { CallerProtection } from "../../../src/services/CallerProtection.ts"
import { HostMemory } from "../../../src/services/HostMemory.ts"
import { ProcessInspection, type ProcessSample } from "../../../src/services/ProcessInspection.ts"
import { RuntimeCandidates } from "../../../src/services/RuntimeCandidates.ts"
import type { RuntimeCollectorOptions } from "../../../src/services/RuntimeCollector.ts"
import { type LogEntry, recordingLogs } from "../../support/logs.ts"

const minutes = (n: number) => n * 60_000
const mib = (n: number) => n * 1024 * 1024

/** Runtimes "r0".."r{n-1}", each of `rss` MiB, r0 the least recently active (activity at minute i). */
const scenario = Effect.fnUntraced(function*(
  count: number,
  options: RuntimeCollectorOptions = {},
  rss = 100
) {
  const runtimes = new FakeRuntimes()
  const protection = new FakeCallerProtection()
  for (let i = 0; i < count; i++) runtimes.add(`r${i}`, { activity: minutes(i), rss: mib(rss) })
  // Ticks and samples beyond every test's horizon: checks happen exactly where the test says.
  const collector = yield* makeRuntimeCollector({ tickInterval: "3650 days", ...options }).pipe(
    Effect.provideService(RuntimeCandidates, runtimes.service),
    Effect.provideService(CallerProtection, protection.service)
  )
  const checkAt = (minute: number) =>
    TestClock.setTime(minutes(minute)).pipe(
      Effect.andThen(collector.checkMemory),
      Effect.map((report) => report.collected.map((entry) => entry.agentId))
    )
  const resident = () => runtimes.all.filter((runtime) => !runtime.closed).map((runtime) => runtime.agentId)
  const runtime = (agentId: string) => runtimes.all.find((candidate) => candidate.agentId === agentId)!
  return { runtimes, protection, collector, checkAt, resident, runtime }
})

const watermarks = (high: number, low: number) => ({
  memory: { high: mib(high), low: mib(low), sampleInterval: "3650 days" as const }
})

describe("memory budget: the pressure sweep", () => {
  it.effect("releases least recently active first, until usage is under the low watermark", () =>
    Effect.gen(function*() {
      // 6 × 100 MiB = 600 ≥ high 550: give back down to 300, so three runtimes (the oldest).
      const s = yield* scenario(6, watermarks(550, 300))
      assert.deepStrictEqual(yield* s.checkAt(30), ["r0", "r1", "r2"])
      assert.deepStrictEqual(s.resident(), ["r3", "r4", "r5"])
      const status = Option.getOrThrow(yield* s.collector.memory)
      assert.strictEqual(status.residentBytes, mib(600), "the sample before the sweep")
      assert.deepStrictEqual(status.pressure?.causes, ["high"])
      assert.strictEqual(status.episodes, 1)
    }))

  it.effect("hysteresis: nothing between the watermarks starts an episode; one started goes down to low", () =>
    Effect.gen(function*() {
      const s = yield* scenario(5, watermarks(550, 300))
      assert.deepStrictEqual(yield* s.checkAt(30), [], "500 MiB is under high")
      s.runtime("r0").busy = true
      s.runtimes.add("r5", { activity: minutes(29), rss: mib(100) })
      // 600 MiB: the episode starts; r0 is busy, so r1, r2, r3 go (600 → 300).
      assert.deepStrictEqual(yield* s.checkAt(31), ["r1", "r2", "r3"])
      // 300 MiB is not over low: the episode ends, and between the watermarks nothing is released.
      s.runtime("r0").busy = false
      assert.deepStrictEqual(yield* s.checkAt(32), [])
      assert.isNull(Option.getOrThrow(yield* s.collector.memory).pressure)
      s.runtimes.add("r6", { activity: minutes(32), rss: mib(100) })
      s.runtimes.add("r7", { activity: minutes(32), rss: mib(100) })
      assert.deepStrictEqual(yield* s.checkAt(33), [], "500 MiB, between the watermarks: no new episode")
      assert.strictEqual(Option.getOrThrow(yield* s.collector.memory).episodes, 1)
    }))

  it.effect("an episode goes on at later samples until usage reaches low", () =>
    Effect.gen(function*() {
      const s = yield* scenario(6, watermarks(550, 300))
      for (const id of ["r0", "r1", "r2"]) s.runtime(id).busy = true
      // 600 MiB: only r3..r5 are free, and releasing all three reaches 300.
      s.runtime("r3").busy = true
      assert.deepStrictEqual(yield* s.checkAt(30), ["r4", "r5"], "what could be released, 400 MiB left")
      s.runtime("r0").busy = false
      // 400 MiB is under high but over low: the episode is still on, so r0 goes now.
      assert.deepStrictEqual(yield* s.checkAt(31), ["r0"])
      assert.deepStrictEqual(yield* s.checkAt(32), [], "300 MiB: over")
      assert.isNull(Option.getOrThrow(yield* s.collector.memory).pressure)
    }))

  it.effect("a family counts by its most recent member, and is released only when all of it is clear", () =>
    Effect.gen(function*() {
      const s = yield* scenario(3, watermarks(350, 250))
      // r0 is the oldest, but its child worked at minute 20: r1 goes first.
      s.runtimes.add("child", { parentAgentId: "r0", activity: minutes(20), rss: mib(100) })
      assert.deepStrictEqual(yield* s.checkAt(30), ["r1", "r2"])
      // A busy child keeps its parent, whatever the pressure.
      s.runtime("child").busy = true
      s.runtimes.add("r3", { activity: minutes(40), rss: mib(200) })
      assert.deepStrictEqual(yield* s.checkAt(50), ["r3"])
      assert.deepStrictEqual(s.resident(), ["r0", "child"])
    }))

  it.effect("a veto, a blocker and a missing persistence handle each keep their runtime; held is said once per episode", () =>
    Effect.gen(function*() {
      const entries: Array<LogEntry> = []
      yield* Effect.gen(function*() {
        const s = yield* scenario(4, watermarks(350, 100))
        s.runtime("r0").probe = Effect.succeed(stopVetoed("background job 1 `sleep 600`"))
        s.runtime("r1").busy = true
        s.runtime("r2").resumable = false
        s.runtime("r3").probe = Effect.succeed(stopPermitted)
        assert.deepStrictEqual(yield* s.checkAt(30), ["r3"])
        assert.deepStrictEqual(s.resident(), ["r0", "r1", "r2"])
        const status = Option.getOrThrow(yield* s.collector.memory)
        const held = new Map(status.held.map((holder) => [holder.agentId, holder]))
        assert.strictEqual(held.get("r0")?.veto, "background job 1 `sleep 600`")
        assert.strictEqual(held.get("r1")?.blockers[0]?.kind, "foreground-turn")
        assert.strictEqual(held.get("r2")?.state, "not-resumable")
        assert.strictEqual(held.get("r0")?.rssBytes, mib(100))
        assert.deepStrictEqual(yield* s.checkAt(31), [])
        assert.deepStrictEqual(s.resident(), ["r0", "r1", "r2"])
        const still = Option.getOrThrow(yield* s.collector.memory)
        assert.deepStrictEqual(still.held.map((holder) => holder.agentId).sort(), ["r0", "r1", "r2"], "named at every sweep")
        const explained = yield* s.collector.explain("r2")
        assert.deepStrictEqual(explained.memory, { rssBytes: mib(100), evictionRank: null }, "never in the order")
      }).pipe(recordingLogs(entries))
      const held = entries.filter((entry) => entry.message.startsWith("Memory pressure: nothing more"))
      assert.strictEqual(held.length, 1, "once per episode")
      assert.include(String(held[0]!.annotations["heldBy"]), "r0 (100.0 MiB, vetoed: background job 1 `sleep 600`)")
      assert.include(String(held[0]!.annotations["heldBy"]), "r1 (100.0 MiB, blocked: foreground-turn)")
      assert.include(String(held[0]!.annotations["heldBy"]), "r2 (100.0 MiB, not resumable)")
      assert.strictEqual(entries.filter((entry) => entry.message.startsWith("Memory pressure: releasing")).length, 1)
    }))

  it.effect("minIdle is respected: under pressure the idle period shrinks to it, no further", () =>
    Effect.gen(function*() {
      const s = yield* scenario(2, { memory: { high: mib(150), low: mib(50), minIdle: "2 minutes", sampleInterval: "3650 days" } })
      // r0 active at minute 0, r1 at minute 1.
      assert.deepStrictEqual(yield* s.checkAt(1), [], "neither is idle for 2 minutes")
      assert.deepStrictEqual(yield* s.checkAt(2), ["r0"])
      assert.deepStrictEqual(yield* s.checkAt(3), ["r1"])
    }))

  it.effect("a veto restarts the idle clock, under pressure as at any time", () =>
    Effect.gen(function*() {
      const s = yield* scenario(1, { memory: { high: mib(50), low: mib(10), minIdle: "2 minutes", sampleInterval: "3650 days" } })
      s.runtime("r0").probe = Effect.succeed(stopVetoed("busy"))
      assert.deepStrictEqual(yield* s.checkAt(10), [])
      s.runtime("r0").probe = Effect.succeed(stopPermitted)
      assert.deepStrictEqual(yield* s.checkAt(11), [], "seen clear at 11: idle since 11")
      assert.deepStrictEqual(yield* s.checkAt(13), ["r0"])
    }))

  it.effect("maxResident: at most N resident, least recently active released first, counted as max-resident", () =>
    Effect.gen(function*() {
      const entries: Array<LogEntry> = []
      yield* Effect.gen(function*() {
        const s = yield* scenario(5, { memory: { maxResident: 3, sampleInterval: "3650 days" } })
        assert.deepStrictEqual(yield* s.checkAt(30), ["r0", "r1"])
        assert.deepStrictEqual(Option.getOrThrow(yield* s.collector.memory).pressure?.causes, ["max-resident"])
        assert.deepStrictEqual(yield* s.checkAt(31), [])
        assert.isNull(Option.getOrThrow(yield* s.collector.memory).pressure)
      }).pipe(recordingLogs(entries))
      const collected = entries.filter((entry) => entry.message === "Collected idle agent runtime")
      assert.deepStrictEqual(collected.map((entry) => entry.annotations["cause"]), ["max-resident", "max-resident"])
      assert.strictEqual(entries.filter((entry) => entry.message === "Memory pressure over").length, 1)
    }))

  it.effect("minAvailable: a reading under the floor releases until it is a quarter above it", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      for (let i = 0; i < 4; i++) runtimes.add(`r${i}`, { activity: minutes(i), rss: mib(100) })
      let available = mib(900)
      const collector = yield* makeRuntimeCollector({
        tickInterval: "3650 days",
        memory: { minAvailable: mib(1000), sampleInterval: "3650 days" }
      }).pipe(
        Effect.provideService(RuntimeCandidates, runtimes.service),
        Effect.provideService(CallerProtection, new FakeCallerProtection().service),
        Effect.provideService(HostMemory, HostMemory.of({ available: Effect.sync(() => Option.some(available)) }))
      )
      yield* TestClock.setTime(minutes(30))
      // 900 MiB available, under 1000: owed 1250 − 900 = 350 MiB, four runtimes.
      const report = yield* collector.checkMemory
      assert.deepStrictEqual(report.collected.map((entry) => entry.agentId), ["r0", "r1", "r2", "r3"])
      const status = Option.getOrThrow(yield* collector.memory)
      assert.strictEqual(status.availableBytes, mib(900))
      assert.deepStrictEqual(status.pressure?.causes, ["min-available"])
      available = mib(1100)
      yield* collector.checkMemory
      assert.isNotNull(Option.getOrThrow(yield* collector.memory).pressure, "1100 is not yet a quarter above 1000")
      available = mib(1300)
      yield* collector.checkMemory
      assert.isNull(Option.getOrThrow(yield* collector.memory).pressure)
    }))

  it.effect("samples through a ProcessInspection once per check, and never measures a reused pid", () =>
    Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      const a = runtimes.add("a", { activity: 0, process: { pid: 101 } })
      const b = runtimes.add("b", { activity: minutes(1), process: { pid: 102, startTime: 7 } })
      let startOfA = 5
      let sampleAllCalls = 0
      const sampleOf = (pid: number, startTime: number): ProcessSample => ({
        pid,
        startTime,
        // The process that took a's pid is much larger: it must never be counted as a.
        rssBytes: pid === 101 && startTime === 6 ? mib(900) : mib(100),
        measuredProcesses: 1,
        unmeasuredProcesses: 0
      })
      const inspection = ProcessInspection.of({
        sample: () => Effect.succeedNone,
        sampleAll: (pids) =>
          Effect.sync(() => {
            sampleAllCalls++
            return new Map(pids.map((pid) => [pid, Option.some(sampleOf(pid, pid === 101 ? startOfA : 8))]))
          })
      })
      const collector = yield* makeRuntimeCollector({
        tickInterval: "3650 days",
        memory: { high: mib(500), low: mib(100), sampleInterval: "3650 days" }
      }).pipe(
        Effect.provideService(RuntimeCandidates, runtimes.service),
        Effect.provideService(CallerProtection, new FakeCallerProtection().service),
        Effect.provideService(ProcessInspection, inspection)
      )
      yield* collector.checkMemory
      assert.strictEqual(sampleAllCalls, 1)
      let status = Option.getOrThrow(yield* collector.memory)
      // b's owner said start time 7, the pid now has 8: not b.
      assert.strictEqual(status.residentBytes, mib(100))
      assert.strictEqual(status.unmeasuredRuntimes, 1)
      startOfA = 6
      yield* collector.checkMemory
      status = Option.getOrThrow(yield* collector.memory)
      assert.strictEqual(status.residentBytes, mib(100), "a's pid names another process: a keeps its last measured RSS")
      assert.strictEqual(status.unmeasuredRuntimes, 1)
      assert.isFalse(a.closed || b.closed)
    }))

  it.effect("a runtime not measured in time counts with its last measured RSS, so a slow sample never hides usage", () =>
    Effect.gen(function*() {
      const s = yield* scenario(3, watermarks(1000, 500))
      yield* s.checkAt(10)
      s.runtime("r0").rss = undefined
      s.runtimes.add("fresh", { activity: minutes(10) })
      yield* s.checkAt(11)
      const status = Option.getOrThrow(yield* s.collector.memory)
      assert.strictEqual(status.residentBytes, mib(300))
      assert.strictEqual(status.unmeasuredRuntimes, 1, "only the one never measured")
    }))

  it.effect("explain shows each runtime's RSS and place in the eviction order", () =>
    Effect.gen(function*() {
      const s = yield* scenario(3, watermarks(1000, 500))
      yield* s.checkAt(10)
      assert.deepStrictEqual((yield* s.collector.explain("r0")).memory, { rssBytes: mib(100), evictionRank: 1 })
      assert.deepStrictEqual((yield* s.collector.explain("r2")).memory, { rssBytes: mib(100), evictionRank: 3 })
      const status = Option.getOrThrow(yield* s.collector.memory)
      assert.deepStrictEqual(status.order.map((entry) => entry.agentId), ["r0", "r1", "r2"])
    }))
})

describe("memory budget: off", () => {
  it.effect("without a budget the collector decides by the clock alone, exactly as before", () =>
    Effect.gen(function*() {
      const s = yield* scenario(3, {}, 10_000)
      assert.deepStrictEqual(yield* s.checkAt(30), [])
      assert.isTrue(Option.isNone(yield* s.collector.memory))
      assert.isFalse("memory" in (yield* s.collector.explain("r0")))
      yield* TestClock.setTime(minutes(60))
      assert.deepStrictEqual((yield* s.collector.sweep).collected.map((entry) => entry.agentId), ["r0"])
      assert.deepStrictEqual(s.resident(), ["r1", "r2"])
    }))

  it.effect("idleRuntimeCleanup false turns the pressure sweep off too", () =>
    Effect.gen(function*() {
      const s = yield* scenario(3, { enabled: false, ...watermarks(100, 50) })
      assert.deepStrictEqual(yield* s.checkAt(30), [])
      assert.deepStrictEqual(s.resident(), ["r0", "r1", "r2"])
    }))
})

describe("memory budget: the eviction order", () => {
  it("is least recently active family first, ancestors first on a tie, without runtimes that cannot be resumed", () => {
    const runtimes = new FakeRuntimes()
    runtimes.add("old-parent", { activity: 1 })
    runtimes.add("fresh-child", { parentAgentId: "old-parent", activity: 50 })
    runtimes.add("mid", { activity: 20 })
    runtimes.add("oldest", { activity: 0, resumable: false })
    runtimes.add("tie-parent", { activity: 30 })
    runtimes.add("tie-child", { parentAgentId: "tie-parent", activity: 30 })
    const snapshot = runtimes.snapshot()
    const index = indexFamilies(snapshot)
    const order = evictionOrder(snapshot, index, familyRecency(snapshot, index)).map((position) => snapshot[position]!.agentId)
    assert.deepStrictEqual(order, ["mid", "tie-parent", "tie-child", "old-parent", "fresh-child"])
  })
})
