import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Option, Schema } from "effect"
import { isDeepStrictEqual } from "node:util"
import { makeSseFrames, makeSseReader, sseComment } from "../../../src/api/eventStream.ts"
import { StreamedEvent } from "../../../src/domain/agentEvent.ts"
import { makeFrameReader } from "../../../src/layers/hub/relay.ts"

const decodeJson = Schema.decodeUnknownOption(Schema.fromJsonString(StreamedEvent))

/** An event JSON carries as it is (a daemon never sends an infinite number, which JSON cannot). */
const sentAsJson = (event: StreamedEvent) => isDeepStrictEqual(Option.getOrUndefined(decodeJson(JSON.stringify(event))), event)

/** Events as a daemon sends them; an output's text has characters of several bytes, so a split can fall inside one. */
const Events = Arbitrary.map(
  Arbitrary.array(Arbitrary.filter(Arbitrary.schema(StreamedEvent), sentAsJson), { maxLength: 12 }),
  (events) => events.map((event) => event._tag === "output" ? { ...event, text: `${event.text}é🙂\n` } : event)
)
const Splits = Arbitrary.array(Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 100_000 }))), { maxLength: 30 })
const LineEnding = Arbitrary.schema(Schema.Literals(["\n", "\r\n", "\r"]))

/** The daemon's bytes: each event a frame, a heartbeat comment after every third, lines ended as given. */
const daemonText = (events: ReadonlyArray<StreamedEvent>, ending: string) =>
  events.map((event, i) => `id: ${1_000 + i}\nevent: ${event._tag}\ndata: ${JSON.stringify(event)}\n\n` + (i % 3 === 2 ? sseComment("heartbeat") : ""))
    .join("")
    .replace(/\n/g, ending)

/** `bytes` cut at the given offsets (any, repeated, past the end). */
const cut = (bytes: Uint8Array, splits: ReadonlyArray<number>) => {
  const at = [...new Set(splits.map((s) => s % (bytes.length + 1)))].sort((a, b) => a - b)
  return [0, ...at].map((start, i) => bytes.subarray(start, at[i] ?? bytes.length))
}

describe("the relay's framing of a daemon's event stream", () => {
  it.prop("any split of the daemon's bytes gives the same frames, and they read back as the events sent", [Events, Splits, LineEnding], ([events, splits, ending]) => {
    const bytes = new TextEncoder().encode(daemonText(events, ending))
    const whole = makeFrameReader()(bytes)
    const read = makeFrameReader()
    const pieces = cut(bytes, splits).flatMap((piece) => read(piece))
    expect(pieces).toEqual(whole)
    // Relayed as the relay passes them on (frames with an id, each ended by a blank line), read by a client.
    const relayed = pieces.filter((frame) => frame.id !== undefined).map((frame) => `${frame.text}\n\n`).join("")
    const readBack = makeSseReader().push(relayed).map(({ event, id }) => ({ id: String(id), event }))
    expect(readBack).toEqual(events.map((event, i) => ({ id: String(1_000 + i), event })))
    expect(pieces.filter((frame) => frame.id === undefined).length).toBe(Math.floor(events.length / 3))
  })

  it("a carriage return ending a chunk ends its line; a line feed beginning the next is its pair", () => {
    const frames = makeSseFrames()
    expect(frames("id: 1\r")).toEqual([])
    expect(frames("\n\r")).toEqual([{ id: "1", text: "id: 1" }])
    expect(frames("\nid: 2\r\r")).toEqual([{ id: "2", text: "id: 2" }])
    expect(frames("\nid: 3\n\n")).toEqual([{ id: "3", text: "id: 3" }])
  })
})
