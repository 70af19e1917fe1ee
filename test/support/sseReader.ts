/**
 * A reader of an agent's live events over real HTTP (fetch), as a browser's EventSource or the CLI
 * reads them: what it saw (with when), until it is closed or the server ends the stream. For the
 * daemon's `GET /v1/agents/{id}/events` and the hub's relay of it.
 */
import { makeSseReader } from "../../src/api/eventStream.ts"
import type { NumberedEvent } from "../../src/domain/agentEvent.ts"
import { until } from "./daemonProcess.ts"

/** An event as a reader saw it, and when (epoch ms). */
export interface Seen extends NumberedEvent {
  readonly at: number
}

/** Reads the stream at `url` with `token` (and `Last-Event-ID` when given), in the background. */
export const readEvents = (url: string, token: string, lastEventId?: number | string) => {
  const controller = new AbortController()
  const seen: Array<Seen> = []
  let status: number | undefined
  let contentType: string | null = null
  let body = ""
  let raw = ""
  let ended = false
  let failure: unknown
  const reading = (async () => {
    const response = await fetch(url, {
      headers: { authorization: `Bearer ${token}`, ...(lastEventId === undefined ? {} : { "last-event-id": String(lastEventId) }) },
      signal: controller.signal
    })
    status = response.status
    contentType = response.headers.get("content-type")
    if (response.body === null) return
    if (status !== 200) {
      body = await response.text()
      return
    }
    const reader = makeSseReader()
    const decoder = new TextDecoder()
    const chunks = response.body.getReader()
    for (;;) {
      const { done, value } = await chunks.read()
      if (done) break
      const text = decoder.decode(value, { stream: true })
      raw += text
      for (const event of reader.push(text)) seen.push({ ...event, at: Date.now() })
    }
  })().catch((error: unknown) => (failure = error)).finally(() => (ended = true))
  return {
    seen,
    connected: () => until(() => status !== undefined, "the event stream answers"),
    status: () => status,
    contentType: () => contentType,
    /** The body of an answer that was not a stream (a problem). */
    body: () => body,
    /** Everything the stream brought, as text (frames without an id and comments too). */
    raw: () => raw,
    ended: () => ended,
    /** Why the stream broke (a reset connection, an abort), when it did not end in order. */
    failure: () => failure,
    reading,
    close: () => controller.abort()
  }
}

/** The end of the turn among what a reader saw. */
export const endedTurn = (seen: ReadonlyArray<Seen>, turnId: string) =>
  seen.find((e) => e.event._tag === "turn-ended" && e.event.turnId === turnId)
