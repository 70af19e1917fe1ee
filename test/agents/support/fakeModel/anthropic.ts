/**
 * Anthropic Messages (`POST /v1/messages`), streamed or not, and `POST /v1/messages/count_tokens`.
 * A turn's tool call is a `tool_use` block; the CLI sends its result back as a user message of
 * `tool_result` blocks, which is what `afterToolResult` reads.
 */
import type * as http from "node:http"
import type { ModelRequest } from "./policy.ts"
import { type Dialect, field, list, startEventStream, text, writeEvent } from "./server.ts"

/** The text blocks of a message's content (a string, or a list of blocks). */
const contentText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : list(content)
      .filter((block) => field(block, "type") === "text")
      .map((block) => text(field(block, "text")))
      // The CLI adds `<system-reminder>` blocks of its own around the prompt; they are not the user's words.
      .filter((blockText) => !blockText.trimStart().startsWith("<system-reminder>"))
      .join("\n")

const isToolResult = (content: unknown): boolean => list(content).some((block) => field(block, "type") === "tool_result")

const summarize = (body: unknown): ModelRequest => {
  const messages = list(field(body, "messages"))
  // Only the newest user message counts: an older prompt must never be answered again (a completion
  // notification that wakes the CLI would otherwise replay the last `RUN:` line). The CLI may put a
  // `system` role message (its environment) after it.
  const newest = messages.findLast((message) => field(message, "role") === "user")
  const lastUserText = contentText(field(newest, "content"))
  return {
    dialect: "anthropic",
    model: text(field(body, "model")),
    lastUserText,
    // A prompt sent after an interrupted tool call shares the message with that call's result.
    afterToolResult: isToolResult(field(newest, "content")) && lastUserText.trim() === "",
    toolNames: list(field(body, "tools")).map((tool) => text(field(tool, "name"))),
    streaming: field(body, "stream") === true
  }
}

/** A rough token count: enough for a CLI that only wants a number. */
const countTokens = (body: unknown): number => Math.max(1, Math.ceil(JSON.stringify(body).length / 4))

let counter = 0

const sendJson = (response: http.ServerResponse, value: unknown) => {
  response.writeHead(200, { "content-type": "application/json" })
  response.end(JSON.stringify(value))
}

export const anthropicMessages: Dialect = {
  paths: ["/messages", "/messages/count_tokens"],
  handle: (body, response, policy, record) => {
    // count_tokens has no `max_tokens`; a messages request always does.
    if (field(body, "max_tokens") === undefined) {
      sendJson(response, { input_tokens: countTokens(body) })
      return
    }
    const request = summarize(body)
    record(request)
    const turn = policy(request)
    const id = `msg_fake_${++counter}`
    const usage = { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
    const block = turn.kind === "text"
      ? { type: "text", text: turn.text }
      : { type: "tool_use", id: `toolu_fake_${counter}`, name: turn.name, input: turn.input }
    const stopReason = turn.kind === "tool" ? "tool_use" : "end_turn"
    if (!request.streaming) {
      sendJson(response, {
        id,
        type: "message",
        role: "assistant",
        model: request.model,
        content: [block],
        stop_reason: stopReason,
        stop_sequence: null,
        usage
      })
      return
    }
    startEventStream(response)
    const event = (type: string, data: Record<string, unknown>) => writeEvent(response, { type, ...data }, type)
    event("message_start", {
      message: {
        id,
        type: "message",
        role: "assistant",
        model: request.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 }
      }
    })
    if (turn.kind === "text") {
      event("content_block_start", { index: 0, content_block: { type: "text", text: "" } })
      event("content_block_delta", { index: 0, delta: { type: "text_delta", text: turn.text } })
    } else {
      event("content_block_start", {
        index: 0,
        content_block: { type: "tool_use", id: `toolu_fake_${counter}`, name: turn.name, input: {} }
      })
      event("content_block_delta", {
        index: 0,
        delta: { type: "input_json_delta", partial_json: JSON.stringify(turn.input) }
      })
    }
    event("content_block_stop", { index: 0 })
    event("message_delta", { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 5 } })
    event("message_stop", {})
    response.end()
  }
}
