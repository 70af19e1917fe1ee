/**
 * The session's tree as the event stream shows it: its descendant sessions (subagents), which
 * sessions of the tree are busy, and the completion notices not yet run.
 *
 * When a child session goes idle, 1.18.33 runs a turn of its own in the parent (the completion
 * notice). Until that parent has been seen busy and then idle again, the notice is work the
 * inventories may not show (the inbox 1.18.33 lacks), so it vetoes a release; past its bound the
 * probe fails instead.
 */
import type { SessionEvent } from "../../../domain/provider.ts"
import type { SessionStatusMap } from "./apiTypes.ts"

/** A child session went idle; its parent's completion notice turn has not been seen yet. */
interface Notice {
  readonly child: string
  readonly since: number
  sawBusy: boolean
}

/** The oldest completion notice not yet run, and whether it is past its bound. */
export interface PendingNotice {
  readonly overdue: boolean
  /** What holds the runtime, for a veto or the probe's failure. */
  readonly reason: string
}

/** The root session, how long a notice may stay unseen, and where subagents are reported. */
export interface SessionTreeOptions {
  readonly sessionId: string
  readonly noticeTimeout: number
  readonly onEvent: (event: SessionEvent) => void
}

/** The tree of one root session; see the module comment. */
export interface SessionTree {
  /** The root session or a descendant seen created. */
  readonly inTree: (id: string) => boolean
  /** A session was created: a subagent when its parent is in the tree. */
  readonly created: (id: string, parentID: string | undefined) => void
  /** A session of the tree reported a status. */
  readonly status: (about: string, status: "idle" | "busy" | "retry") => void
  /**
   * After a reconnect: notes the sessions of the tree `statuses` shows executing, and returns
   * those last seen busy that no longer are (their `idle` was missed).
   */
  readonly missedIdle: (statuses: SessionStatusMap) => ReadonlyArray<string>
  readonly pendingNotice: () => PendingNotice | undefined
}

/** An empty tree for the session `options.sessionId`. */
export const makeSessionTree = (options: SessionTreeOptions): SessionTree => {
  const { sessionId, noticeTimeout, onEvent } = options
  /** Every descendant session seen created (child, grandchild, …), with its parent. */
  const parentOf = new Map<string, string>()
  /** Descendants reported as running subagents (until they go idle). */
  const runningChildren = new Set<string>()
  /** Sessions of the tree last seen busy (or retrying). */
  const busySessions = new Set<string>()
  /** Completion notices not yet seen, by the parent that owes them. */
  const notices = new Map<string, Notice>()

  const inTree = (id: string) => id === sessionId || parentOf.has(id)

  return {
    inTree,
    created: (id, parentID) => {
      // Descendants at any depth: a grandchild names a child we already track.
      if (parentID !== undefined && inTree(parentID) && !inTree(id)) {
        parentOf.set(id, parentID)
        runningChildren.add(id)
        onEvent({ _tag: "SubagentStarted", id })
      }
    },
    status: (about, status) => {
      if (status === "idle") {
        const wasBusy = busySessions.delete(about)
        const notice = notices.get(about)
        if (notice !== undefined && (notice.sawBusy || wasBusy)) notices.delete(about)
        const parent = parentOf.get(about)
        if (parent !== undefined && wasBusy) {
          // The parent's notice turn may already be running; then its own idle settles it.
          notices.set(parent, { child: about, since: Date.now(), sawBusy: busySessions.has(parent) })
        }
        if (runningChildren.delete(about)) onEvent({ _tag: "SubagentFinished", id: about })
      } else {
        busySessions.add(about)
        const notice = notices.get(about)
        if (notice !== undefined) notice.sawBusy = true
      }
    },
    missedIdle: (statuses) => {
      const idle = [...busySessions].filter((id) => !Object.hasOwn(statuses, id))
      for (const [id, status] of Object.entries(statuses)) {
        if (inTree(id) && status.type !== "idle") busySessions.add(id)
      }
      return idle
    },
    pendingNotice: () => {
      const [parent, notice] = [...notices].sort((a, b) => a[1].since - b[1].since)[0] ?? []
      if (parent === undefined || notice === undefined) return undefined
      const overdue = Date.now() - notice.since > noticeTimeout
      return {
        overdue,
        reason: overdue
          ? `session ${parent} did not run the completion notice of ${notice.child} within ${noticeTimeout} ms`
          : `session ${parent} has not yet run the completion notice of ${notice.child}`
      }
    }
  }
}
