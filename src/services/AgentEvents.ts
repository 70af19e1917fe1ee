import { Context, type Effect, type Stream } from "effect"
import type { AgentEvent, NumberedEvent } from "../domain/agentEvent.ts"
import type { ClusterUnavailable } from "../domain/errors.ts"

/**
 * Each agent's live events (turns as they run, residency as it changes) in a bounded window, and
 * readers that follow them (`GET /v1/agents/{id}/events`, or every agent's: `GET /v1/events`). Publishing is cheap and never waits;
 * reading never counts as the daemon's activity, and every reader's stream ends when the daemon
 * stops.
 */
export class AgentEvents extends Context.Service<AgentEvents, {
  /** Publishes an event of the agent at `now` (epoch ms); synchronous and cheap, for any owner's hot path. */
  readonly publish: (agentId: string, event: AgentEvent, now: number) => void
  /**
   * Follows the agent's events after `after` (the id a reader last read, `Last-Event-ID`), or
   * after the latest issued when undefined. The position is taken when this effect runs, so
   * nothing published after that is missed; a reader that fell out of the window, or whose id
   * another process issued, reads a `gap` (with the id one before where it resumes) and continues
   * from the oldest kept. The stream ends when the daemon stops. On a cluster's runner it reads
   * from the runner that hosts the agent, and fails `ClusterUnavailable` when that cannot be reached.
   */
  readonly follow: (agentId: string, after: string | undefined) => Effect.Effect<Stream.Stream<NumberedEvent>, ClusterUnavailable>
  /**
   * The id of the latest event this process issued (for any agent): following after it misses
   * nothing published here from now on.
   */
  readonly latest: Effect.Effect<string>
  /**
   * `latest` where the agent's events are published: this process on a lone daemon, the runner
   * that hosts the agent on a cluster. Where a reader of the agent that starts now begins, taken
   * before it is answered (the stream's first frame names it).
   */
  readonly latestOf: (agentId: string) => Effect.Effect<string, ClusterUnavailable>
  /**
   * Follows every agent's events after `after` (`Last-Event-ID`), or after the latest issued when
   * undefined, as `follow` does one agent's (`GET /v1/events`): each event names its agent
   * (`agentId`), and the daemon-wide window has the same bounds as an agent's. On a cluster's
   * runner: the agents it hosts.
   */
  readonly followEveryAgent: (after: string | undefined) => Effect.Effect<Stream.Stream<NumberedEvent>>
  /** The agent is deleted: its window is dropped. */
  readonly forget: (agentId: string) => Effect.Effect<void>
  /**
   * The daemon is stopping: every reader's stream ends now, and a later follow ends at once, so no
   * open stream holds the listener's close. (Closing the layer does the same.)
   */
  readonly endStreams: Effect.Effect<void>
}>()("quiesce/events/AgentEvents") {}
