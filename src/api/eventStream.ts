/**
 * The wire form of `GET /v1/agents/{id}/events` (server-sent events): how the daemon frames each
 * event, and how a client (the CLI) reads the frames back, decoded against the event schema.
 */
import { Schema } from "effect"
import { type NumberedEvent, StreamedEvent } from "../domain/agentEvent.ts"

/** How often the daemon sends a comment line on an open stream, so proxies keep it open. */
export const heartbeatSeconds = 15

/** One event as a server-sent event: `id:`, `event:` (its tag) and `data:` (its JSON, one line). */
export const sseFrame = (numbered: NumberedEvent): string =>
  `id: ${numbered.id}\nevent: ${numbered.event._tag}\ndata: ${JSON.stringify(numbered.event)}\n\n`

/** A comment line: ignored by readers, it keeps the connection from looking idle. */
export const sseComment = (text: string): string => `: ${text}\n\n`

/** The position a `Last-Event-ID` names; an id that is not a whole number reads as 0 (before everything, so a gap). */
export const lastEventIdOf = (header: string | undefined): number | undefined => {
  if (header === undefined || header.trim() === "") return undefined
  const id = Number(header.trim())
  return Number.isSafeInteger(id) && id >= 0 ? id : 0
}

const decodeEvent = Schema.decodeUnknownOption(Schema.fromJsonString(StreamedEvent))

/**
 * Reads server-sent event frames from text as it arrives: `push` a chunk, get the whole events it
 * completed (comments skipped; a frame whose data does not decode is skipped too, and counted).
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
        let id: number | undefined
        const data: Array<string> = []
        for (const line of frame.split("\n")) {
          if (line.startsWith("id:")) id = Number(line.slice(3).trim())
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""))
        }
        if (id === undefined || data.length === 0) continue
        const event = decodeEvent(data.join("\n"))
        if (event._tag === "Some") out.push({ id, event: event.value })
        else undecodable++
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
