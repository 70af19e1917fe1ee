/**
 * The part of the Codex app-server protocol (`codex app-server`, JSON-RPC 2.0 over stdio) Quiesce
 * speaks.
 *
 * Source (read from the published package, not guessed): `@openai/codex@0.171.0-linux-x64`, whose
 * binary writes its own protocol bindings with `codex app-server generate-ts --experimental` and
 * `generate-json-schema --experimental`: `ClientRequest.ts`, `ServerRequest.ts`,
 * `ServerNotification.ts`, `JSONRPCMessage.json`, `InitializeParams.ts`,
 * `InitializeCapabilities.ts`, `v2/ThreadLoadedList{Params,Response}.ts`,
 * `v2/ThreadBackgroundTerminalsList{Params,Response}.ts`, `v2/ThreadBackgroundTerminal.ts`,
 * `v2/ThreadStart*.ts`, `v2/TurnStart*.ts`, `v2/TurnCompletedNotification.ts`,
 * `v2/ItemCompletedNotification.ts`, `v2/ServerRequestResolvedNotification.ts`.
 *
 * Wire format: one JSON object per LF-terminated line, both ways. The server omits the
 * `"jsonrpc": "2.0"` member (its schema has none); it is accepted when present. Request ids are a
 * string or a number, and each direction numbers its own requests. `thread/backgroundTerminals/list`
 * is served only to a client that declared `capabilities.experimentalApi: true` at `initialize`.
 * An unknown method is answered with an error (-32600 "Invalid request: unknown variant …").
 *
 * Every schema here accepts and ignores fields it does not name, so newer releases still decode.
 */
import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------------------------

export const RequestId = Schema.Union([Schema.String, Schema.Number])
export type RequestId = typeof RequestId.Type

/** A request, either direction: it expects a response with the same id. */
export const JsonRpcRequest = Schema.Struct({
  jsonrpc: Schema.optionalKey(Schema.String),
  id: RequestId,
  method: Schema.String,
  params: Schema.optionalKey(Schema.Unknown)
})
export type JsonRpcRequest = typeof JsonRpcRequest.Type

/** A notification: no id, no response. */
export const JsonRpcNotification = Schema.Struct({
  jsonrpc: Schema.optionalKey(Schema.String),
  method: Schema.String,
  params: Schema.optionalKey(Schema.Unknown)
})
export type JsonRpcNotification = typeof JsonRpcNotification.Type

export const JsonRpcErrorBody = Schema.Struct({
  code: Schema.Number,
  message: Schema.String,
  data: Schema.optionalKey(Schema.Unknown)
})

/** A failed response; the id is null when the server could not read the request's. */
export const JsonRpcError = Schema.Struct({
  jsonrpc: Schema.optionalKey(Schema.String),
  id: Schema.NullOr(RequestId),
  error: JsonRpcErrorBody
})
export type JsonRpcError = typeof JsonRpcError.Type

/** A successful response; `result` is method-specific and decoded separately. */
export const JsonRpcResponse = Schema.Struct({
  jsonrpc: Schema.optionalKey(Schema.String),
  id: RequestId,
  result: Schema.Unknown
})
export type JsonRpcResponse = typeof JsonRpcResponse.Type

/**
 * One line. Requests are tried before notifications (both have `method`), errors before
 * responses (so that an error is never taken for a response with an absent result).
 */
export const JsonRpcMessage = Schema.Union([JsonRpcRequest, JsonRpcNotification, JsonRpcError, JsonRpcResponse])
export type JsonRpcMessage = typeof JsonRpcMessage.Type

export const decodeJsonRpcLine = Schema.decodeUnknownEffect(Schema.fromJsonString(JsonRpcMessage))

export const isRequest = (message: JsonRpcMessage): message is JsonRpcRequest => "method" in message && "id" in message
export const isNotification = (message: JsonRpcMessage): message is JsonRpcNotification =>
  "method" in message && !("id" in message)
export const isError = (message: JsonRpcMessage): message is JsonRpcError => "error" in message && !("method" in message)

/** An outgoing line: a request (with id), a notification (without), or a response to a server request. */
export const encodeLine = (message: Record<string, unknown>): string => JSON.stringify(message)

// ---------------------------------------------------------------------------------------------
// Results Quiesce reads
// ---------------------------------------------------------------------------------------------

/** `thread/loaded/list`: ids of the threads loaded in memory, and a cursor if there are more. */
export const ThreadLoadedListResponse = Schema.Struct({
  data: Schema.Array(Schema.String),
  nextCursor: Schema.NullOr(Schema.String)
})
export type ThreadLoadedListResponse = typeof ThreadLoadedListResponse.Type
export const decodeThreadLoadedList = Schema.decodeUnknownEffect(ThreadLoadedListResponse)

/** One background terminal (a command the agent left running). Only the identity is required. */
export const ThreadBackgroundTerminal = Schema.Struct({
  processId: Schema.String,
  command: Schema.String,
  itemId: Schema.optionalKey(Schema.String),
  osPid: Schema.optionalKey(Schema.NullOr(Schema.Number))
})

/** `thread/backgroundTerminals/list` (experimental API). */
export const ThreadBackgroundTerminalsListResponse = Schema.Struct({
  data: Schema.Array(ThreadBackgroundTerminal),
  nextCursor: Schema.NullOr(Schema.String)
})
export type ThreadBackgroundTerminalsListResponse = typeof ThreadBackgroundTerminalsListResponse.Type
export const decodeBackgroundTerminalsList = Schema.decodeUnknownEffect(ThreadBackgroundTerminalsListResponse)

/** `thread/start` and `thread/resume`: the thread's id is the persistence handle. */
export const ThreadOpenedResponse = Schema.Struct({ thread: Schema.Struct({ id: Schema.String }) })
export const decodeThreadOpened = Schema.decodeUnknownEffect(ThreadOpenedResponse)

/** `turn/start`: the turn's id, needed to steer or interrupt it. */
export const TurnStartResponse = Schema.Struct({ turn: Schema.Struct({ id: Schema.String }) })
export const decodeTurnStart = Schema.decodeUnknownEffect(TurnStartResponse)

// ---------------------------------------------------------------------------------------------
// Notification params Quiesce reads
// ---------------------------------------------------------------------------------------------

/**
 * `turn/started` and `turn/completed`. A completed turn's status is "completed", "interrupted" or
 * "failed"; a failed one (e.g. the model endpoint refused the request) carries `error.message`.
 */
export const TurnNotification = Schema.Struct({
  threadId: Schema.String,
  turn: Schema.Struct({
    id: Schema.String,
    status: Schema.optionalKey(Schema.String),
    error: Schema.optionalKey(Schema.NullOr(Schema.Struct({ message: Schema.String })))
  })
})
export const isTurnNotification = Schema.is(TurnNotification)

/** `item/started` and `item/completed`: an agent message carries the reply text; a collab agent call is a subagent. */
export const ItemNotification = Schema.Struct({
  threadId: Schema.String,
  item: Schema.Struct({ type: Schema.String, id: Schema.String, text: Schema.optionalKey(Schema.String) })
})
export const isItemNotification = Schema.is(ItemNotification)

/** `serverRequest/resolved`: the server withdrew (or settled) one of its requests. */
export const ServerRequestResolved = Schema.Struct({ threadId: Schema.String, requestId: RequestId })
export const isServerRequestResolved = Schema.is(ServerRequestResolved)

/** Server requests that ask a person for a decision: reported as permissions. */
export const approvalMethods: ReadonlySet<string> = new Set([
  "item/commandExecution/requestApproval",
  "item/fileChange/requestApproval",
  "item/permissions/requestApproval",
  "applyPatchApproval",
  "execCommandApproval"
])

/** The item type of a subagent spawned by the agent (`v2/ThreadItem.ts`). */
export const subagentItemType = "collabAgentToolCall"

/**
 * The item type of a shell command the agent ran (`v2/ThreadItem.ts`). Its `item/started` comes
 * once the command's process exists; a command still running when its tool call yields stays a
 * background terminal, and its `item/completed` may arrive after the turn has completed.
 */
export const commandItemType = "commandExecution"

// ---------------------------------------------------------------------------------------------
// Answers to approval requests (each method has its own response type)
// ---------------------------------------------------------------------------------------------

/** `item/permissions/requestApproval` params, reduced to the profile asked for (`v2/RequestPermissionProfile.ts`). */
const PermissionsRequestApprovalParams = Schema.Struct({
  permissions: Schema.Struct({
    network: Schema.optionalKey(Schema.NullOr(Schema.Unknown)),
    fileSystem: Schema.optionalKey(Schema.NullOr(Schema.Unknown))
  })
})
const isPermissionsRequestApprovalParams = Schema.is(PermissionsRequestApprovalParams)

const rejection = "Denied through Quiesce"

/**
 * The result answering an approval request, by its method:
 * - `item/commandExecution/requestApproval`, `item/fileChange/requestApproval`:
 *   `{ decision: "accept" | "decline" }` (`v2/*ApprovalDecision.ts`);
 * - `applyPatchApproval`, `execCommandApproval` (legacy): `{ decision: ReviewDecision }`, i.e.
 *   `"approved"` or `{ denied: { rejection } }` (`ReviewDecision.ts`);
 * - `item/permissions/requestApproval`: `{ permissions: GrantedPermissionProfile, scope }` — the
 *   profile asked for, or none, for this turn (`v2/PermissionsRequestApprovalResponse.ts`).
 */
export const approvalResponse = (method: string, params: unknown, allow: boolean): Record<string, unknown> => {
  switch (method) {
    case "applyPatchApproval":
    case "execCommandApproval":
      return { decision: allow ? "approved" : { denied: { rejection } } }
    case "item/permissions/requestApproval": {
      const asked = isPermissionsRequestApprovalParams(params) ? params.permissions : {}
      const granted: Record<string, unknown> = {}
      if (allow && asked.network !== undefined && asked.network !== null) granted["network"] = asked.network
      if (allow && asked.fileSystem !== undefined && asked.fileSystem !== null) granted["fileSystem"] = asked.fileSystem
      return { permissions: granted, scope: "turn" }
    }
    default:
      return { decision: allow ? "accept" : "decline" }
  }
}

/** The JSON-RPC error answering a server request the adapter does not handle. */
export const unsupportedRequestError = { code: -32601, message: "not supported by Quiesce" }
