import { Clock, Context, Effect, Layer } from "effect"

/**
 * When the daemon last did anything (R2): every source of work notes its activity here — prompts
 * accepted and turns ending, session events, lifecycle operations, permission answers, message
 * deliveries, finish subscriptions — and the daemon's idle timer measures its interval from the
 * latest. Passive use (reads, listings, status, metrics) never notes anything.
 */
export class ActivityClock extends Context.Service<ActivityClock, {
  /** Notes activity at `now` (epoch ms); cheap enough for the prompt path. */
  readonly touch: (now: number) => void
  /** The latest activity noted, or when the clock was made. */
  readonly lastActivityAt: () => number
  /**
   * How many times activity was noted: a retirement attempt that sees it change while it reads
   * its evidence refuses (activity in the same millisecond does not move `lastActivityAt`).
   */
  readonly touches: () => number
}>()("quiesce/retirement/ActivityClock") {
  static readonly layer: Layer.Layer<ActivityClock> = Layer.effect(
    ActivityClock,
    Effect.map(Clock.currentTimeMillis, (start) => {
      let last = start
      let touches = 0
      return ActivityClock.of({
        touch: (now) => {
          touches++
          if (now > last) last = now
        },
        lastActivityAt: () => last,
        touches: () => touches
      })
    })
  )

  /**
   * For a layer that notes activity: the host's clock if it has one (library hosts without
   * retirement need none), as an effect that notes activity now. Resolve it when the layer is
   * built — callers of the layer's methods do not carry the clock in their context.
   */
  static readonly noter: Effect.Effect<Effect.Effect<void>> = Effect.map(
    Effect.serviceOption(ActivityClock),
    (clock) =>
      clock._tag === "None"
        ? Effect.void
        : Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => clock.value.touch(now)))
  )
}
