/**
 * The wire form of `GET /v1/agents/{id}/events` and `GET /v1/events` (server-sent events): how the daemon frames each
 * event, and how a client (the CLI) reads the frames back, decoded against the event schema.
 */
import { Predicate, Schema } from "effect"
import { type NumberedEvent, StreamedEvent } from "../domain/agentEvent.ts"

/** How often the daemon sends a comment line on an open stream, so proxies keep it open. */
export const heartbeatSeconds = 15

/**
 * One event as a server-sent event: `id:`, `event:` (its tag) and `data:` (its JSON, one line; on
 * the daemon-wide stream with its agent's id, `agentId`, first).
 */
export const sseFrame = (numbered: NumberedEvent): string =>
  `id: ${numbered.id}\nevent: ${numbered.event._tag}\ndata: ${
    JSON.stringify(numbered.agentId === undefined ? numbered.event : { agentId: numbered.agentId, ...numbered.event })
  }\n\n`

/**
 * A frame with only an id: where the stream begins (the id it reads after). A reader keeps it as its
 * last id (browsers' EventSource do), so one that read no event before it reconnects still resumes
 * from there rather than from the latest.
 */
export const ssePosition = (id: string): string => `id: ${id}\n\n`

/**
 * A `Last-Event-ID` no daemon issues (ids are `<epoch>-<n>`): it asks for every event the daemon
 * kept, after a `gap` naming it. The hub sends it to a new daemon for a reader that had read nothing
 * yet, and a client seeing a gap after it knows it missed nothing it asked for.
 */
export const fromFirstKept = "0"

/** A comment line: ignored by readers, it keeps the connection from looking idle. */
export const sseComment = (text: string): string => `: ${text}\n\n`

/** The id a `Last-Event-ID` names, trimmed; none when empty (an id the daemon did not issue reads as a gap). */
export const lastEventIdOf = (header: string | undefined): string | undefined => {
  const id = header?.trim()
  return id === undefined || id === "" ? undefined : id
}

const parseJson = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Unknown))
const decodeEvent = Schema.decodeUnknownOption(StreamedEvent)

/** The event a frame's `data:` lines carry, with its agent's id when it names one (the daemon-wide stream); none when it does not decode. */
const eventOf = (id: string, data: string): NumberedEvent | undefined => {
  const json = parseJson(data)
  if (json._tag === "None") return undefined
  const event = decodeEvent(json.value)
  if (event._tag === "None") return undefined
  const agentId = Predicate.hasProperty(json.value, "agentId") ? json.value.agentId : undefined
  return typeof agentId === "string" ? { id, event: event.value, agentId } : { id, event: event.value }
}

/**
 * Reads server-sent event frames from text as it arrives (`makeSseFrames`): `push` a chunk, get the
 * whole events it completed, each with its agent's id when the frame names one (comments and
 * frames without an id or data skipped; a frame whose data does not decode is skipped too, and
 * counted).
 */
export const makeSseReader = () => {
  const frames = makeSseFrames()
  let undecodable = 0
  return {
    push: (chunk: string): ReadonlyArray<NumberedEvent> => {
      const out: Array<NumberedEvent> = []
      for (const frame of frames(chunk)) {
        const data = frame.text.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).replace(/^ /, ""))
        if (frame.id === undefined || data.length === 0) continue
        const event = eventOf(frame.id, data.join("\n"))
        if (event === undefined) undecodable++
        else out.push(event)
      }
      return out
    },
    /** How many frames did not decode as events. */
    undecodable: () => undecodable
  }
}

/** One frame of a server-sent event stream as it came: its lines (without the blank line ending it), and its `id:` if it has one. */
export interface SseFrame {
  readonly text: string
  readonly id: string | undefined
}

/**
 * Splits server-sent event text as it arrives into whole frames: `push` a chunk, get the frames it
 * completed. Lines may end in `\n`, `\r\n` or `\r`; a `\r` ending a chunk ends its line, and a
 * `\n` beginning the next is its pair. Whatever the chunks, the frames are the same.
 */
export const makeSseFrames = () => {
  let buffer = ""
  let afterCarriageReturn = false
  return (chunk: string): ReadonlyArray<SseFrame> => {
    const text = afterCarriageReturn && chunk.startsWith("\n") ? chunk.slice(1) : chunk
    if (chunk !== "") afterCarriageReturn = chunk.endsWith("\r")
    const lines = buffer + text.replace(/\r\n?/g, "\n")
    const out: Array<SseFrame> = []
    let start = 0
    let end = lines.indexOf("\n\n")
    while (end >= 0) {
      const frame = lines.slice(start, end)
      start = end + 2
      end = lines.indexOf("\n\n", start)
      let id: string | undefined
      for (const line of frame.split("\n")) {
        if (line.startsWith("id:")) id = line.slice(3).replace(/^ /, "")
      }
      if (frame !== "") out.push({ text: frame, id })
    }
    buffer = lines.slice(start)
    return out
  }
}
