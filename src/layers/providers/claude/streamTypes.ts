/**
 * The part of Claude Code's headless stream-json protocol Quiesce speaks
 * (`claude -p --input-format stream-json --output-format stream-json --verbose`).
 *
 * Verified against `@anthropic-ai/claude-code@2.1.332` (the native binary), by running it and by
 * reading the Zod schemas it carries:
 * - One JSON object per LF-terminated line, both ways. We write `user` messages, `control_request`s
 *   (`initialize`, `interrupt`) and `control_response`s (answers to its `can_use_tool`); it writes
 *   `system`, `assistant`, `user`, `result`, `control_request`, `control_response`,
 *   `control_cancel_request` and `keep_alive` lines, among others.
 * - `system`/`init` (with `session_id` and `claude_code_version`) opens every turn, an autonomous
 *   one included; it is not sent before the first user message. `result` ends a turn.
 * - Background work: `system`/`background_tasks_changed` carries the whole live roster,
 *   `task_started` one new task, `task_notification` a task's completion report, which wakes the
 *   agent into a turn of its own when it is idle.
 * - `initialize` is answered with a `control_response` carrying `claude_code_version` and
 *   `session_state` (`idle`, `running`, `requires_action`); a repeated `initialize` is followed at
 *   once by a `background_tasks_changed` with the live roster (empty included). The first one is not.
 * - With `CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS=1` it also writes `system`/`session_state_changed`.
 *
 * Every schema accepts and ignores fields it does not name, so newer releases still decode.
 */
import { Schema } from "effect"

/** Any line: decoded as JSON first, then by the members below. */
export const decodeLine = Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.Unknown))

export const SystemInit = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.Literal("init"),
  session_id: Schema.String,
  claude_code_version: Schema.optionalKey(Schema.String)
})
export type SystemInit = typeof SystemInit.Type

export const BackgroundTask = Schema.Struct({ task_id: Schema.String })

/** The whole live roster of background tasks (shells, monitors, background agents). */
export const BackgroundTasksChanged = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.Literal("background_tasks_changed"),
  tasks: Schema.Array(BackgroundTask)
})
export type BackgroundTasksChanged = typeof BackgroundTasksChanged.Type

export const TaskStarted = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.Literal("task_started"),
  task_id: Schema.String
})

/** A task's completion report; the CLI delivers it to the model in a turn of its own. */
export const TaskNotification = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.Literal("task_notification"),
  task_id: Schema.String,
  status: Schema.optionalKey(Schema.String)
})

export const SessionStateChanged = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.Literal("session_state_changed"),
  state: Schema.String
})

export const AssistantMessage = Schema.Struct({
  type: Schema.Literal("assistant"),
  parent_tool_use_id: Schema.optionalKey(Schema.NullOr(Schema.String)),
  message: Schema.Struct({
    content: Schema.Array(Schema.Unknown)
  })
})
export type AssistantMessage = typeof AssistantMessage.Type

export const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
export const isTextBlock = Schema.is(TextBlock)

export const ResultMessage = Schema.Struct({
  type: Schema.Literal("result"),
  subtype: Schema.String,
  result: Schema.optionalKey(Schema.String),
  is_error: Schema.optionalKey(Schema.Boolean),
  errors: Schema.optionalKey(Schema.Array(Schema.String)),
  session_id: Schema.optionalKey(Schema.String)
})
export type ResultMessage = typeof ResultMessage.Type

/** A request from the CLI; `can_use_tool` asks for a permission. */
export const ControlRequest = Schema.Struct({
  type: Schema.Literal("control_request"),
  request_id: Schema.String,
  request: Schema.Struct({
    subtype: Schema.String,
    tool_name: Schema.optionalKey(Schema.String),
    input: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
  })
})
export type ControlRequest = typeof ControlRequest.Type

/** The CLI's answer to one of our control requests. */
export const ControlResponse = Schema.Struct({
  type: Schema.Literal("control_response"),
  response: Schema.Struct({
    subtype: Schema.String,
    request_id: Schema.String,
    response: Schema.optionalKey(Schema.Unknown),
    error: Schema.optionalKey(Schema.String)
  })
})
export type ControlResponse = typeof ControlResponse.Type

/** The CLI withdrew one of its requests (e.g. a permission prompt after an interrupt). */
export const ControlCancelRequest = Schema.Struct({
  type: Schema.Literal("control_cancel_request"),
  request_id: Schema.String
})

/** What Quiesce reads of an `initialize` answer. Both fields may be absent on older CLIs. */
export const InitializeResponse = Schema.Struct({
  claude_code_version: Schema.optionalKey(Schema.String),
  session_state: Schema.optionalKey(Schema.String)
})
export const decodeInitializeResponse = Schema.decodeUnknownEffect(InitializeResponse)

export const isSystemInit = Schema.is(SystemInit)
export const isBackgroundTasksChanged = Schema.is(BackgroundTasksChanged)
export const isTaskStarted = Schema.is(TaskStarted)
export const isTaskNotification = Schema.is(TaskNotification)
export const isSessionStateChanged = Schema.is(SessionStateChanged)
export const isAssistantMessage = Schema.is(AssistantMessage)
export const isResultMessage = Schema.is(ResultMessage)
export const isControlRequest = Schema.is(ControlRequest)
export const isControlResponse = Schema.is(ControlResponse)
export const isControlCancelRequest = Schema.is(ControlCancelRequest)

/**
 * What a task is, as the CLI describes it (`description` of a roster entry or a `task_started`);
 * read apart from the schemas above so a description of another shape never hides the task.
 */
const Described = Schema.Struct({ description: Schema.String })
const isDescribed = Schema.is(Described)
export const taskDescription = (value: unknown): string | undefined => isDescribed(value) ? value.description : undefined

/** The `type` (and `subtype`) of a line, for lines the adapter reads no further. */
export const Envelope = Schema.Struct({ type: Schema.String, subtype: Schema.optionalKey(Schema.String) })
export const isEnvelope = Schema.is(Envelope)

export const encodeLine = (message: Record<string, unknown>): string => JSON.stringify(message)

/** A user message that starts (or joins) a turn. */
export const userMessage = (text: string): string =>
  encodeLine({ type: "user", message: { role: "user", content: text }, parent_tool_use_id: null })
