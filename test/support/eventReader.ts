/** A reader of a daemon's live events (`GET /v1/agents/{id}/events`, `GET /v1/events`) over fetch, as a browser or the CLI reads them. */
import type { Daemon } from "./daemonProcess.ts"
import { readEvents } from "./sseReader.ts"

export { endedTurn, type Seen } from "./sseReader.ts"

/** Follows the agent's events on `daemon` (after `lastEventId`, sent as `Last-Event-ID`): what it saw, until closed or the daemon ends the stream. */
export const followEvents = (daemon: Daemon, agentId: string, lastEventId?: string) =>
  followEventsAt(daemon, `/v1/agents/${agentId}/events`, lastEventId)

/** Follows a stream of events on `daemon` at `path` (one agent's, or the daemon-wide `/v1/events`), as `followEvents` does. */
export const followEventsAt = (daemon: Daemon, path: string, lastEventId?: string) =>
  readEvents(`http://127.0.0.1:${daemon.port}${path}`, daemon.token(), lastEventId)
