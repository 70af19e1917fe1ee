/** A reader of an agent's live events (`GET /v1/agents/{id}/events`) over fetch, as a browser or the CLI reads them. */
import { makeSseReader } from "../../src/api/eventStream.ts"
import type { NumberedEvent } from "../../src/domain/agentEvent.ts"
import { type Daemon, until } from "./daemonProcess.ts"

/** An event as the reader saw it, with when (epoch ms). */
export interface SeenEvent extends NumberedEvent {
  readonly at: number
}

/** Follows the agent's events on `daemon` (after `lastEventId`, sent as `Last-Event-ID`): what it saw, until closed or the daemon ends the stream. */
export const followEvents = (daemon: Daemon, agentId: string, lastEventId?: string) =>
  followEventsAt(daemon, `/v1/agents/${agentId}/events`, lastEventId)

/** Follows a stream of events on `daemon` at `path` (one agent's, or the daemon-wide `/v1/events`), as `followEvents` does. */
export const followEventsAt = (daemon: Daemon, path: string, lastEventId?: string) => {
  const controller = new AbortController()
  const seen: Array<SeenEvent> = []
  let status: number | undefined
  let contentType: string | null = null
  let ended = false
  let failure: unknown
  const reading = (async () => {
    const response = await fetch(`http://127.0.0.1:${daemon.port}${path}`, {
      headers: { authorization: `Bearer ${daemon.token()}`, ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }) },
      signal: controller.signal
    })
    status = response.status
    contentType = response.headers.get("content-type")
    if (response.body === null || status !== 200) return
    const reader = makeSseReader()
    const decoder = new TextDecoder()
    const body = response.body.getReader()
    for (;;) {
      const { done, value } = await body.read()
      if (done) break
      for (const event of reader.push(decoder.decode(value, { stream: true }))) seen.push({ ...event, at: Date.now() })
    }
  })().catch((error: unknown) => (failure = error)).finally(() => (ended = true))
  return {
    seen,
    connected: () => until(() => status !== undefined, "the event stream answers"),
    status: () => status,
    contentType: () => contentType,
    ended: () => ended,
    /** Why the stream broke (a reset connection, an abort), when it did not end in order. */
    failure: () => failure,
    reading,
    close: () => controller.abort()
  }
}
