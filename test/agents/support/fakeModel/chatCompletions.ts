/** OpenAI chat completions (`POST /v1/chat/completions`), streamed or not. */
import type { ModelRequest } from "./policy.ts"
import { type Dialect, field, list, startEventStream, text, writeEvent } from "./server.ts"

/**
 * A message's text, whether its content is a string or a list of parts. Parts are joined by a
 * newline: OMP sends a `<system-reminder>` part before the prompt's own part, and a `RUN:` line
 * must still start a line.
 */
const contentText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : list(content).map((part) => text(field(part, "text"))).join("\n")

const summarize = (body: unknown): ModelRequest => {
  const messages = list(field(body, "messages"))
  const lastUser = [...messages].reverse().find((m) => field(m, "role") === "user")
  return {
    dialect: "chat",
    model: text(field(body, "model")),
    lastUserText: contentText(field(lastUser, "content")),
    afterToolResult: field(messages.at(-1), "role") === "tool",
    toolNames: list(field(body, "tools")).map((tool) => text(field(field(tool, "function"), "name"))),
    streaming: field(body, "stream") === true
  }
}

let counter = 0

export const chatCompletions: Dialect = {
  paths: ["/chat/completions"],
  handle: (body, response, policy, record) => {
    const request = summarize(body)
    record(request)
    const turn = policy(request)
    const id = `chatcmpl-${++counter}`
    const created = Math.floor(Date.now() / 1000)
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
    const toolCall = turn.kind === "tool"
      ? { id: `call_${counter}`, type: "function", function: { name: turn.name, arguments: JSON.stringify(turn.input) } }
      : undefined
    const finishReason = turn.kind === "tool" ? "tool_calls" : "stop"
    if (!request.streaming) {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({
        id,
        object: "chat.completion",
        created,
        model: request.model,
        choices: [{
          index: 0,
          message: turn.kind === "text"
            ? { role: "assistant", content: turn.text }
            : { role: "assistant", content: null, tool_calls: [toolCall] },
          finish_reason: finishReason
        }],
        usage
      }))
      return
    }
    startEventStream(response)
    const chunk = (delta: unknown, finish: string | null, extra: Record<string, unknown> = {}) =>
      writeEvent(response, {
        id,
        object: "chat.completion.chunk",
        created,
        model: request.model,
        choices: [{ index: 0, delta, finish_reason: finish }],
        ...extra
      })
    chunk({ role: "assistant", content: "" }, null)
    if (turn.kind === "text") chunk({ content: turn.text }, null)
    else chunk({ tool_calls: [{ index: 0, ...toolCall }] }, null)
    chunk({}, finishReason, { usage })
    writeEvent(response, "[DONE]")
    response.end()
  }
}
