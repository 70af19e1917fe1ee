/** A tracer that keeps every span it makes, for tests that read which spans a program made. */
import { Tracer } from "effect"

/** The tracer, and the spans it made so far (effect's native spans: name, attributes, parent, kind). */
export const recordingTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { tracer, spans }
}
