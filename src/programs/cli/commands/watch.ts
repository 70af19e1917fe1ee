/** Following an agent's live events: `quiesce watch`, and the stream `prompt --follow` reads. */
import { Console, Effect, Schedule, Stream } from "effect"
import { Command } from "effect/cli"
import { fromFirstKept, makeSseReader } from "../../../api/eventStream.ts"
import type { Gap, NumberedEvent } from "../../../domain/agentEvent.ts"
import { agentArgument } from "../arguments.ts"
import { client } from "../connection.ts"
import { documented } from "../documented.ts"
import { releaseReasonText } from "../render.ts"
import { jsonFlag } from "../root.ts"

/** How many times in a row (a second apart) a dropped stream is opened again before following gives up. */
const reconnects = 30

/** The failures of opening a stream that may pass: the connection failed, or the hub (restarting) is not there. */
const passing = (error: { readonly _tag: string }) => error._tag === "HttpClientError" || error._tag === "UsageError"

/**
 * Opens the agent's event stream (`GET /v1/agents/{id}/events`; with `--hub`, relayed by the hub)
 * from now: once this succeeds the daemon follows from this moment, so a prompt sent afterwards is
 * seen whole. A connection that drops is opened again with `Last-Event-ID` (the last event read),
 * found afresh (a restarted hub listens on another port), so nothing inside the daemon's window is
 * missed (a `gap` says what was). The stream ends when the daemon closes it (it stopped or
 * retired); the hub's relay goes on across its home's daemons.
 */
export const openEvents = (agent: string) =>
  Effect.gen(function*() {
    let last: NumberedEvent["id"] | undefined
    const services = yield* Effect.context<Effect.Services<typeof client>>()
    const open = Effect.suspend(() =>
      Effect.flatMap(client, (api) =>
        api.agents.events({ params: { id: agent }, headers: last === undefined ? {} : { "last-event-id": last } }))
    ).pipe(Effect.provideContext(services))
    // A refusal (the agent is gone) is not tried again.
    const reopen = open.pipe(
      Effect.delay("1 second"),
      Effect.retry({ while: passing, times: reconnects, schedule: Schedule.spaced("1 second") })
    )
    type Body = Effect.Success<typeof open>
    const following = (body: Body, drops: number): Stream.Stream<NumberedEvent, Stream.Error<Body> | Effect.Error<typeof open>> => {
      const reader = makeSseReader()
      let read = 0
      return body.pipe(
        Stream.decodeText,
        Stream.flatMap((text) => Stream.fromIterable(reader.push(text))),
        Stream.tap((numbered) =>
          Effect.sync(() => {
            last = numbered.id
            read++
          })
        ),
        Stream.catch((error) => {
          // A stream that brought events before it dropped starts the count again.
          const dropped = read > 0 ? 1 : drops + 1
          return dropped > reconnects ? Stream.fail(error) : Stream.unwrap(Effect.map(reopen, (again) => following(again, dropped)))
        })
      )
    }
    return following(yield* open, 0)
  })

/**
 * A gap after 0: the hub's relay, which had passed nothing on yet, follows a daemon that started
 * since, from its first event kept (the reader missed nothing it asked for).
 */
export const afterNothing = (gap: Gap) => gap.after === fromFirstKept

/** One event for people, on one line (a turn's output as it came, without its last newline). */
export const eventLine = ({ event }: NumberedEvent): string => {
  switch (event._tag) {
    case "turn-accepted":
      return `turn ${event.turnId} accepted: ${event.prompt.split("\n")[0]}`
    case "turn-running":
      return `turn ${event.turnId} running`
    case "output":
      return event.text.replace(/\n$/, "")
    case "permission-asked":
      return `permission ${event.permissionId} asked (quiesce permit / deny)`
    case "permission-resolved":
      return `permission ${event.permissionId} no longer open`
    case "turn-ended":
      return `turn ${event.turnId} ${event.state}${event.error === null ? "" : `: ${event.error.message}`}`
    case "resumed":
      return "resumed: its runtime is resident"
    case "released":
      return `released: ${releaseReasonText[event.reason]}`
    case "vetoed":
      return `kept resident: ${event.reason}`
    case "gap":
      return afterNothing(event)
        ? `(following the home's new daemon from its first event kept, ${event.resumesAt})`
        : `(missed events: the daemon no longer keeps those after ${event.after}; continuing from ${event.resumesAt})`
  }
}

/** `quiesce watch`: follows an agent's events until Ctrl-C or the daemon stops. */
export const watch = Command.make(
  "watch",
  {
    agent: agentArgument,
    json: jsonFlag("each event (one JSON object a line: id and event)")
  },
  Effect.fn(function*({ agent, json }) {
    const events = yield* openEvents(agent)
    yield* Stream.runForEach(events, (numbered) =>
      Console.log(json ? JSON.stringify({ id: numbered.id, event: numbered.event }) : eventLine(numbered)))
  })
).pipe(
  documented(
    "Follow an agent's live events as they happen: its turns (accepted, running, output, ended), permissions asked, " +
      "and its runtime resumed, released or kept. Reading never counts as activity; Ctrl-C stops following, never a turn. " +
      "Ends when the daemon stops; with --hub, follows the home's daemons as they retire and start, starting none.",
    [
      { command: "quiesce watch agent-1234", description: "One line per event" },
      { command: "quiesce watch agent-1234 --json", description: "Each event as JSON, one per line" }
    ]
  )
)
