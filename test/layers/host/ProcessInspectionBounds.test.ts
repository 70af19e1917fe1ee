/**
 * The bounds of process sampling (H5) under TestClock, over a procfs reader the test controls:
 * one shared deadline per query, at most four roots in flight across callers (a fifth is left
 * unmeasured at once, not queued), and the start time checked around every memory read.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import * as ProcessInspectionProcfs from "../../../src/layers/host/ProcessInspectionProcfs.ts"
import type { ProcStat } from "../../../src/platform/procfs.ts"
import { ProcessInspection } from "../../../src/services/ProcessInspection.ts"

interface FakeProcess {
  readonly ppid: number
  readonly pgid: number
  /** Start times, one per stat read; the last repeats (a change mid-sample is a reused pid). */
  readonly startTimes: ReadonlyArray<number>
  readonly pages: number
  /** What a memory read of it waits for first. */
  readonly memoryRead?: Effect.Effect<void>
}

/** A procfs of these processes; reads take no time unless a process says otherwise. */
const fakeReader = (processes: ReadonlyMap<number, FakeProcess>) => {
  const statReads = new Map<number, number>()
  const reader: ProcessInspectionProcfs.ProcfsReader = {
    pids: Effect.sync(() => [...processes.keys()]),
    stat: (pid) =>
      Effect.sync((): ProcStat | undefined => {
        const process = processes.get(pid)
        if (process === undefined) return undefined
        const read = statReads.get(pid) ?? 0
        statReads.set(pid, read + 1)
        const startTime = process.startTimes[Math.min(read, process.startTimes.length - 1)]!
        return { pid, state: "S", ppid: process.ppid, pgid: process.pgid, startTime }
      }),
    residentPages: (pid) =>
      Effect.suspend(() => {
        const process = processes.get(pid)
        if (process === undefined) return Effect.succeed(undefined)
        return (process.memoryRead ?? Effect.void).pipe(Effect.as(process.pages))
      })
  }
  return reader
}

const leader = (pid: number, pages: number, memoryRead?: Effect.Effect<void>): [number, FakeProcess] =>
  [pid, { ppid: 1, pgid: pid, startTimes: [pid * 10], pages, ...(memoryRead === undefined ? {} : { memoryRead }) }]

const usingInspection = <A>(use: (inspection: ProcessInspection["Service"]) => Effect.Effect<A>) =>
  Effect.gen(function*() {
    return yield* use(yield* ProcessInspection)
  })

const inspectionOver = (processes: ReadonlyMap<number, FakeProcess>) =>
  ProcessInspectionProcfs.layer({ reader: fakeReader(processes), pageSize: 1 })

describe("ProcessInspection bounds (TestClock)", () => {
  it.effect("a query has one deadline: what finished in time is kept, a slow root is unmeasured", () =>
    Effect.gen(function*() {
      const processes = new Map([leader(10, 100), leader(20, 200, Effect.sleep("5 seconds")), leader(30, 300)])
      const measured = yield* Effect.gen(function*() {
        const inspection = yield* ProcessInspection
        const fiber = yield* Effect.forkChild(inspection.sampleAll([10, 20, 30]))
        yield* TestClock.adjust("999 millis")
        assert.isUndefined(fiber.pollUnsafe(), "still within the deadline")
        yield* TestClock.adjust("1 millis")
        return yield* Fiber.join(fiber)
      }).pipe(Effect.provide(inspectionOver(processes)))
      assert.strictEqual(Option.getOrThrow(measured.get(10)!).rssBytes, 100)
      assert.isTrue(Option.isNone(measured.get(20)!), "not read by the deadline: unmeasured, not guessed")
      assert.strictEqual(Option.getOrThrow(measured.get(30)!).rssBytes, 300)
    }))

  it.effect("the deadline is shared, not per root: two half-second roots one after the other miss it", () =>
    Effect.gen(function*() {
      const slow = Effect.sleep("600 millis")
      const processes = new Map([leader(10, 1, slow), leader(20, 2, slow)])
      const measured = yield* Effect.gen(function*() {
        const inspection = yield* ProcessInspection
        // One slot: the second root starts only when the first is done, 600 ms in.
        const fiber = yield* Effect.forkChild(inspection.sampleAll([10, 20]))
        yield* TestClock.adjust("1 second")
        return yield* Fiber.join(fiber)
      }).pipe(Effect.provide(ProcessInspectionProcfs.layer({ reader: fakeReader(processes), pageSize: 1, admission: 1 })))
      assert.isTrue(Option.isSome(measured.get(10)!))
      assert.isTrue(Option.isNone(measured.get(20)!))
    }))

  it.effect("at most four roots in flight across callers: a fifth caller is unmeasured at once, not queued", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const waitForGate = Deferred.await(gate)
      const processes = new Map([
        leader(10, 1, waitForGate),
        leader(20, 2, waitForGate),
        leader(30, 3, waitForGate),
        leader(40, 4, waitForGate),
        leader(50, 5)
      ])
      yield* Effect.gen(function*() {
        const inspection = yield* ProcessInspection
        const busy = yield* Effect.forEach([10, 20, 30, 40], (pid) => Effect.forkChild(inspection.sample(pid)))
        yield* Effect.yieldNow
        // No time passes: the answer comes at once, without waiting for a slot.
        const saturated = yield* inspection.sample(50)
        assert.isTrue(Option.isNone(saturated), "every slot taken: left unmeasured")
        yield* Deferred.succeed(gate, undefined)
        const done = yield* Effect.forEach(busy, Fiber.join)
        assert.deepStrictEqual(done.map((sample) => Option.getOrThrow(sample).rssBytes), [1, 2, 3, 4])
        // The slots are free again.
        assert.strictEqual(Option.getOrThrow(yield* inspection.sample(50)).rssBytes, 5)
      }).pipe(Effect.provide(inspectionOver(processes)))
    }))

  it.effect("a root sample past the deadline gives its slot back once its read is cancelled", () =>
    Effect.gen(function*() {
      const processes = new Map([leader(10, 1, Effect.never), leader(20, 2)])
      yield* Effect.gen(function*() {
        const inspection = yield* ProcessInspection
        const fiber = yield* Effect.forkChild(inspection.sample(10))
        yield* TestClock.adjust("1 second")
        assert.isTrue(Option.isNone(yield* Fiber.join(fiber)))
        assert.strictEqual(Option.getOrThrow(yield* inspection.sample(20)).rssBytes, 2)
      }).pipe(Effect.provide(ProcessInspectionProcfs.layer({ reader: fakeReader(processes), pageSize: 1, admission: 1 })))
    }))

  it.effect("a read that will not stop does not hold the caller past the deadline; it keeps its slot until it ends", () =>
    Effect.gen(function*() {
      // An aborted file read still ends only when the disk answers: modelled as uninterruptible.
      const processes = new Map([leader(10, 1, Effect.uninterruptible(Effect.sleep("10 seconds"))), leader(20, 2)])
      yield* Effect.gen(function*() {
        const inspection = yield* ProcessInspection
        const fiber = yield* Effect.forkChild(inspection.sample(10))
        yield* TestClock.adjust("1 second")
        assert.isDefined(fiber.pollUnsafe(), "the caller has its answer at the deadline")
        assert.isTrue(Option.isNone(yield* Fiber.join(fiber)))
        assert.isTrue(Option.isNone(yield* inspection.sample(20)), "the stuck read still holds the only slot")
        yield* TestClock.adjust("9 seconds")
        assert.strictEqual(Option.getOrThrow(yield* inspection.sample(20)).rssBytes, 2, "and gives it back once it ends")
      }).pipe(Effect.provide(ProcessInspectionProcfs.layer({ reader: fakeReader(processes), pageSize: 1, admission: 1 })))
    }))

  it.effect("a root whose start time changes around the memory read (pid reused) is unmeasured", () =>
    Effect.gen(function*() {
      const processes = new Map<number, FakeProcess>([[10, { ppid: 1, pgid: 10, startTimes: [100, 200], pages: 7 }]])
      const sample = yield* usingInspection((inspection) => inspection.sample(10)).pipe(
        Effect.provide(inspectionOver(processes))
      )
      assert.isTrue(Option.isNone(sample))
    }))

  it.effect("a root that is not the process expected is unmeasured", () =>
    Effect.gen(function*() {
      const processes = new Map([leader(10, 7)])
      const [other, same] = yield* usingInspection((inspection) =>
        Effect.all([inspection.sample(10, 99), inspection.sample(10, 100)])).pipe(Effect.provide(inspectionOver(processes)))
      assert.isTrue(Option.isNone(other))
      assert.strictEqual(Option.getOrThrow(same).startTime, 100)
    }))

  it.effect("a descendant whose pid was reused after the listing is not counted, and the sample says so", () =>
    Effect.gen(function*() {
      const processes = new Map<number, FakeProcess>([
        leader(10, 100),
        [11, { ppid: 10, pgid: 10, startTimes: [110], pages: 10 }],
        // Listed with start time 120; read again after its memory, it is another process.
        [12, { ppid: 10, pgid: 10, startTimes: [120, 121], pages: 1000 }],
        // A grandchild by ppid in another group still belongs to the tree.
        [13, { ppid: 11, pgid: 13, startTimes: [130], pages: 1 }]
      ])
      const sample = yield* usingInspection((inspection) => inspection.sample(10)).pipe(
        Effect.provide(inspectionOver(processes))
      )
      const measured = Option.getOrThrow(sample)
      assert.strictEqual(measured.rssBytes, 111)
      assert.strictEqual(measured.measuredProcesses, 3)
      assert.strictEqual(measured.unmeasuredProcesses, 1)
    }))

  it.effect("nothing is served stale: a second query reads procfs again", () =>
    Effect.gen(function*() {
      const pages = { value: 5 }
      const processes = new Map<number, FakeProcess>([leader(10, 0)])
      const base = fakeReader(processes)
      const reader: ProcessInspectionProcfs.ProcfsReader = {
        ...base,
        residentPages: (pid) => Effect.sync(() => pid === 10 ? pages.value : undefined)
      }
      yield* Effect.gen(function*() {
        const inspection = yield* ProcessInspection
        assert.strictEqual(Option.getOrThrow(yield* inspection.sample(10)).rssBytes, 5)
        pages.value = 9
        assert.strictEqual(Option.getOrThrow(yield* inspection.sample(10)).rssBytes, 9)
      }).pipe(Effect.provide(ProcessInspectionProcfs.layer({ reader, pageSize: 1 })))
    }))
})
