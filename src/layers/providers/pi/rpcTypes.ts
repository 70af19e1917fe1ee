/**
 * The part of the Pi coding agent's RPC mode (`pi --mode rpc`) Quiesce speaks, and of its OMP fork.
 *
 * Sources (read from the published packages, not guessed):
 * - `@mariozechner/pi-coding-agent@0.73.1`: `docs/rpc.md`, `dist/modes/rpc/rpc-types.d.ts`,
 *   `dist/modes/rpc/rpc-mode.js`.
 * - `@oh-my-pi/pi-coding-agent@18.3.4`: `src/modes/rpc/rpc-types.ts`, `rpc-mode.ts`,
 *   `rpc-session-settle.ts`; and 18.2.3 (`src/modes/rpc/rpc-mode.ts`), the release the tests run.
 * Both were run against a fake model (test/agents): Pi 0.73.1 on Node 24, OMP 18.2.3 on Bun 1.4.5.
 *
 * Wire format: one JSON object per LF-terminated line, both ways. Commands are `{ id?, type, ... }`;
 * every response is `{ id?, type: "response", command, success, data?, error? }` and carries the
 * command's `id` when one was given — except Pi's answer to an unknown command and to an unparsable
 * line, which have no `id`. Events are every other line; they never carry an `id` (OMP's
 * `extension_ui_request` has an `id` of its own, which is not a command's).
 *
 * Seen on the real CLIs: OMP first writes `{ type: "ready", protocolVersion, ... }` and answers
 * commands sent before it; its `get_state` carries the system prompt and tool schemas (~70 KB a
 * line). OMP answers `prompt` with success as soon as it is admitted and may later send a second
 * response with the same id and `success: false` when the prompt could not run.
 *
 * Every schema here accepts and ignores fields it does not name, so newer releases still decode.
 */
import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Commands (stdin)
// ---------------------------------------------------------------------------------------------

/** Starts a run; if the agent is already streaming Pi rejects it unless `streamingBehavior` is set. */
export const PromptCommand = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("prompt"),
  message: Schema.String,
  streamingBehavior: Schema.optionalKey(Schema.Literals(["steer", "followUp"]))
})

/** Queues a message into the running agent, delivered before its next model call. */
export const SteerCommand = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("steer"),
  message: Schema.String
})

export const AbortCommand = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("abort")
})

export const GetStateCommand = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("get_state")
})

/**
 * Dismisses a dialog an extension opened (`extension_ui_request` with a dialog method): Pi 0.73
 * `RpcExtensionUIResponse` `{ type, id, cancelled: true }` (docs/rpc.md "Extension UI Protocol");
 * OMP 18 has the same shape (with an optional `timedOut`).
 */
export const ExtensionUiCancel = Schema.Struct({
  type: Schema.Literal("extension_ui_response"),
  id: Schema.String,
  cancelled: Schema.Literal(true)
})

export const RpcCommand = Schema.Union([PromptCommand, SteerCommand, AbortCommand, GetStateCommand, ExtensionUiCancel])
export type RpcCommand = typeof RpcCommand.Type

export const encodeRpcCommand = Schema.encodeSync(Schema.fromJsonString(RpcCommand))

// ---------------------------------------------------------------------------------------------
// Responses (stdout)
// ---------------------------------------------------------------------------------------------

/** Any response. `data` is command-specific and decoded separately (see `SessionState`). */
export const RpcResponse = Schema.Struct({
  /** Absent on Pi's reply to an unknown command or to a line that is not JSON. */
  id: Schema.optionalKey(Schema.String),
  type: Schema.Literal("response"),
  /** The command's `type`; `"parse"` for a line that was not JSON. */
  command: Schema.String,
  success: Schema.Boolean,
  data: Schema.optionalKey(Schema.Unknown),
  error: Schema.optionalKey(Schema.String)
})
export type RpcResponse = typeof RpcResponse.Type

/**
 * `get_state`'s `data`, reduced to what the safety decision and persistence need. Every field is
 * optional here on purpose: a field that is missing must make the adapter retain the runtime
 * (P5), never fail the decode into a guess. A field that is present with the wrong type fails.
 *
 * - Pi 0.73: `isStreaming`, `isCompacting`, `pendingMessageCount`, `sessionId`, `sessionFile?`.
 * - OMP: `queuedMessageCount` instead of `pendingMessageCount`; 18.3 adds `isSettled`
 *   ("idle with nothing queued or pending") and `hasPendingAsyncWork` ("background jobs or
 *   deliveries can still inject a follow-up and wake the session"). 18.2.3 has neither.
 */
export const SessionState = Schema.Struct({
  isStreaming: Schema.optionalKey(Schema.Boolean),
  isCompacting: Schema.optionalKey(Schema.Boolean),
  pendingMessageCount: Schema.optionalKey(Schema.Number),
  queuedMessageCount: Schema.optionalKey(Schema.Number),
  isSettled: Schema.optionalKey(Schema.Boolean),
  hasPendingAsyncWork: Schema.optionalKey(Schema.Boolean),
  sessionId: Schema.optionalKey(Schema.String),
  /** Absent when the CLI runs with `--no-session`: the conversation cannot be resumed. */
  sessionFile: Schema.optionalKey(Schema.String)
})
export type SessionState = typeof SessionState.Type

export const decodeSessionState = Schema.decodeUnknownEffect(SessionState)

// ---------------------------------------------------------------------------------------------
// Events (stdout)
// ---------------------------------------------------------------------------------------------

/** The agent began processing a prompt (a run: one or more model turns). */
export const AgentStartEvent = Schema.Struct({ type: Schema.Literal("agent_start") })

/**
 * The agent finished a run; `messages` are the messages it produced. OMP marks a run that will
 * continue on its own (a queued continuation) with `isTerminal: false` — seen on 18.2.3 for every
 * run that ends while an async bash job's result is still to be delivered; the delivery then
 * comes as a run OMP starts itself (`agent_start` … `agent_end` with `isTerminal: true`).
 */
export const AgentEndEvent = Schema.Struct({
  type: Schema.Literal("agent_end"),
  messages: Schema.optionalKey(Schema.Array(Schema.Unknown)),
  isTerminal: Schema.optionalKey(Schema.Boolean)
})
export type AgentEndEvent = typeof AgentEndEvent.Type

/** A streaming delta of the assistant message (`text_delta`, `thinking_delta`, `toolcall_delta`, …). */
export const MessageUpdateEvent = Schema.Struct({
  type: Schema.Literal("message_update"),
  assistantMessageEvent: Schema.optionalKey(Schema.Struct({
    type: Schema.String,
    delta: Schema.optionalKey(Schema.String)
  }))
})

/**
 * An extension's UI request. Dialog methods (`select`, `confirm`, `input`, `editor`) block the
 * agent until a response with the same `id` arrives; the others (`notify`, `setStatus`,
 * `setWidget`, `setTitle`, `set_editor_text`, and OMP's `cancel`, `open_url`, …) expect none.
 */
export const ExtensionUiRequest = Schema.Struct({
  type: Schema.Literal("extension_ui_request"),
  id: Schema.String,
  method: Schema.String
})
export type ExtensionUiRequest = typeof ExtensionUiRequest.Type

/** The extension UI methods that wait for an answer (docs/rpc.md: "Dialog methods"). */
export const dialogMethods: ReadonlySet<string> = new Set(["select", "confirm", "input", "editor"])

/**
 * Every other event (`turn_start`, `turn_end`, `message_start`, `tool_execution_*`,
 * `queue_update`, `compaction_*`, `auto_retry_*`, `extension_ui_request`, …): counted as activity.
 */
export const OtherEvent = Schema.Struct({ type: Schema.String })

/** One stdout line. The response is tried first so that a malformed response is not taken for an event. */
export const RpcLine = Schema.Union([
  RpcResponse,
  AgentStartEvent,
  AgentEndEvent,
  MessageUpdateEvent,
  ExtensionUiRequest,
  OtherEvent
])
export type RpcLine = typeof RpcLine.Type

export const decodeRpcLine = Schema.decodeUnknownEffect(Schema.fromJsonString(RpcLine))

/** An assistant message's text content, as found in `agent_end.messages`. */
const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.Array(Schema.Unknown)
})
const TextContent = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
const isAssistantMessage = Schema.is(AssistantMessage)
const isTextContent = Schema.is(TextContent)

/** The text of the last assistant message of a run, or undefined if it has none. */
export const replyText = (event: AgentEndEvent): string | undefined => {
  const messages = event.messages ?? []
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]
    if (isAssistantMessage(message)) {
      return message.content.filter(isTextContent).map((part) => part.text).join("")
    }
  }
  return undefined
}
