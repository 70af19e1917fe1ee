import { Context, type Effect, type Stream } from "effect"
import type { AgentEvent, NumberedEvent } from "../domain/agentEvent.ts"

/**
 * Each agent's live events (turns as they run, residency as it changes) in a bounded window, and
 * readers that follow them (`GET /v1/agents/{id}/events`, or every agent's: `GET /v1/events`). Publishing is cheap and never waits;
 * reading never counts as the daemon's activity, and every reader's stream ends when the daemon
 * stops.
 */
export class AgentEvents extends Context.Service<AgentEvents, {
  /** Publishes an event of the agent at `now` (epoch ms); synchronous and cheap, for any owner's hot path. */
  readonly publish: (agentId: string, event: AgentEvent, now: number) => void
  /** The last id issued (for any agent): a reader that starts from now reads what comes after it. */
  readonly latest: () => number
  /**
   * Follows the agent's events after `after` (the id a reader last read, `Last-Event-ID`), or
   * after the latest issued when undefined. The position is taken when this effect runs, so
   * nothing published after that is missed; a reader that fell out of the window reads a `gap`
   * (numbered one before where it resumes) and continues from the oldest kept. The stream ends
   * when the daemon stops.
   */
  readonly follow: (agentId: string, after: number | undefined) => Effect.Effect<Stream.Stream<NumberedEvent>>
  /**
   * Follows every agent's events after `after` (`Last-Event-ID`), or after the latest issued when
   * undefined, as `follow` does one agent's (`GET /v1/events`): each event names its agent
   * (`agentId`), and the daemon-wide window has the same bounds as an agent's.
   */
  readonly followEveryAgent: (after: number | undefined) => Effect.Effect<Stream.Stream<NumberedEvent>>
  /** The agent is deleted: its window is dropped. */
  readonly forget: (agentId: string) => Effect.Effect<void>
}>()("quiesce/events/AgentEvents") {}
