/**
 * Head sampling as OpenTelemetry's `OTEL_TRACES_SAMPLER` names it: which traces are exported. The
 * decision is made once per trace in this process, at its first span: the root, or the first under
 * a caller's `traceparent`. Every span under it follows that span's decision. Under a caller's
 * `traceparent` a parent-based sampler takes the caller's decision; one that is not decides anew.
 * Unsampled spans are still made (they carry the trace context onward) but are neither kept nor
 * sent.
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

/** `tracer` with `sampler`'s decision at each trace's first span here (see the module's comment). */
export const sampledTracer = (tracer: Tracer.Tracer, sampler: TraceSampler, random: () => number = Math.random): Tracer.Tracer =>
  Tracer.make({
    span(options) {
      const parent = Option.getOrUndefined(options.parent)
      // A local parent decided already: its children follow it (effect passes its decision on).
      if (parent !== undefined && parent._tag === "Span") return tracer.span(options)
      // A root keeps effect's own refusal (a span below the minimum trace level).
      const sampled = parent === undefined
        ? options.sampled && random() < sampler.ratio
        : sampler.parentBased ? options.sampled : random() < sampler.ratio
      return tracer.span({ ...options, sampled })
    },
    context: tracer.context
  })
