import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Context, Effect, Exit, Fiber, Layer, Scope, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import type { AgentEvent, NumberedEvent } from "../../../src/domain/agentEvent.ts"
import * as AgentEventsLive from "../../../src/layers/events/AgentEventsLive.ts"
import { EventWindows, type WindowLimits } from "../../../src/layers/events/eventWindow.ts"
import { AgentEvents } from "../../../src/services/AgentEvents.ts"

const limits: WindowLimits = { maxEvents: 5, maxBytes: 300, idleRetentionMs: 60_000 }
const output = (text: string): AgentEvent => ({ _tag: "output", turnId: null, text })

/** One step: an append to an agent (text of some size), or a read by a reader at its position. */
const Step = Schema.Union([
  Schema.Struct({ append: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 2 })), size: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 120 })) }),
  Schema.Struct({ read: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 3 })), max: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 4 })) })
])
const Steps = Arbitrary.array(Arbitrary.schema(Step), { maxLength: 200 })

describe("EventWindows", () => {
  it.prop("stays bounded, and a reader reads every event in order or a gap", [Steps], ([steps]) => {
    const windows = new EventWindows(limits)
    const appended: Array<Array<number>> = [[], [], []]
    // Reader r follows agent r % 3 from the start.
    const readers = [0, 1, 2, 3].map((r) => {
      const seen: Array<number> = []
      return { agent: r % 3, position: windows.latest(), seen, gaps: 0 }
    })
    let now = 0
    for (const step of steps) {
      now += 1_000
      if ("append" in step) {
        appended[step.append]!.push(windows.append(`a${step.append}`, output("x".repeat(step.size)), now))
        const size = windows.size()
        // Three agents' windows and the daemon-wide one.
        assert.isAtMost(size.events, 4 * limits.maxEvents)
        assert.isAtMost(size.bytes, 4 * (limits.maxBytes + 200))
      } else {
        const reader = readers[step.read]!
        const all = appended[reader.agent]!
        const read = windows.read(`a${reader.agent}`, reader.position, step.max)
        const from = read.gap !== undefined ? read.gap.resumesAt - 1 : reader.position
        if (read.gap !== undefined) {
          reader.gaps++
          assert.strictEqual(read.gap.after, reader.position)
          // A gap only when something after the position was truly missed.
          assert.isTrue(all.some((id) => id > reader.position && id < read.gap!.resumesAt))
        }
        const expected = all.filter((id) => id > from).slice(0, step.max)
        assert.deepStrictEqual(read.events.map((e) => e.id), expected)
        reader.seen.push(...read.events.map((e) => e.id))
        reader.position = read.position
      }
    }
    for (const reader of readers) {
      // In order, without repeats; and without a gap, nothing appended in between was skipped.
      for (let i = 1; i < reader.seen.length; i++) assert.isAbove(reader.seen[i]!, reader.seen[i - 1]!)
      if (reader.gaps === 0) {
        const all = appended[reader.agent]!
        assert.deepStrictEqual(reader.seen, all.slice(0, reader.seen.length))
      }
    }
  })

  it("the daemon-wide window has every agent's events in order, each naming its agent, within the same bounds", () => {
    const windows = new EventWindows(limits)
    const start = windows.latest()
    const ids = ["a", "b", "a"].map((agentId, i) => windows.append(agentId, output(String(i)), 0))
    const read = windows.readEveryAgent(start, 10)
    assert.isUndefined(read.gap)
    assert.deepStrictEqual(read.events.map((e) => [e.id, e.sent.agentId]), [[ids[0], "a"], [ids[1], "b"], [ids[2], "a"]])
    for (let i = 0; i < 10; i++) windows.append(i % 2 === 0 ? "a" : "b", output("more"), 0)
    const behind = windows.readEveryAgent(ids[2]!, 10)
    assert.isDefined(behind.gap)
    assert.strictEqual(behind.events.length, limits.maxEvents)
  })

  it("a position this daemon never issued reads a gap, then the oldest kept", () => {
    const windows = new EventWindows(limits)
    const first = windows.append("a", output("one"), 0)
    const read = windows.read("a", first + 50, 10)
    assert.deepStrictEqual(read.gap, { after: first + 50, resumesAt: first })
    assert.deepStrictEqual(read.events.map((e) => e.id), [first])
  })

  it("drops a window no one reads once its events are older than the retention, not one being read", () => {
    const windows = new EventWindows(limits)
    const start = windows.latest()
    windows.append("idle", output("a"), 0)
    windows.append("read", output("b"), 0)
    windows.addReader("read")
    windows.append("other", output("c"), 120_000)
    assert.strictEqual(windows.size().agents, 2)
    const read = windows.read("idle", start, 10)
    assert.isDefined(read.gap)
  })
})

const collectFor = (stream: Stream.Stream<NumberedEvent>, n: number) => Stream.runCollect(Stream.take(stream, n))

describe("AgentEvents", () => {
  it.effect("a follower sees what is published after it started, in order; a reconnect resumes after its last id", () =>
    Effect.gen(function*() {
      const events = yield* AgentEvents
      events.publish("a", output("before"), 0)
      const stream = yield* events.follow("a", undefined)
      const reading = yield* Effect.forkChild(collectFor(stream, 3))
      for (const text of ["1", "2", "3"]) events.publish("a", output(text), 0)
      events.publish("b", output("other agent"), 0)
      const read = yield* Fiber.join(reading)
      assert.deepStrictEqual(read.map((e) => e.event._tag === "output" ? e.event.text : e.event._tag), ["1", "2", "3"])
      const again = yield* collectFor(yield* events.follow("a", read[0]!.id), 2)
      assert.deepStrictEqual(again.map((e) => e.id), read.slice(1).map((e) => e.id))
    }).pipe(Effect.provide(AgentEventsLive.layer)))

  it.effect("a follower of every agent sees each agent's events as they are published, and resumes after its last id", () =>
    Effect.gen(function*() {
      const events = yield* AgentEvents
      events.publish("a", output("before"), 0)
      const reading = yield* Effect.forkChild(collectFor(yield* events.followEveryAgent(undefined), 3))
      events.publish("a", output("1"), 0)
      events.publish("b", output("2"), 0)
      events.publish("a", output("3"), 0)
      const read = yield* Fiber.join(reading)
      assert.deepStrictEqual(read.map((e) => [e.agentId, e.event._tag === "output" ? e.event.text : e.event._tag]), [["a", "1"], ["b", "2"], ["a", "3"]])
      const again = yield* collectFor(yield* events.followEveryAgent(read[0]!.id), 2)
      assert.deepStrictEqual(again.map((e) => e.id), read.slice(1).map((e) => e.id))
    }).pipe(Effect.provide(AgentEventsLive.layer)))

  it.effect("a reconnect older than the window reads a gap, then the oldest kept", () =>
    Effect.gen(function*() {
      const events = yield* AgentEvents
      const start = yield* events.follow("a", undefined)
      const first = yield* Effect.forkChild(collectFor(start, 1))
      events.publish("a", output("0"), 0)
      const [firstEvent] = yield* Fiber.join(first)
      for (let i = 1; i < 8; i++) events.publish("a", output(String(i)), 0)
      const read = yield* collectFor(yield* events.follow("a", firstEvent!.id), 6)
      const gap = read[0]!.event
      assert.strictEqual(gap._tag, "gap")
      assert.deepStrictEqual(read.slice(1).map((e) => e.event._tag === "output" ? e.event.text : "?"), ["3", "4", "5", "6", "7"])
    }).pipe(Effect.provide(AgentEventsLive.layerWith(limits))))

  it.effect("an id another process issued (a restart, an agent moved from another runner) reads a gap, then every event kept", () =>
    Effect.gen(function*() {
      const before = Context.get(yield* Layer.build(AgentEventsLive.layer), AgentEvents)
      const after = Context.get(yield* Layer.build(AgentEventsLive.layer), AgentEvents)
      const first = yield* Effect.forkChild(collectFor(yield* before.follow("a", undefined), 1))
      before.publish("a", output("before"), 0)
      const [old] = yield* Fiber.join(first)
      for (const text of ["1", "2"]) after.publish("a", output(text), 0)
      const read = yield* collectFor(yield* after.follow("a", old!.id), 3)
      assert.notStrictEqual(old!.id.split("-")[0], read[1]!.id.split("-")[0])
      assert.deepStrictEqual(read[0]!.event, { _tag: "gap", after: old!.id, resumesAt: read[1]!.id })
      assert.deepStrictEqual(read.slice(1).map((e) => e.event._tag === "output" ? e.event.text : "?"), ["1", "2"])
    }).pipe(Effect.scoped))

  it.effect("every stream ends when the room stops", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(AgentEventsLive.layer, scope)
      const events = Context.get(context, AgentEvents)
      const reading = yield* Effect.forkChild(Stream.runCollect(yield* events.follow("a", undefined)))
      const readingEvery = yield* Effect.forkChild(Stream.runCollect(yield* events.followEveryAgent(undefined)))
      yield* TestClock.adjust("1 second")
      yield* Scope.close(scope, Exit.void)
      const read = yield* Fiber.join(reading)
      assert.strictEqual(read.length, 0)
      assert.strictEqual((yield* Fiber.join(readingEvery)).length, 0)
    }))
})
