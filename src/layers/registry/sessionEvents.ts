/**
 * The runtimes' session events (permissions, subagents, replies, activity): one consumer applies
 * every session's events in order, and each runtime counts its own until they are processed, so
 * that a lifecycle operation can wait for them (`drain`) before it reads the runtime's state.
 */
import { Clock, Deferred, Effect, Queue, type Scope } from "effect"
import type { AgentEvent } from "../../domain/agentEvent.ts"
import type { SessionEvent } from "../../domain/provider.ts"
import type { Finishes } from "./finishes.ts"
import type { LiveAgent } from "./LiveAgent.ts"

interface QueuedEvent {
  readonly agent: LiveAgent
  readonly event: SessionEvent
}

/** The events of every live runtime. */
export interface SessionEvents {
  /** Queues an event the runtime reported; it counts as pending until applied. */
  readonly enqueue: (agent: LiveAgent, event: SessionEvent) => void
  /** Waits until every event the runtime reported so far is applied. */
  readonly drain: (agent: LiveAgent) => Effect.Effect<void>
  /** Answers whoever waits for the runtime's events: it is gone, and will not report them. */
  readonly settle: (agent: LiveAgent) => void
}

const settleWaiters = (waiters: Array<Deferred.Deferred<void>> | undefined) => {
  if (waiters !== undefined) for (const waiter of waiters) Deferred.doneUnsafe(waiter, Effect.void)
}

/**
 * The events' consumer, in the scope; `touch` notes each event as the runtime's activity, and
 * `publish` shows the agent's live event stream its output and permission requests.
 */
export const makeSessionEvents = Effect.fnUntraced(function*(
  finishes: Finishes,
  touch: (agent: LiveAgent, now: number) => void,
  publish: (agentId: string, event: AgentEvent, now: number) => void
): Effect.fn.Return<SessionEvents, never, Scope.Scope> {
  const events = yield* Queue.unbounded<QueuedEvent>()

  const applyEvent = (agent: LiveAgent, event: SessionEvent, now: number) => {
    switch (event._tag) {
      case "PermissionRequested":
        ;(agent.permissions ??= new Set()).add(event.id)
        finishes.announce(agent.agentId, "needs-permission")
        publish(agent.agentId, { _tag: "permission-asked", permissionId: event.id }, now)
        break
      case "PermissionResolved":
        agent.permissions?.delete(event.id)
        publish(agent.agentId, { _tag: "permission-resolved", permissionId: event.id }, now)
        break
      case "SubagentStarted":
        ;(agent.subagents ??= new Set()).add(event.id)
        break
      case "SubagentFinished":
        agent.subagents?.delete(event.id)
        break
      case "Activity":
        break
      case "Output":
        // The turn it belongs to is the running one: a turn's end is recorded only after its events are applied.
        publish(agent.agentId, { _tag: "output", turnId: agent.slot.turn?.turnId ?? null, text: event.text }, now)
        break
      case "Reply":
        finishes.noteReply(agent.agentId, event.text)
        break
    }
    touch(agent, now)
  }

  // One consumer for every session's events; each agent counts its own until processed.
  yield* Effect.forever(
    Effect.gen(function*() {
      const { agent, event } = yield* Queue.take(events)
      applyEvent(agent, event, yield* Clock.currentTimeMillis)
      if (--agent.pendingEvents === 0) {
        const waiters = agent.drainWaiters
        agent.drainWaiters = undefined
        settleWaiters(waiters)
      }
    })
  ).pipe(Effect.forkScoped)

  return {
    enqueue: (agent, event) => {
      agent.pendingEvents++
      Queue.offerUnsafe(events, { agent, event })
    },
    drain: (agent) =>
      Effect.suspend(() => {
        if (agent.pendingEvents === 0) return Effect.void
        const waiter = Deferred.makeUnsafe<void>()
        ;(agent.drainWaiters ??= []).push(waiter)
        return Deferred.await(waiter)
      }),
    settle: (agent) => settleWaiters(agent.drainWaiters)
  }
})
