import { assert, describe, it } from "@effect/vitest"
import { Effect, Tracer } from "effect"
import { sampledTracer } from "../../../src/layers/telemetry/sampler.ts"

/** The sampled flag of every span a traced program made, by name. */
const run = (tracer: Tracer.Tracer, program: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const made: Array<{ name: string; sampled: boolean }> = []
    const recording = Tracer.make({
      span(options) {
        const span = tracer.span(options)
        made.push({ name: options.name, sampled: span.sampled })
        return span
      }
    })
    yield* program.pipe(Effect.withTracer(recording))
    return made
  })

const base = Tracer.make({ span: (options) => new Tracer.NativeSpan(options) })

const trace = (name: string) => Effect.void.pipe(Effect.withSpan(`${name}.child`), Effect.withSpan(name))

describe("sampledTracer", () => {
  it.effect("decides at the root: a trace is sampled whole or not at all", () =>
    Effect.gen(function*() {
      // Alternating draws: the first trace in, the second out.
      let draw = 0
      const sampler = sampledTracer(base, { ratio: 0.5, parentBased: true }, () => (draw++ % 2 === 0 ? 0.1 : 0.9))
      const made = yield* run(sampler, Effect.andThen(trace("first"), trace("second")))
      assert.deepStrictEqual(made, [
        { name: "first", sampled: true },
        { name: "first.child", sampled: true },
        { name: "second", sampled: false },
        { name: "second.child", sampled: false }
      ])
    }))

  it.effect("not parent-based, it still decides once per trace: a sampled trace keeps every span", () =>
    Effect.gen(function*() {
      // The first draw lets the trace in; any later draw would keep it out.
      let draw = 0
      const sampler = sampledTracer(base, { ratio: 0.5, parentBased: false }, () => (draw++ === 0 ? 0.1 : 0.9))
      const made = yield* run(sampler, trace("only"))
      assert.deepStrictEqual(made, [{ name: "only", sampled: true }, { name: "only.child", sampled: true }])
    }))

  it.effect("parent-based, it follows a caller's traceparent; otherwise it decides anew", () =>
    Effect.gen(function*() {
      const remote = (sampled: boolean) => Tracer.externalSpan({ traceId: "a".repeat(32), spanId: "b".repeat(16), sampled })
      const under = (sampled: boolean) => trace("served").pipe(Effect.withParentSpan(remote(sampled)))
      const never = () => 0.99
      const parentBased = sampledTracer(base, { ratio: 0.5, parentBased: true }, never)
      assert.isTrue((yield* run(parentBased, under(true))).every((span) => span.sampled))
      assert.isTrue((yield* run(parentBased, under(false))).every((span) => !span.sampled))
      const own = sampledTracer(base, { ratio: 0.5, parentBased: false }, never)
      assert.isTrue((yield* run(own, under(true))).every((span) => !span.sampled))
      const always = sampledTracer(base, { ratio: 1, parentBased: false }, never)
      assert.isTrue((yield* run(always, under(false))).every((span) => span.sampled))
    }))

  it.effect("always_off samples nothing; ratio 1 samples everything", () =>
    Effect.gen(function*() {
      assert.isTrue((yield* run(sampledTracer(base, { ratio: 0, parentBased: false }), trace("t"))).every((span) => !span.sampled))
      assert.isTrue((yield* run(sampledTracer(base, { ratio: 1, parentBased: false }), trace("t"))).every((span) => span.sampled))
    }))
})
