/**
 * Head sampling as OpenTelemetry's `OTEL_TRACES_SAMPLER` names it: which traces are exported. The
 * decision is made once per trace, at its root span; every span under it follows (effect marks the
 * children of an unsampled span unsampled). A trace that came with a `traceparent` follows the
 * caller's decision unless the sampler is not parent-based. Unsampled spans are still made (they
 * carry the trace context onward) but are neither kept nor sent.
 */
import { Option, Tracer } from "effect"

/** The sampler: `always_on` and `always_off` are ratios 1 and 0; `parentBased` follows a parent's decision. */
export interface TraceSampler {
  readonly ratio: number
  readonly parentBased: boolean
}

/** OpenTelemetry's default, `parentbased_always_on`: every trace, unless a caller did not sample it. */
export const alwaysOn: TraceSampler = { ratio: 1, parentBased: true }

/** Whether `sampler` is the default, with which the tracer is used as it is. */
export const isAlwaysOn = (sampler: TraceSampler) => sampler.ratio >= 1 && sampler.parentBased

/** `tracer` with `sampler`'s decision at each root span (or at each span with a parent, when not parent-based). */
export const sampledTracer = (tracer: Tracer.Tracer, sampler: TraceSampler, random: () => number = Math.random): Tracer.Tracer =>
  Tracer.make({
    span(options) {
      const decides = !sampler.parentBased || Option.isNone(options.parent)
      const sampled = options.sampled && (!decides || random() < sampler.ratio)
      return tracer.span({ ...options, sampled })
    },
    context: tracer.context
  })
