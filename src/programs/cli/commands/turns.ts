/** Prompting an agent and reading its turns: `prompt`, `turns`, `interrupt`, `permit` and `deny`. */
import { Console, Effect, Option, Schema, Stream } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { randomBytes } from "node:crypto"
import type { PromptResult } from "../../../api/agents.ts"
import { defaultTurnsLimit, TurnsLimit, type TurnView } from "../../../api/turns.ts"
import type { NumberedEvent } from "../../../domain/agentEvent.ts"
import { isFinal } from "../../../domain/turn.ts"
import { agentArgument } from "../arguments.ts"
import { afterNothing, eventLine, openEvents } from "./watch.ts"
import { commandGroup, documented } from "../documented.ts"
import { client } from "../connection.ts"
import { ago, printColumns, printedWith, printJson } from "../render.ts"
import { jsonFlag } from "../root.ts"
import { daemonOrSavedStore } from "../savedReads.ts"

/** A turn that failed or was interrupted, told to the user: the message, exit code 1. */
class TurnUnsuccessful extends Schema.TaggedError<TurnUnsuccessful>()("TurnUnsuccessful", { message: Schema.String }) {
  /** A turn that ended failed or interrupted, with its error's message. */
  static ended(turnId: string, state: string, error: { readonly message: string } | null) {
    return new TurnUnsuccessful({ message: `turn ${turnId} ${state}: ${error?.message ?? "no reason given"}` })
  }
}

/**
 * A prompt's answer: with `--json`, the receipt as JSON; else with `--wait`, the reply of a completed
 * turn, and without, a line saying the turn was taken. A failed or interrupted turn is an error
 * either way (after its receipt, with `--json`).
 */
const reportTurn = (result: PromptResult, wait: boolean, json: boolean) =>
  Effect.gen(function*() {
    if (json) yield* printJson(result)
    if (result.state === "failed" || result.state === "interrupted") {
      return yield* TurnUnsuccessful.ended(result.turnId, result.state, result.error)
    }
    if (json) return
    // The reply as the agent gave it, without doubling its last newline.
    if (wait) return yield* Console.log((result.output ?? "").replace(/\n$/, ""))
    yield* Console.log(
      `turn ${result.turnId} of ${result.agentId}: ${result.state}${
        result.joinedTurnId === null ? "" : ` (steered into turn ${result.joinedTurnId}, whose outcome it shares)`
      }${result.resumed ? " (its released runtime was resumed for it)" : ""}; its reply: quiesce turns show ${result.agentId} ${result.turnId}`
    )
  })

/**
 * Prints the turn's output as its events bring it (with `--json`, each of its events as a JSON line)
 * until it ends, then fails as `--wait` does when it did not complete. A stream that ends first
 * (the daemon stopped) says where to read the turn later.
 */
const followTurn = <E>(events: Stream.Stream<NumberedEvent, E>, result: PromptResult, json: boolean) =>
  Effect.gen(function*() {
    // A prompt steered into a running turn shares that turn's output and outcome.
    const turnId = result.joinedTurnId ?? result.turnId
    let ended: Extract<NumberedEvent["event"], { readonly _tag: "turn-ended" }> | undefined
    let printed = ""
    yield* events.pipe(
      Stream.takeUntil(({ event }) => event._tag === "turn-ended" && event.turnId === turnId),
      Stream.runForEach((numbered) => {
        const { event } = numbered
        if (event._tag === "turn-ended" && event.turnId === turnId) ended = event
        if (json) return Console.log(JSON.stringify({ id: numbered.id, event }))
        if (event._tag === "output" && event.turnId === turnId) {
          printed += event.text
          return Effect.sync(() => void process.stdout.write(event.text))
        }
        // A gap after 0 missed nothing of this turn: a daemon started for it, followed from its start.
        if (event._tag === "gap") return afterNothing(event) ? Effect.void : Console.error(`quiesce: ${eventLine(numbered)}`)
        // A provider that reports no output as it comes: its reply, at the end.
        if (event._tag === "turn-ended" && event.turnId === turnId && printed === "" && event.reply !== null) {
          return Console.log(event.reply.replace(/\n$/, ""))
        }
        return Effect.void
      })
    )
    if (!json && printed !== "" && !printed.endsWith("\n")) yield* Console.log("")
    if (ended === undefined) {
      return yield* new TurnUnsuccessful({
        message: `the daemon closed the stream before turn ${turnId} ended; quiesce turns show ${result.agentId} ${turnId} reads it later`
      })
    }
    if (ended.state === "failed" || ended.state === "interrupted") {
      return yield* TurnUnsuccessful.ended(turnId, ended.state, ended.error)
    }
  })

/** Failures after which the prompt may have been accepted, or would be on a retry. */
const retryableTags: ReadonlySet<string> = new Set([
  "HttpClientError",
  "ShuttingDown",
  "DaemonRetiring",
  "DaemonUnavailable",
  "HomeStopped",
  "DaemonStartFailed"
])

/** `quiesce prompt`: sends a prompt, and with --wait prints the reply. */
export const prompt = Command.make(
  "prompt",
  {
    agent: agentArgument,
    text: Argument.String("text").pipe(Argument.withDescription("The prompt; one that starts with - goes after --")),
    wait: Flag.Boolean("wait").pipe(Flag.withDescription("Wait for the turn to end, and print its reply"), Flag.withDefault(false)),
    follow: Flag.Boolean("follow").pipe(
      Flag.withDescription("Stream the turn's output as it comes (its reply at the end when the provider reports only that), then exit with its outcome; Ctrl-C stops following, not the turn"),
      Flag.withDefault(false)
    ),
    json: jsonFlag("the turn's receipt (with --wait, as it ended: state, output, error)"),
    clientMessageId: Flag.String("client-message-id").pipe(
      Flag.withDescription("Your id for this prompt: repeating it returns the same turn, never a second one (default: a new random id, printed on a failure)"),
      Flag.optional
    )
  },
  Effect.fn(function*({ agent, clientMessageId, follow, json, text, wait }) {
    const api = yield* client
    // Following from before the prompt is sent: its turn's events are all seen.
    const events = follow ? yield* openEvents(agent) : undefined
    // Always an id: when the answer is lost (a timeout, a daemon that went away), repeating the
    // prompt with it returns the same turn instead of running it again.
    const id = Option.getOrElse(clientMessageId, () => `cli-${randomBytes(12).toString("hex")}`)
    const result = yield* api.agents.prompt({ params: { id: agent }, payload: { text, wait: wait && !follow, clientMessageId: id } }).pipe(
      // Where the prompt may have been accepted, or would be on a retry: say how to repeat it.
      Effect.tapError((error) =>
        retryableTags.has(error._tag)
          ? Console.error(`quiesce: the prompt's client message id is ${id}: repeat it with --client-message-id ${id} to get the same turn`)
          : Effect.void
      )
    )
    if (events === undefined || isFinal(result.state)) return yield* reportTurn(result, wait || follow, json)
    yield* followTurn(events, result, json)
  })
).pipe(
  documented(
    "Send a prompt; a released agent is resumed first. With --wait, prints the reply; with --follow, streams the turn as it runs; " +
      "a failed or interrupted turn exits 1. " +
      'A prompt that starts with "-" goes after --: quiesce prompt AGENT --wait -- "-n is a flag of echo"',
    [
      { command: "quiesce prompt agent-1234 \"run the tests\" --wait", description: "Send a prompt and print the reply" },
      { command: "quiesce prompt agent-1234 \"run the tests\" --follow", description: "Stream the turn's output as it comes" },
      { command: "quiesce prompt agent-1234 --client-message-id m-1 \"deploy\"", description: "Repeatable: the same id never runs twice" },
      { command: "quiesce prompt agent-1234 \"run the tests\" --wait --json", description: "The turn as it ended, as JSON: state, output, error" },
      { command: "quiesce prompt agent-1234 --wait -- \"-n is a flag of echo\"", description: "A prompt that starts with -" }
    ]
  )
)

/** The turn argument of `turns show`. */
const turnArgument = Argument.String("turn").pipe(Argument.withDescription("The turn's id, e.g. turn-5678 (quiesce turns list shows them)"))

/** A time of a turn for people: ISO, and how long ago; "-" when it has not come. */
const turnTime = (iso: string | null) => iso === null ? "-" : `${iso} (${ago(iso)})`

/** One turn for people, a line per field; the reply (or the error) last, as the agent gave it. */
const turnLines = (turn: TurnView) =>
  Effect.forEach([
    `turn        ${turn.turnId} of ${turn.agentId}${turn.clientMessageId === null ? "" : ` (client message id ${turn.clientMessageId})`}`,
    `state       ${turn.state}${turn.disposition === null ? "" : ` (${turn.disposition})`}${
      turn.joinedTurnId === null ? "" : `, steered into ${turn.joinedTurnId}`
    }${turn.resumed ? ", its released runtime resumed for it" : ""}`,
    `prompt      ${indented(turn.text)}`,
    `accepted    ${turnTime(turn.acceptedAt)}`,
    `dispatched  ${turnTime(turn.dispatchedAt)}`,
    `ended       ${turnTime(turn.endedAt)}`,
    ...(turn.error === null ? [] : [`error       ${turn.error._tag}: ${indented(turn.error.message)}`]),
    ...(turn.reply === null ? [] : [`reply       ${indented(turn.reply.replace(/\n$/, ""))}`])
  ], (line) => Console.log(line), { discard: true })

/** A text of several lines under a 12-character field name: its further lines indented to match. */
const indented = (text: string) => text.replaceAll("\n", `\n${" ".repeat(12)}`)

const encodeLimit = Schema.encodeEffect(TurnsLimit)

/** `quiesce turns`: one turn, or an agent's recent turns. */
export const turns = commandGroup("turns", "Read the turns prompts started", [
  { command: "quiesce turns show agent-1234 turn-5678", description: "One turn's state and reply" }
], [
  Command.make(
    "show",
    { agent: agentArgument, turn: turnArgument, json: jsonFlag("the turn") },
    printedWith(
      ({ agent, turn }) =>
        daemonOrSavedStore((api) => api.agents.turn({ params: { id: agent, turnId: turn } }), (saved) => saved.turn(agent, turn)),
      turnLines
    )
  ).pipe(
    documented(
      "One turn: its prompt, state, reply or error, and times",
      [
        { command: "quiesce turns show agent-1234 turn-5678", description: "Prompt, state, reply or error, and times" },
        { command: "quiesce turns show agent-1234 turn-5678 --json", description: "The same as JSON, as the journal holds it" }
      ]
    )
  ),
  Command.make(
    "list",
    {
      agent: agentArgument,
      limit: Flag.Int("limit").pipe(Flag.withDescription(`How many, newest first, 1 to 100 (default ${defaultTurnsLimit})`), Flag.withDefault(defaultTurnsLimit)),
      json: jsonFlag("the turns")
    },
    printedWith(
      ({ agent, limit }) =>
        daemonOrSavedStore(
          (api) => api.agents.turns({ params: { id: agent }, query: { limit } }),
          // The limit the daemon's API takes, refused as its client refuses it.
          (saved) => Effect.andThen(encodeLimit(limit), saved.turns(agent, limit))
        ),
      (rows, { agent }) =>
        rows.length === 0 ? Console.log(`no turn yet: ${agent} has not been prompted`) : printColumns([
          ["TURN", "STATE", "ACCEPTED", "PROMPT"],
          ...rows.map((row) => [row.turnId, row.state, ago(row.acceptedAt), promptLine(row.text)])
        ])
    )
  ).pipe(
    documented(
      "An agent's recent turns, newest first",
      [{ command: "quiesce turns list agent-1234 --limit 5", description: "Its five newest turns: id, state, when, prompt" }]
    )
  )
])

/** A prompt in one short line, for a table. */
const promptLine = (text: string) => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > 60 ? `${line.slice(0, 59)}…` : line
}

/** `quiesce interrupt`: interrupts the agent's running turn. */
export const interrupt = Command.make(
  "interrupt",
  { agent: agentArgument },
  ({ agent }) =>
    Effect.flatMap(client, (api) => api.agents.interrupt({ params: { id: agent } })).pipe(
      Effect.andThen(Console.log(`asked ${agent} to interrupt its running turn (if it had one); quiesce turns list ${agent} shows how it ended`))
    )
).pipe(
  documented(
    "Interrupt the agent's running turn, if any",
    [{ command: "quiesce interrupt agent-1234", description: "Interrupt its running turn" }]
  )
)

/** `permit` and `deny`: answers one of the permissions `agents show` lists as pending. */
export const answerPermission = (name: "permit" | "deny") =>
  Command.make(
    name,
    {
      agent: agentArgument,
      permission: Argument.String("permission").pipe(
        Argument.withDescription("The permission's id, as quiesce agents show lists it under permissions")
      )
    },
    ({ agent, permission }) =>
      Effect.flatMap(client, (api) =>
        api.agents.answerPermission({
          params: { id: agent, permissionId: permission },
          payload: { allow: name === "permit" }
        })).pipe(Effect.andThen(Console.log(`${name === "permit" ? "allowed" : "refused"} ${permission} of ${agent}`)))
  ).pipe(
    documented(
      name === "permit"
        ? "Allow a permission the agent is waiting on (quiesce agents show lists them)"
        : "Refuse a permission the agent is waiting on",
      name === "permit"
        ? [{ command: "quiesce permit agent-1234 perm-1", description: "Allow what agents show lists under permissions" }]
        : [{ command: "quiesce deny agent-1234 perm-1", description: "Refuse it" }]
    )
  )
