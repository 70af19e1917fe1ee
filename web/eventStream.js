// @ts-check
// Follows a daemon's live events (server-sent events, docs/daemon.md "Live events") while the page
// is visible. It reads them with fetch rather than EventSource, which cannot send the session's key
// header (the cookie alone is refused). A hidden page closes its stream; shown again, it reconnects
// with `Last-Event-ID` set to the last id it read, so it misses nothing inside the daemon's window.
import { isRecord, isSignedOut, sessionHeaders, showSignedOut } from "./common.js"

/**
 * One event: its id, its type (the `event:` line, the event's tag) and its data as JSON.
 * @typedef {{ id: string, type: string, data: Record<string, unknown> }} StreamEvent
 */

/**
 * Why a stream is not open: `unavailable` (the server has no such stream, e.g. a hub that does not
 * relay it yet), `lost` (it ended or broke: a daemon that stopped), `hidden` (the page closed it).
 * @typedef {"unavailable" | "lost" | "hidden"} ClosedReason
 */

/**
 * @typedef {{
 *   onOpen: () => void,
 *   onEvent: (event: StreamEvent) => void,
 *   onClosed: (reason: ClosedReason) => void
 * }} StreamHandlers
 */

/** How long before asking again for a stream the server did not have. */
const unavailableRetryMillis = 30_000

/** The first and the longest wait before reconnecting a stream that broke (doubling in between). */
const lostRetryMillis = { first: 1_000, most: 30_000 }

/**
 * Splits server-sent event text into frames as it arrives: `push` a chunk, get the frames it
 * completed, each with its id and its event (null for a frame with only an id: the daemon's
 * position at the start of a stream; comment lines are skipped, and data that are not JSON).
 */
const sseParser = () => {
  let buffer = ""
  return {
    /**
     * @param {string} chunk
     * @returns {{ id: string, event: StreamEvent | null }[]}
     */
    push: (chunk) => {
      buffer += chunk.replace(/\r\n?/g, "\n")
      /** @type {{ id: string, event: StreamEvent | null }[]} */
      const frames = []
      let end = buffer.indexOf("\n\n")
      while (end >= 0) {
        const frame = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        end = buffer.indexOf("\n\n")
        let id = ""
        let type = "message"
        /** @type {string[]} */
        const data = []
        for (const line of frame.split("\n")) {
          const colon = line.indexOf(":")
          if (colon === 0) continue
          const field = colon < 0 ? line : line.slice(0, colon)
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "")
          if (field === "id") id = value
          else if (field === "event") type = value
          else if (field === "data") data.push(value)
        }
        if (data.length === 0) {
          if (id !== "") frames.push({ id, event: null })
          continue
        }
        try {
          const parsed = JSON.parse(data.join("\n"))
          if (isRecord(parsed)) frames.push({ id, event: { id, type, data: parsed } })
        } catch {
          // Not an event of the daemon's: skipped.
        }
      }
      return frames
    }
  }
}

/**
 * Follows the events at `url` while the page is visible: one stream at a time, reconnected with
 * the last id read after it broke (after 1 s, then longer, up to 30 s) or after the page was shown
 * again; a server without the stream is asked again every 30 s. A session that ended stops it.
 * @param {string} url
 * @param {StreamHandlers} handlers
 */
export const followWhileVisible = (url, handlers) => {
  /** @type {AbortController | undefined} */
  let open
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retry
  /** @type {string | undefined} */
  let lastId
  let lostWait = lostRetryMillis.first
  let stopped = false
  /** The open stream was answered: events come (not just asked for). */
  let following = false

  const cancelRetry = () => {
    if (retry !== undefined) clearTimeout(retry)
    retry = undefined
  }

  /**
   * @param {number} millis
   */
  const retryIn = (millis) => {
    cancelRetry()
    if (!stopped && document.visibilityState === "visible") retry = setTimeout(() => void connect(), millis)
  }

  /**
   * The stream `controller` opened ended (unless the page closed it itself).
   * @param {AbortController} controller
   * @param {"unavailable" | "lost"} reason
   */
  const ended = (controller, reason) => {
    if (open !== controller) return
    open = undefined
    following = false
    handlers.onClosed(reason)
    if (reason === "unavailable") retryIn(unavailableRetryMillis)
    else {
      retryIn(lostWait)
      lostWait = Math.min(lostWait * 2, lostRetryMillis.most)
    }
  }

  const connect = async () => {
    cancelRetry()
    if (open !== undefined || stopped || isSignedOut() || document.visibilityState !== "visible") return
    const controller = new AbortController()
    open = controller
    const headers = { ...sessionHeaders(), accept: "text/event-stream", ...(lastId === undefined ? {} : { "last-event-id": lastId }) }
    /** @type {Response} */
    let response
    try {
      response = await fetch(url, { headers, credentials: "same-origin", cache: "no-store", signal: controller.signal })
    } catch {
      return ended(controller, "lost")
    }
    const body = response.body
    if (!response.ok || body === null || !(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      void body?.cancel().catch(() => undefined)
      if (response.status === 401) {
        stopped = true
        showSignedOut()
      }
      return ended(controller, "unavailable")
    }
    if (open !== controller) return
    lostWait = lostRetryMillis.first
    following = true
    handlers.onOpen()
    const parser = sseParser()
    const decoder = new TextDecoder()
    const reader = body.getReader()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done || open !== controller) break
        // The session ended (the page's other reads were refused): the page stops, this stream too.
        if (isSignedOut()) {
          controller.abort()
          break
        }
        for (const frame of parser.push(decoder.decode(value, { stream: true }))) {
          if (frame.id !== "") lastId = frame.id
          if (frame.event !== null) handlers.onEvent(frame.event)
        }
      }
    } catch {
      // Broken off (the daemon stopped, or the page closed it): reconnected below unless closed on purpose.
    }
    ended(controller, "lost")
  }

  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") {
      void connect()
      return
    }
    cancelRetry()
    const controller = open
    if (controller === undefined) return
    open = undefined
    following = false
    controller.abort()
    handlers.onClosed("hidden")
  })
  void connect()
  return {
    /** Whether a stream is open now and answered (its events come). */
    isOpen: () => following
  }
}
