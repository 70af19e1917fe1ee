import { Context, type Effect, type Stream } from "effect"
import type { AgentEvent, NumberedEvent } from "../domain/agentEvent.ts"
import type { ClusterUnavailable } from "../domain/errors.ts"

/**
 * Each agent's live events (turns as they run, residency as it changes) in a bounded window, and
 * readers that follow them (`GET /v1/agents/{id}/events`). Publishing is cheap and never waits;
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
   * The id of the latest event issued here (for any agent): following after it misses nothing
   * published from now on. What `follow` starts from without `after`, for a reader that must take
   * its position before it starts reading (on a cluster, on the runner that hosts the agent).
   */
  readonly latest: Effect.Effect<string>
  /** The agent is deleted: its window is dropped. */
  readonly forget: (agentId: string) => Effect.Effect<void>
  /**
   * The daemon is stopping: every reader's stream ends now, and a later follow ends at once, so no
   * open stream holds the listener's close. (Closing the layer does the same.)
   */
  readonly endStreams: Effect.Effect<void>
}>()("quiesce/events/AgentEvents") {}
