import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import { TestClock } from "effect/testing"
import { HomeNotManaged } from "../../../src/domain/hub.ts"
import type { OpenedStream } from "../../../src/layers/hub/forward.ts"
import { relay, type Whereabouts } from "../../../src/layers/hub/relay.ts"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** A daemon's body: these frames, in chunks cut mid-frame, then its end. */
const body = (...frames: ReadonlyArray<string>) => {
  const text = frames.join("")
  const middle = Math.floor(text.length / 2)
  return Stream.make(encoder.encode(text.slice(0, middle)), encoder.encode(text.slice(middle)))
}

const frame = (id: number, tag: string) => `id: ${id}\nevent: ${tag}\ndata: {"_tag":"${tag}"}\n\n`

const noDaemon = `event: no-daemon\ndata: {"_tag":"no-daemon"}\n\n`

const notFound: OpenedStream = {
  _tag: "answer",
  response: { status: 404, contentType: "application/problem+json", retryAfter: undefined, body: new Uint8Array() }
}

/**
 * A home whose daemon is, at each look of the relay, the next of `states` (the last one stays):
 * none, or a daemon (its instance) answering each open with the next of its answers. Records the
 * `Last-Event-ID` of every open.
 */
const home = (states: ReadonlyArray<{ readonly instanceId: string; readonly answers: Array<OpenedStream> } | "none" | "gone">) => {
  const opened: Array<{ readonly instanceId: string; readonly lastEventId: string | undefined }> = []
  let look = 0
  const whereabouts = Effect.suspend((): Effect.Effect<Whereabouts, HomeNotManaged> => {
    const state = states[Math.min(look++, states.length - 1)]!
    if (state === "gone") return Effect.fail(new HomeNotManaged({ name: "work", message: "gone" }))
    if (state === "none") return Effect.succeed({ _tag: "none" })
    return Effect.succeed({
      _tag: "running",
      instanceId: state.instanceId,
      open: (lastEventId) =>
        Effect.sync(() => {
          opened.push({ instanceId: state.instanceId, lastEventId })
          return state.answers.shift() ?? notFound
        })
    })
  })
  return { whereabouts, opened }
}

/** Runs the relay to its end, the clock moved a second at a time; what the reader got, as text. */
const runToEnd = (stream: Stream.Stream<Uint8Array>) =>
  Effect.gen(function*() {
    const reading = yield* Effect.forkChild(Stream.runCollect(stream))
    for (let i = 0; i < 60 && reading.pollUnsafe() === undefined; i++) yield* TestClock.adjust("1 second")
    const chunks = yield* Fiber.join(reading)
    return chunks.map((chunk) => decoder.decode(chunk)).join("")
  })

describe("the hub's relay of live events", () => {
  it.effect("waits for a daemon, follows it and the next one with the last id passed on, and ends when the agent is gone", () =>
    Effect.gen(function*() {
      const { opened, whereabouts } = home([
        "none",
        "none",
        { instanceId: "a", answers: [{ _tag: "stream", body: body(": daemon heartbeat\n\n", frame(5, "turn-accepted"), frame(6, "turn-ended")) }] },
        "none",
        { instanceId: "b", answers: [{ _tag: "stream", body: body(frame(9_000, "gap"), frame(9_001, "resumed")) }] }
      ])
      const text = yield* runToEnd(relay({ whereabouts, poll: "500 millis", heartbeat: "1 hour" }, { lastEventId: undefined, instanceId: undefined, first: undefined }))
      // The first daemon from 0 (the reader had read nothing), the next after the last id passed on; then its 404 ends it.
      assert.deepStrictEqual(opened, [
        { instanceId: "a", lastEventId: "0" },
        { instanceId: "b", lastEventId: "6" },
        { instanceId: "b", lastEventId: "9001" }
      ])
      // Every frame with an id passed on whole and in order, the daemon's own heartbeats not; told
      // once each time it began to wait that the home has no daemon.
      assert.strictEqual(
        text.replaceAll(": heartbeat\n\n", ""),
        noDaemon + frame(5, "turn-accepted") + frame(6, "turn-ended") + noDaemon + frame(9_000, "gap") + frame(9_001, "resumed")
      )
    }))

  it.effect("goes on from the stream opened for the reader, from now on the same daemon; ends when the home leaves the hub", () =>
    Effect.gen(function*() {
      const { opened, whereabouts } = home([
        { instanceId: "a", answers: [{ _tag: "stream", body: body() }] },
        "gone"
      ])
      const text = yield* runToEnd(relay({ whereabouts, poll: "500 millis", heartbeat: "1 hour" }, {
        lastEventId: undefined,
        instanceId: "a",
        first: body(": daemon heartbeat\n\n")
      }))
      // Nothing read yet, the same daemon: from now, not from 0 (which would replay its window).
      assert.deepStrictEqual(opened, [{ instanceId: "a", lastEventId: undefined }])
      assert.strictEqual(text.replaceAll(": heartbeat\n\n", ""), "")
      assert.notInclude(text, "daemon heartbeat")
    }))

  it.effect("a daemon whose first stream could not open is asked again from now, not from 0", () =>
    Effect.gen(function*() {
      const { opened, whereabouts } = home([{ instanceId: "a", answers: [{ _tag: "stream", body: body() }] }, "gone"])
      yield* runToEnd(relay({ whereabouts, poll: "500 millis", heartbeat: "1 hour" }, { lastEventId: undefined, instanceId: "a", first: undefined }))
      assert.deepStrictEqual(opened, [{ instanceId: "a", lastEventId: undefined }])
    }))

  it.effect("a daemon whose streams end at once (it is going) is asked again at most once a poll", () =>
    Effect.gen(function*() {
      const { opened, whereabouts } = home([
        { instanceId: "a", answers: Array.from({ length: 100 }, (): OpenedStream => ({ _tag: "stream", body: body() })) }
      ])
      const reading = yield* Effect.forkChild(
        Stream.runDrain(relay({ whereabouts, poll: "500 millis", heartbeat: "1 hour" }, { lastEventId: "7", instanceId: "a", first: body() }))
      )
      for (let i = 0; i < 4; i++) yield* TestClock.adjust("500 millis")
      yield* Fiber.interrupt(reading)
      assert.isAtMost(opened.length, 5)
      assert.isAtLeast(opened.length, 3)
    }))

  it.effect("tells the reader once that no daemon runs, and keeps its connection alive with heartbeats meanwhile", () =>
    Effect.gen(function*() {
      const { whereabouts } = home(["none"])
      const reading = yield* Effect.forkChild(
        Stream.runCollect(Stream.take(relay({ whereabouts, poll: "500 millis", heartbeat: "15 seconds" }, { lastEventId: "7", instanceId: undefined, first: undefined }), 4))
      )
      for (let i = 0; i < 31; i++) yield* TestClock.adjust("1 second")
      const chunks = (yield* Fiber.join(reading)).map((chunk) => decoder.decode(chunk))
      assert.deepStrictEqual([...chunks].sort(), [": heartbeat\n\n", ": heartbeat\n\n", ": heartbeat\n\n", noDaemon])
    }))
})
