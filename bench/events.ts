/**
 * The live event stream's room in-process: how many events a second reach one reader, and each of
 * 100 readers of one agent, from publishing to the reader's stream (HTTP framing not included).
 */
import { Context, Effect, Exit, Fiber, Layer, Scope, Stream } from "effect"
import * as AgentEventsLive from "../src/layers/events/AgentEventsLive.ts"
import { AgentEvents } from "../src/services/AgentEvents.ts"
import { type BenchRow, run } from "./table.ts"

const events = 20_000

/** Events a second that reach every one of `readers` readers. */
const throughput = (readers: number) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const room = Context.get(yield* Layer.buildWithScope(AgentEventsLive.layer, scope), AgentEvents)
    const streams = yield* Effect.forEach(Array.from({ length: readers }), () => room.follow("agent", undefined))
    const fibers = yield* Effect.forEach(streams, (stream) => Effect.forkChild(Stream.runDrain(Stream.take(stream, events))))
    const start = performance.now()
    for (let i = 0; i < events; i++) {
      room.publish("agent", { _tag: "output", turnId: "turn", text: `line ${i}\n` }, Date.now())
      // Let the readers keep up, as a provider's output arrives over time (the window holds 1,000).
      if (i % 500 === 499) yield* Effect.yieldNow
    }
    yield* Fiber.joinAll(fibers)
    const seconds = (performance.now() - start) / 1000
    yield* Scope.close(scope, Exit.void)
    return events / seconds
  })

export const eventsBench = async (): Promise<ReadonlyArray<BenchRow>> => {
  const one = await run(throughput(1))
  const hundred = await run(throughput(100))
  return [
    { name: "live events to 1 reader", value: `${Math.round(one).toLocaleString("en")} events/s`, target: "> 10,000 events/s", ok: one > 10_000 },
    { name: "live events to each of 100 readers", value: `${Math.round(hundred).toLocaleString("en")} events/s`, target: "> 1,000 events/s", ok: hundred > 1_000 }
  ]
}
