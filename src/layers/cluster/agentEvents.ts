/**
 * An agent's live events read on any runner of a cluster (X6): the runner that hosts the agent
 * publishes them in its own `AgentEvents` (its turns run and its residency changes there), and a
 * reader on any runner follows them there through the Agent entity (`LatestEvent`, `Follow`).
 *
 * - **Where a reader starts.** Without `Last-Event-ID`, the host's latest event id is asked first,
 *   so a reader that starts, then prompts, sees the whole turn (as on a lone daemon).
 * - **When the agent moves.** The entity ends on its old runner (a stop or a shard move), which
 *   ends the host's stream there; the reader's stream follows on from its last id through the
 *   entity, so it reaches the new host. That id is of another process: the new host answers a
 *   `gap`, then what it kept. A runner whose process died is the cluster's to route around: the
 *   stream is sent again to the new host, which answers a `gap` the same way.
 * - **What ends a reader's stream.** This runner stopping, or the cluster failing to route the
 *   request (its storage, a full mailbox): the reader reconnects with `Last-Event-ID`.
 *
 * Publishing and forgetting stay this runner's own: only the agents it hosts publish here.
 */
import { Cause, Deferred, Effect, Layer, Stream } from "effect"
import type { Sharding } from "effect/cluster"
import type { NumberedEvent } from "../../domain/agentEvent.ts"
import { AgentEvents } from "../../services/AgentEvents.ts"
import { AgentEntity } from "./AgentEntity.ts"
import { routed } from "./agentOperations.ts"

/** How long a reader waits before following an agent whose host's stream ended, on to its next host. */
const refollowPause = "500 millis"

/** `AgentEvents` of a runner: this runner's for publishing, each agent's host's for reading. */
export const layer: Layer.Layer<AgentEvents, never, Sharding.Sharding | AgentEvents> = Layer.effect(
  AgentEvents,
  Effect.gen(function*() {
    const local = yield* AgentEvents
    const clientFor = yield* AgentEntity.client
    /** Done when this runner starts to stop: the streams read through the entity end then too. */
    const stopped = Deferred.makeUnsafe<void>()

    /** The host's events after `after`; when the host's stream ends, on from the last id read, wherever the agent is then. */
    const followFrom = (agentId: string, after: string): Stream.Stream<NumberedEvent> =>
      Stream.suspend(() => {
        let last = after
        let routingFailed = false
        return clientFor(agentId).Follow({ after }).pipe(
          Stream.tap((numbered) => Effect.sync(() => void (last = numbered.id))),
          // Interrupted, or ended: the entity ended on its host (a stop, a move). Anything else is
          // the cluster failing to route the request: the reader's stream ends, and it reconnects.
          Stream.catchCause((cause) => {
            if (Cause.hasInterruptsOnly(cause)) return Stream.empty
            routingFailed = true
            return Stream.fromEffect(
              Effect.logWarning("Following an agent's events on its runner failed; ending the reader's stream", cause).pipe(
                Effect.annotateLogs({ agentId })
              )
            ).pipe(Stream.drain)
          }),
          Stream.concat(Stream.suspend(() =>
            routingFailed
              ? Stream.empty
              : Stream.fromEffect(Effect.sleep(refollowPause)).pipe(Stream.drain, Stream.concat(followFrom(agentId, last)))
          ))
        )
      })

    const latestOf = (agentId: string) => routed(agentId, "LatestEvent")(clientFor(agentId).LatestEvent())

    return AgentEvents.of({
      publish: local.publish,
      forget: local.forget,
      latest: local.latest,
      latestOf,
      // The daemon-wide stream is this runner's: the agents it hosts.
      followEveryAgent: local.followEveryAgent,
      endStreams: Effect.andThen(local.endStreams, Deferred.succeed(stopped, undefined)),
      follow: (agentId, after) =>
        Effect.gen(function*() {
          // The host's position now, before the reader is answered: nothing it publishes after this is missed.
          const start = after ?? (yield* latestOf(agentId))
          return followFrom(agentId, start).pipe(Stream.interruptWhen(Deferred.await(stopped)))
        })
    })
  })
)
