/**
 * The `AgentEvents` room: owns the event windows (`eventWindow.ts`) and wakes the readers waiting
 * on an agent when it publishes. Readers pull from the shared window at their own pace, so a slow
 * one costs nothing but its position (and reads a gap once the window passed it).
 *
 * An event's id is `<epoch>-<n>`: `n` is its number in this process's windows, and the epoch is
 * drawn when the room starts (the start time and a random part), so no other process issues the
 * same id. A reader resuming from an id of another epoch (the daemon restarted; on a cluster, the
 * agent moved here from another runner) reads a gap, then the oldest event kept here: one rule for
 * both.
 */
import { Clock, Deferred, Effect, Layer, Option, Random, Stream } from "effect"
import type { NumberedEvent } from "../../domain/agentEvent.ts"
import { AgentEvents } from "../../services/AgentEvents.ts"
import { defaultWindowLimits, EventWindows, type WindowLimits, type WindowRead } from "./eventWindow.ts"

/** The most events a reader is handed at once. */
const batch = 256

/** This process's epoch: its start time and 32 random bits, in base 36. */
const drawEpoch = Effect.gen(function*() {
  const now = yield* Clock.currentTimeMillis
  const random = yield* Random.nextIntBetween(0, 0xffff_ffff)
  return `${now.toString(36)}${random.toString(36).padStart(7, "0")}`
})

/** A reader's position: a number of this process, or the id of another it resumes from (read as a gap). */
interface Position {
  readonly number: number
  readonly foreign?: string | undefined
}

/** The room, with the windows' limits (default `defaultWindowLimits`). Every stream ends when the layer's scope closes. */
export const layerWith = (limits: WindowLimits = defaultWindowLimits): Layer.Layer<AgentEvents> =>
  Layer.effect(
    AgentEvents,
    Effect.gen(function*() {
      const epoch = yield* drawEpoch
      const windows = new EventWindows(limits, epoch)
      const idOf = (n: number) => windows.idOf(n)
      /** The position an id names: its number when this process issued it, otherwise before every number (so a gap). */
      const positionOf = (id: string): Position => {
        const dash = id.lastIndexOf("-")
        const n = Number(id.slice(dash + 1))
        return id.slice(0, dash) === epoch && /^\d+$/.test(id.slice(dash + 1)) && Number.isSafeInteger(n)
          ? { number: n }
          : { number: -1, foreign: id }
      }
      /** Per agent, completed (and replaced) when it publishes: what its readers wait on. */
      const wakes = new Map<string, Deferred.Deferred<void>>()
      /** Completed (and replaced) when any agent publishes: what readers of every agent wait on. */
      let everyAgentWake = Deferred.makeUnsafe<void>()
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
      const wakeEveryAgentReaders = () => {
        const wake = everyAgentWake
        everyAgentWake = Deferred.makeUnsafe<void>()
        Deferred.doneUnsafe(wake, Effect.void)
      }
      const endStreams = Effect.sync(() => {
        Deferred.doneUnsafe(stopped, Effect.void)
        for (const agentId of [...wakes.keys()]) wakeReaders(agentId)
        wakeEveryAgentReaders()
      })
      yield* Effect.addFinalizer(() => endStreams)

      /** A reader's next events from `position` (`read`, then `wake` when there are none yet); none once stopped. */
      const next = (
        read: (position: number) => WindowRead,
        wake: () => Deferred.Deferred<void>,
        position: Position
      ): Effect.Effect<readonly [ReadonlyArray<NumberedEvent>, Option.Option<Position>]> =>
        Effect.suspend(() => {
          if (Deferred.isDoneUnsafe(stopped)) return Effect.succeed([[], Option.none()] as const)
          const got = read(position.number)
          const out: Array<NumberedEvent> = []
          if (got.gap !== undefined) {
            out.push({
              id: idOf(got.gap.resumesAt - 1),
              event: { _tag: "gap", after: position.foreign ?? idOf(got.gap.after), resumesAt: idOf(got.gap.resumesAt) }
            })
          }
          for (const kept of got.events) out.push(kept.sent)
          if (out.length > 0) return Effect.succeed([out, Option.some({ number: got.position })] as const)
          return Effect.andThen(Deferred.await(wake()), next(read, wake, position))
        })

      const latest = Effect.sync(() => idOf(windows.latest()))

      return AgentEvents.of({
        publish: (agentId, event, now) => {
          windows.append(agentId, event, now)
          wakeReaders(agentId)
          wakeEveryAgentReaders()
        },
        follow: (agentId, after) =>
          Effect.sync(() => {
            const start = after === undefined ? { number: windows.latest() } : positionOf(after)
            const read = (position: number) => windows.read(agentId, position, batch)
            return Stream.paginate(start, (position) => next(read, () => wakeOf(agentId), position)).pipe(
              Stream.onStart(Effect.sync(() => windows.addReader(agentId))),
              Stream.ensuring(Effect.sync(() => windows.removeReader(agentId)))
            )
          }),
        followEveryAgent: (after) =>
          Effect.sync(() =>
            Stream.paginate(
              after === undefined ? { number: windows.latest() } : positionOf(after),
              (position) => next((from) => windows.readEveryAgent(from, batch), () => everyAgentWake, position)
            )
          ),
        latest,
        latestOf: () => latest,
        forget: (agentId) => Effect.sync(() => windows.forget(agentId)),
        endStreams
      })
    })
  )

/** The room with the default limits. */
export const layer: Layer.Layer<AgentEvents> = layerWith()
