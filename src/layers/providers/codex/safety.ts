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
}

export const idleLocalState: LocalState = {
  requestsInFlight: 0,
  serverRequestsPending: 0,
  turnStarting: false,
  turnActive: false,
  permissionsPending: 0,
  subagentsPending: 0
}

/** Whether the connection itself says the runtime is busy; checked before the server is asked. */
export const localBusy = (local: LocalState): boolean =>
  local.requestsInFlight !== 0 ||
  local.serverRequestsPending !== 0 ||
  local.turnStarting ||
  local.turnActive ||
  local.permissionsPending !== 0 ||
  local.subagentsPending !== 0

/** The loaded-thread listing alone: a partial listing vetoes before any thread is asked. */
export const loadedListComplete = (loaded: ThreadLoadedListResponse): boolean => loaded.nextCursor === null

/** One thread's background terminals, as listed by the server. */
export interface ThreadTerminals {
  readonly threadId: string
  readonly terminals: ThreadBackgroundTerminalsListResponse
}

/**
 * Whether the runtime may be released: the connection is idle, the loaded-thread listing is
 * complete, every loaded thread was listed, and no listing has a terminal or a further page.
 */
export const canStop = (
  loaded: ThreadLoadedListResponse,
  perThread: ReadonlyArray<ThreadTerminals>,
  local: LocalState
): boolean => {
  if (localBusy(local)) return false
  if (!loadedListComplete(loaded)) return false
  const listed = new Map(perThread.map((entry) => [entry.threadId, entry.terminals]))
  for (const threadId of loaded.data) {
    const terminals = listed.get(threadId)
    // A loaded thread that was not asked about is an unknown, never read as idle.
    if (terminals === undefined) return false
    if (terminals.data.length !== 0 || terminals.nextCursor !== null) return false
  }
  return true
}
