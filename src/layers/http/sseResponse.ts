/** How a server-sent event stream is answered, by the daemon and by the hub's relay alike. */
import type { Stream } from "effect"
import { HttpServerResponse } from "effect/http"

/** `body` as `text/event-stream`, never cached, and not buffered by a proxy in front (`x-accel-buffering`). */
export const sseResponse = <E>(body: Stream.Stream<Uint8Array, E>) =>
  HttpServerResponse.stream(body, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
  })
