/**
 * The server's event stream, `GET /event?directory=D` (server-sent events, one JSON object per
 * `data:` block). The first event of a connection is `server.connected`.
 */
import { Effect, Schema } from "effect"
import { EventEnvelope } from "./apiTypes.ts"
import { BadAnswer, describeCause, type Endpoint, openRequest } from "./http.ts"

/** One read from the stream: the events it completed, and blocks that did not decode. */
export interface EventBatch {
  readonly events: ReadonlyArray<EventEnvelope>
  readonly malformed: ReadonlyArray<string>
}

export interface EventStream {
  /** The next batch; `undefined` once the stream has ended. */
  readonly next: Effect.Effect<EventBatch | undefined, BadAnswer>
  /** Ends the connection. */
  readonly abort: () => void
}

const decodeEnvelope = Schema.decodeUnknownOption(EventEnvelope)

/** Splits SSE text into complete blocks' data payloads; returns them and the unfinished rest. */
export const splitEvents = (buffer: string): { readonly data: ReadonlyArray<string>; readonly rest: string } => {
  const blocks = buffer.replace(/\r\n/g, "\n").split("\n\n")
  const rest = blocks.pop() ?? ""
  const data = blocks.flatMap((block) => {
    const lines = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart())
    return lines.length === 0 ? [] : [lines.join("\n")]
  })
  return { data, rest }
}

const parse = (payload: string): EventEnvelope | undefined => {
  try {
    const value: unknown = JSON.parse(payload)
    const decoded = decodeEnvelope(value)
    return decoded._tag === "Some" ? decoded.value : undefined
  } catch {
    return undefined
  }
}

/** Connects to the stream; fails unless the server answers `200 text/event-stream`. */
export const openEventStream = (endpoint: Endpoint, directory: string): Effect.Effect<EventStream, BadAnswer> =>
  Effect.callback<EventStream, BadAnswer>((resume) => {
    const where = `GET /event?directory=${directory}`
    const transport = (cause: unknown) => new BadAnswer({ kind: "transport", message: `${where}: ${describeCause(cause)}` })
    let connected = false
    /** Chunks (or the end, or a failure) not yet taken by `next`, and a reader waiting for one. */
    const pending: Array<{ readonly chunk: string } | { readonly end: true } | { readonly error: BadAnswer }> = []
    let waiting: ((item: (typeof pending)[number]) => void) | undefined
    const push = (item: (typeof pending)[number]) => {
      const reader = waiting
      waiting = undefined
      if (reader !== undefined) reader(item)
      else pending.push(item)
    }
    const req = openRequest(endpoint, { method: "GET", path: "event", query: { directory }, accept: "text/event-stream" }, (response) => {
      const contentType = response.headers["content-type"] ?? ""
      if (response.statusCode !== 200 || !contentType.startsWith("text/event-stream")) {
        response.resume()
        req.destroy()
        resume(Effect.fail(
          new BadAnswer({
            kind: contentType.startsWith("text/html") ? "html" : "content-type",
            message: `${where}: status ${response.statusCode}, content type ${contentType || "(none)"}`
          })
        ))
        return
      }
      connected = true
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => push({ chunk }))
      response.on("end", () => push({ end: true }))
      response.on("error", (cause) => push({ error: transport(cause) }))
      // A destroyed connection may close without `end`: the reader must still learn it is over.
      response.on("close", () => push({ end: true }))
      resume(Effect.succeed({ next, abort: () => req.destroy() }))
    }, (cause) => {
      if (connected) push({ error: transport(cause) })
      else resume(Effect.fail(transport(cause)))
    })
    let buffer = ""
    const take = Effect.callback<(typeof pending)[number]>((resumeTake) => {
      const item = pending.shift()
      if (item !== undefined) return resumeTake(Effect.succeed(item))
      waiting = (next) => resumeTake(Effect.succeed(next))
      return Effect.sync(() => {
        waiting = undefined
      })
    })
    const next: Effect.Effect<EventBatch | undefined, BadAnswer> = Effect.flatMap(take, (item) => {
      if ("error" in item) return Effect.fail(item.error)
      if ("end" in item) return Effect.succeed(undefined)
      const { data, rest } = splitEvents(buffer + item.chunk)
      buffer = rest
      const events: Array<EventEnvelope> = []
      const malformed: Array<string> = []
      for (const payload of data) {
        const event = parse(payload)
        if (event === undefined) malformed.push(payload.slice(0, 200))
        else events.push(event)
      }
      return Effect.succeed({ events, malformed })
    })
    return Effect.sync(() => req.destroy())
  })
