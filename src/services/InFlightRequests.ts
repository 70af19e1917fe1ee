import { Context, Effect, Layer } from "effect"

/**
 * The HTTP requests being served right now, so that a retirement can wait for those that were in
 * flight when it committed to leave (within a bound) before the daemon exits. Requests that come
 * later are refused at once and do not hold it up.
 */
export class InFlightRequests extends Context.Service<InFlightRequests, {
  /** Runs `request` counted as in flight until it ends. */
  readonly track: <A, E, R>(request: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** A mark of this moment, for `countBefore`. */
  readonly mark: () => number
  /** How many requests begun before `mark` are still in flight. */
  readonly countBefore: (mark: number) => number
}>()("quiesce/http/InFlightRequests") {
  static readonly layer: Layer.Layer<InFlightRequests> = Layer.sync(InFlightRequests, () => {
    let next = 0
    const inFlight = new Set<number>()
    return InFlightRequests.of({
      track: (request) =>
        Effect.suspend(() => {
          const id = next++
          inFlight.add(id)
          return request.pipe(Effect.ensuring(Effect.sync(() => inFlight.delete(id))))
        }),
      mark: () => next,
      countBefore: (mark) => {
        let count = 0
        for (const id of inFlight) if (id < mark) count++
        return count
      }
    })
  })
}
