/**
 * The wire form of `GET /v1/agents/{id}/events` and `GET /v1/events` (server-sent events): how the daemon frames each
 * event, and how a client (the CLI) reads the frames back, decoded against the event schema.
 */
import { Schema } from "effect"
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

/** A comment line: ignored by readers, it keeps the connection from looking idle. */
export const sseComment = (text: string): string => `: ${text}\n\n`

/** The id a `Last-Event-ID` names, trimmed; none when empty (an id the daemon did not issue reads as a gap). */
export const lastEventIdOf = (header: string | undefined): string | undefined => {
  const id = header?.trim()
  return id === undefined || id === "" ? undefined : id
}

const decodeEvent = Schema.decodeUnknownOption(Schema.fromJsonString(StreamedEvent))
const decodeAgentId = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Struct({ agentId: Schema.String })))

/**
 * Reads server-sent event frames from text as it arrives: `push` a chunk, get the whole events it
 * completed, each with its agent's id when the frame names one (comments skipped; a frame whose data
 * does not decode is skipped too, and counted).
 */
export const makeSseReader = () => {
  let buffer = ""
  let undecodable = 0
  return {
    push: (chunk: string): ReadonlyArray<NumberedEvent> => {
      buffer += chunk.replace(/\r\n/g, "\n")
      const out: Array<NumberedEvent> = []
      let end = buffer.indexOf("\n\n")
      while (end >= 0) {
        const frame = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        end = buffer.indexOf("\n\n")
        let id: string | undefined
        const data: Array<string> = []
        for (const line of frame.split("\n")) {
          if (line.startsWith("id:")) id = line.slice(3).trim()
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""))
        }
        if (id === undefined || data.length === 0) continue
        const json = data.join("\n")
        const event = decodeEvent(json)
        if (event._tag === "None") {
          undecodable++
          continue
        }
        // On the daemon-wide stream the event names its agent.
        const named = decodeAgentId(json)
        out.push(named._tag === "Some" ? { id, event: event.value, agentId: named.value.agentId } : { id, event: event.value })
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
