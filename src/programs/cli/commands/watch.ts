/** Following an agent's live events: `quiesce watch`, and the stream `prompt --follow` reads. */
import { Console, Effect, Option, Stream } from "effect"
import { Command } from "effect/cli"
import { makeSseReader } from "../../../api/eventStream.ts"
import type { NumberedEvent } from "../../../domain/agentEvent.ts"
import { agentArgument } from "../arguments.ts"
import { client } from "../connection.ts"
import { documented } from "../documented.ts"
import { releaseReasonText } from "../render.ts"
import { jsonFlag, viaHub } from "../root.ts"
import { UsageError } from "../usageError.ts"

/**
 * Opens the agent's event stream (`GET /v1/agents/{id}/events`) from now: once this succeeds the
 * daemon follows from this moment, so a prompt sent afterwards is seen whole. The stream ends when
 * the daemon closes it (it stopped or retired).
 */
export const openEvents = (agent: string) =>
  Effect.gen(function*() {
    // The hub relays whole answers only: a stream would arrive when it ended.
    if (Option.isSome(yield* viaHub)) {
      return yield* new UsageError({
        message: "Live events do not go through the hub yet: run this on the home's host without --hub (or QUIESCE_HUB)"
      })
    }
    const api = yield* client
    const body = yield* api.agents.events({ params: { id: agent }, headers: {} })
    const reader = makeSseReader()
    return body.pipe(
      Stream.decodeText,
      Stream.flatMap((text) => Stream.fromIterable(reader.push(text)))
    )
  })

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
      return `(missed events: the daemon no longer keeps those after ${event.after}; continuing from ${event.resumesAt})`
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
      "Ends when the daemon stops.",
    [
      { command: "quiesce watch agent-1234", description: "One line per event" },
      { command: "quiesce watch agent-1234 --json", description: "Each event as JSON, one per line" }
    ]
  )
)
