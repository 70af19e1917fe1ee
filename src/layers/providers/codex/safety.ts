/**
 * The Codex app-server runtime safety decision (P3), kept pure so every case is a unit test.
 *
 * The adapter's own knowledge is consulted first: requests pending in either direction, a turn
 * starting or running, approvals awaiting an answer, subagents not yet finished. Only when all of
 * that is clear does the server's listing decide: no loaded thread may have a background terminal,
 * and no listing may be partial (a `nextCursor` means there is more the adapter has not seen).
 */
import type { ThreadBackgroundTerminalsListResponse, ThreadLoadedListResponse } from "./rpcTypes.ts"

/** What the adapter knows from the connection itself. */
export interface LocalState {
  /** Client requests that change the conversation, sent and not yet answered (probes are not counted). */
  readonly requestsInFlight: number
  /** Server requests (approvals, tool calls, elicitations, …) received and not yet answered or resolved. */
  readonly serverRequestsPending: number
  /** A `turn/start` was sent and not answered. */
  readonly turnStarting: boolean
  /** A turn was started and its `turn/completed` has not arrived. */
  readonly turnActive: boolean
  /** Approval requests reported as permissions and not yet resolved. */
  readonly permissionsPending: number
  /** Subagents (`collabAgentToolCall` items) started and not completed. */
  readonly subagentsPending: number
  /** The daemon's id of the turn starting or running, when the adapter knows it (names the veto). */
  readonly turnId?: string | undefined
  /** The ids of the approvals awaiting an answer, as reported in `PermissionRequested` (names the veto). */
  readonly permissionIds?: ReadonlyArray<string> | undefined
  /** The ids of the subagents not yet finished (names the veto). */
  readonly subagentIds?: ReadonlyArray<string> | undefined
}

export const idleLocalState: LocalState = {
  requestsInFlight: 0,
  serverRequestsPending: 0,
  turnStarting: false,
  turnActive: false,
  permissionsPending: 0,
  subagentsPending: 0
}

export type Verdict = { readonly permit: true } | { readonly permit: false; readonly reason: string }

const permit: Verdict = { permit: true }
const veto = (reason: string): Verdict => ({ permit: false, reason })

/** "permission p1", "permissions p1, p2 and 3 more": the ids a veto names, the first few. */
export const named = (kind: string, ids: ReadonlyArray<string>): string => {
  const shown = ids.slice(0, 3)
  const more = ids.length > shown.length ? ` and ${ids.length - shown.length} more` : ""
  return `${kind}${ids.length === 1 ? "" : "s"} ${shown.join(", ")}${more}`
}

/** A command as a veto quotes it: its first line, at most 120 characters. */
const shortened = (command: string): string => {
  const line = command.split("\n")[0] ?? ""
  return line.length > 120 || line.length < command.length ? `${line.slice(0, 120)}…` : line
}

const turnNamed = (turnId: string | undefined) => turnId === undefined ? "a turn" : `turn ${turnId}`

/** Why the connection itself keeps the runtime, if it does; checked before the server is asked. */
export const localVeto = (local: LocalState): Verdict => {
  if (local.turnStarting) return veto(`${turnNamed(local.turnId)} is starting`)
  if (local.turnActive) return veto(`${turnNamed(local.turnId)} is running`)
  if (local.permissionsPending !== 0) {
    const ids = local.permissionIds ?? []
    return veto(
      ids.length === local.permissionsPending
        ? `${named("permission", ids)} ${ids.length === 1 ? "is" : "are"} pending`
        : `${local.permissionsPending} approval(s) await an answer`
    )
  }
  if (local.serverRequestsPending !== 0) return veto(`${local.serverRequestsPending} server request(s) await an answer`)
  if (local.requestsInFlight !== 0) return veto(`${local.requestsInFlight} request(s) await their response`)
  if (local.subagentsPending !== 0) {
    const ids = local.subagentIds ?? []
    return veto(
      ids.length === local.subagentsPending
        ? `${named("subagent", ids)} ${ids.length === 1 ? "has" : "have"} not finished`
        : `${local.subagentsPending} subagent(s) have not finished`
    )
  }
  return permit
}

/** Whether the connection itself says the runtime is busy. */
export const localBusy = (local: LocalState): boolean => !localVeto(local).permit

/** The loaded-thread listing alone: a partial listing vetoes before any thread is asked. */
export const loadedListComplete = (loaded: ThreadLoadedListResponse): boolean => loaded.nextCursor === null

/** One thread's background terminals, as listed by the server. */
export interface ThreadTerminals {
  readonly threadId: string
  readonly terminals: ThreadBackgroundTerminalsListResponse
}

/**
 * Whether the runtime may be released, and if not, why: the connection is idle, the loaded-thread
 * listing is complete, every loaded thread was listed, and no listing has a terminal or a further
 * page.
 */
export const verdict = (
  loaded: ThreadLoadedListResponse,
  perThread: ReadonlyArray<ThreadTerminals>,
  local: LocalState
): Verdict => {
  const own = localVeto(local)
  if (!own.permit) return own
  if (!loadedListComplete(loaded)) return veto("the loaded-thread listing has a further page")
  const listed = new Map(perThread.map((entry) => [entry.threadId, entry.terminals]))
  for (const threadId of loaded.data) {
    const terminals = listed.get(threadId)
    // A loaded thread that was not asked about is an unknown, never read as idle.
    if (terminals === undefined) return veto(`thread ${threadId} was not listed`)
    const first = terminals.data[0]
    if (first !== undefined) {
      const others = terminals.data.length - 1
      return veto(
        `thread ${threadId} has a background terminal: ${shortened(first.command)}${others === 0 ? "" : ` and ${others} more`}`
      )
    }
    if (terminals.nextCursor !== null) return veto(`thread ${threadId}'s terminal listing has a further page`)
  }
  return permit
}

/** `verdict` as a yes or no. */
export const canStop = (
  loaded: ThreadLoadedListResponse,
  perThread: ReadonlyArray<ThreadTerminals>,
  local: LocalState
): boolean => verdict(loaded, perThread, local).permit
