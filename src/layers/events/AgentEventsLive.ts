/**
 * The `AgentEvents` room: owns the event windows (`eventWindow.ts`) and wakes the readers waiting
 * on an agent when it publishes. Readers pull from the shared window at their own pace, so a slow
 * one costs nothing but its position (and reads a gap once the window passed it).
 */
import { Clock, Deferred, Effect, Layer, Option, Stream } from "effect"
import type { NumberedEvent } from "../../domain/agentEvent.ts"
import { AgentEvents } from "../../services/AgentEvents.ts"
import { defaultWindowLimits, EventWindows, type WindowLimits } from "./eventWindow.ts"

/** The most events a reader is handed at once. */
const batch = 256

/** The room, with the windows' limits (default `defaultWindowLimits`). Every stream ends when the layer's scope closes. */
export const layerWith = (limits: WindowLimits = defaultWindowLimits): Layer.Layer<AgentEvents> =>
  Layer.effect(
    AgentEvents,
    Effect.gen(function*() {
      const windows = new EventWindows(yield* Clock.currentTimeMillis, limits)
      /** Per agent, completed (and replaced) when it publishes: what its readers wait on. */
      const wakes = new Map<string, Deferred.Deferred<void>>()
      const stopped = Deferred.makeUnsafe<void>()
      const wakeOf = (agentId: string) => {
        let wake = wakes.get(agentId)
        if (wake === undefined) wakes.set(agentId, wake = Deferred.makeUnsafe<void>())
        return wake
      }
      const wakeReaders = (agentId: string) => {
        const wake = wakes.get(agentId)
        wakes.delete(agentId)
        if (wake !== undefined) Deferred.doneUnsafe(wake, Effect.void)
      }
      const endStreams = Effect.sync(() => {
        Deferred.doneUnsafe(stopped, Effect.void)
        for (const agentId of [...wakes.keys()]) wakeReaders(agentId)
      })
      yield* Effect.addFinalizer(() => endStreams)

      /** The reader's next events from `position`, waiting until there are some; none once stopped. */
      const next = (agentId: string, position: number): Effect.Effect<readonly [ReadonlyArray<NumberedEvent>, Option.Option<number>]> =>
        Effect.suspend(() => {
          if (Deferred.isDoneUnsafe(stopped)) return Effect.succeed([[], Option.none()] as const)
          const read = windows.read(agentId, position, batch)
          const out: Array<NumberedEvent> = []
          if (read.gap !== undefined) {
            out.push({ id: read.gap.resumesAt - 1, event: { _tag: "gap", after: read.gap.after, resumesAt: read.gap.resumesAt } })
          }
          out.push(...read.events)
          if (out.length > 0) return Effect.succeed([out, Option.some(read.position)] as const)
          return Effect.andThen(Deferred.await(wakeOf(agentId)), next(agentId, position))
        })

      return AgentEvents.of({
        publish: (agentId, event, now) => {
          windows.append(agentId, event, now)
          wakeReaders(agentId)
        },
        follow: (agentId, after) =>
          Effect.sync(() => {
            const start = after ?? windows.latest()
            return Stream.paginate(start, (position) => next(agentId, position)).pipe(
              Stream.onStart(Effect.sync(() => windows.addReader(agentId))),
              Stream.ensuring(Effect.sync(() => windows.removeReader(agentId)))
            )
          }),
        forget: (agentId) => Effect.sync(() => windows.forget(agentId)),
        endStreams
      })
    })
  )

/** The room with the default limits. */
export const layer: Layer.Layer<AgentEvents> = layerWith()
