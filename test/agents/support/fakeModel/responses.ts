/**
 * OpenAI Responses (`POST /v1/responses`), streamed as server-sent events whose `event:` name
 * repeats the data's `type`, or answered whole. A tool call is a `function_call` output item; a
 * request whose newest input item is a tool's output is answered after that result.
 */
import type { ModelRequest } from "./policy.ts"
import { type Dialect, field, list, startEventStream, text, writeEvent } from "./server.ts"

/** Input item types that carry a tool's result back to the model. */
const toolOutputTypes = new Set(["function_call_output", "custom_tool_call_output", "local_shell_call_output"])

/** A message's text: `input_text`/`output_text` parts, or a plain string. */
const contentText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : list(content).map((part) => text(field(part, "text"))).join("")

const summarize = (body: unknown): ModelRequest => {
  const rawInput = field(body, "input")
  const input = typeof rawInput === "string" ? [{ type: "message", role: "user", content: rawInput }] : list(rawInput)
  const lastUser = [...input].reverse().find((item) => field(item, "role") === "user")
  return {
    dialect: "responses",
    model: text(field(body, "model")),
    lastUserText: contentText(field(lastUser, "content")),
    afterToolResult: toolOutputTypes.has(text(field(input.at(-1), "type"))),
    // Function tools name themselves at the top level; other kinds (e.g. `web_search`) have only a type.
    toolNames: list(field(body, "tools")).map((tool) => text(field(tool, "name")) || text(field(tool, "type"))),
    streaming: field(body, "stream") === true
  }
}

let counter = 0

export const responses: Dialect = {
  paths: ["/responses"],
  handle: (body, response, policy, record) => {
    const request = summarize(body)
    record(request)
    const turn = policy(request)
    const n = ++counter
    const id = `resp_${n}`
    const createdAt = Math.floor(Date.now() / 1000)
    const usage = {
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 15
    }
    const item = turn.kind === "text"
      ? {
        type: "message",
        id: `msg_${n}`,
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: turn.text, annotations: [] }]
      }
      : {
        type: "function_call",
        id: `fc_${n}`,
        status: "completed",
        name: turn.name,
        call_id: `call_${n}`,
        arguments: JSON.stringify(turn.input)
      }
    const base = { id, object: "response", created_at: createdAt, model: request.model }
    if (!request.streaming) {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ ...base, status: "completed", output: [item], usage }))
      return
    }
    startEventStream(response)
    let sequence = 0
    const emit = (type: string, data: Record<string, unknown>) =>
      writeEvent(response, { type, sequence_number: sequence++, ...data }, type)
    emit("response.created", { response: { ...base, status: "in_progress", output: [] } })
    emit("response.in_progress", { response: { ...base, status: "in_progress", output: [] } })
    if (item.type === "message") {
      emit("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", content: [] } })
      emit("response.content_part.added", {
        item_id: item.id,
        output_index: 0,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [] }
      })
      emit("response.output_text.delta", { item_id: item.id, output_index: 0, content_index: 0, delta: turn.kind === "text" ? turn.text : "" })
      emit("response.output_text.done", { item_id: item.id, output_index: 0, content_index: 0, text: turn.kind === "text" ? turn.text : "" })
    } else {
      emit("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", arguments: "" } })
      emit("response.function_call_arguments.delta", { item_id: item.id, output_index: 0, delta: item.arguments })
      emit("response.function_call_arguments.done", { item_id: item.id, output_index: 0, arguments: item.arguments })
    }
    emit("response.output_item.done", { output_index: 0, item })
    emit("response.completed", { response: { ...base, status: "completed", output: [item], usage } })
    response.end()
  }
}
