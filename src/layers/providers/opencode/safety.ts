/**
 * The OpenCode runtime safety decision (P4), kept pure so every case is a unit test.
 *
 * The probe fetches and validates the server's inventories; this module decides over them. The
 * session's tree is the session and every child session, recursively, each in its own directory.
 * The runtime may be released only when every inventory was read and:
 *
 * - no session of the tree is executing: absent from, or `idle` in, the v1 status of its directory
 *   (`busy` and `retry` are executing), and absent from the v2 server-wide active map;
 * - no PTY is listed for any directory of the tree, in the v1 or the v2 registry (a listed PTY
 *   belongs to that directory; an exited one still holds output nobody read, so it retains too);
 * - no session of the tree has anything in its v2 inbox, and no directory has a v2 shell.
 *
 * An inventory that was not read (absent route, not asked) is an unknown: the decision is
 * `Unknown`, which the probe reports as `RuntimeProbeFailed`. It is never read as empty.
 *
 * One explicit exception, off by default (`trustMissingInventories`): a release listed in
 * `releasesWithoutInboxOrShells` is known to serve neither the v2 inbox nor the v2 shell list, so
 * when the host opts in, their absence there is read as "this release has none". Every inventory
 * that release does serve (statuses, PTYs, children, active executions) still vetoes as usual.
 */
import { Schema } from "effect"
import { type StopAnswer, stopPermitted, stopVetoed } from "../../../domain/provider.ts"
import type {
  InboxResponse,
  Pty,
  PtyList,
  PtyListV2,
  SessionActiveResponse,
  SessionStatusMap,
  ShellListResponse
} from "./apiTypes.ts"

/**
 * Releases verified to lack the v2 per-session inbox and per-location shell list (their routes
 * answer the web UI's HTML). Only these may have the absence read as empty, and only on opt-in.
 */
export const releasesWithoutInboxOrShells: ReadonlySet<string> = new Set(["1.18.33"])

/** One session of the tree and the directory it runs in. */
export interface TreeNode {
  readonly id: string
  readonly directory: string
}

/** An inventory the release may not serve: read, or known to be missing. */
export type Optional<A> = { readonly _tag: "Read"; readonly value: A } | { readonly _tag: "Absent"; readonly reason: string }

export interface Inventories {
  /** The session the runtime serves. */
  readonly sessionId: string
  /** The session and all its descendants; must contain `sessionId`. */
  readonly tree: ReadonlyArray<TreeNode>
  /** v1 `GET /session/status?directory=D`, by directory. */
  readonly statusByDirectory: ReadonlyMap<string, SessionStatusMap>
  /** v1 `GET /pty?directory=D`, by directory. */
  readonly ptyByDirectory: ReadonlyMap<string, PtyList>
  /** v2 `GET /api/session/active`. */
  readonly active: SessionActiveResponse
  /** v2 `GET /api/pty?location[directory]=D`, by directory. */
  readonly ptyV2ByDirectory: ReadonlyMap<string, PtyListV2>
  /** v2 per-session inbox, by session id. */
  readonly inboxBySession: ReadonlyMap<string, Optional<InboxResponse>>
  /** v2 shells per location, by directory. */
  readonly shellsByDirectory: ReadonlyMap<string, Optional<ShellListResponse>>
  /**
   * Set when the host opted in to `trustMissingInventories`: the server's version (from
   * `GET /global/health`). An absent inbox or shell list is then empty if that release is known to
   * lack them; for any other release it stays an unknown.
   */
  readonly trustMissingFor?: { readonly version: string } | undefined
}

export type Decision =
  | { readonly _tag: "Idle" }
  | { readonly _tag: "Busy"; readonly reason: string }
  | { readonly _tag: "Unknown"; readonly reason: string }

const idle: Decision = { _tag: "Idle" }
const busy = (reason: string): Decision => ({ _tag: "Busy", reason })
const unknown = (reason: string): Decision => ({ _tag: "Unknown", reason })

/** A command as a veto quotes it: in backticks, its first line, at most 80 characters. */
const quoted = (text: string): string => {
  const line = text.split("\n")[0] ?? ""
  return `\`${line.length > 80 || line.length < text.length ? `${line.slice(0, 80)}…` : line}\``
}

/** The first few of a list, then how many more. */
const listed = (items: ReadonlyArray<string>): string => {
  const shown = items.slice(0, 3)
  return `${shown.join(", ")}${items.length > shown.length ? ` and ${items.length - shown.length} more` : ""}`
}

/** "PTY pty_1 `sleep 100` (running, pid 42)", "2 PTYs: pty_1 `bash` (running, pid 42), pty_2 (exited)". */
const ptysNamed = (ptys: ReadonlyArray<Pty>): string => {
  const labels = ptys.map((pty) => {
    const line = [pty.command ?? "", ...(pty.args ?? [])].join(" ").trim()
    const command = pty.command === undefined || pty.command === null || line === "" ? "" : ` ${quoted(line)}`
    return `${pty.id}${command} (${pty.status}${pty.pid === undefined ? "" : `, pid ${pty.pid}`})`
  })
  return labels.length === 1 ? `PTY ${labels.join("")}` : `${labels.length} PTYs: ${listed(labels)}`
}

const hasId = Schema.is(Schema.Struct({ id: Schema.String }))
const hasCommand = Schema.is(Schema.Struct({ command: Schema.String }))
const hasType = Schema.is(Schema.Struct({ type: Schema.String }))

/**
 * What an entry of an inventory whose entries are not specified (the v2 inbox and shell list) says
 * it is: its `id`, then its `command` (or else its `type`), those it has as strings; `undefined`
 * when it has none of them.
 */
export const entryLabel = (entry: unknown): string | undefined => {
  const id = hasId(entry) && entry.id !== "" ? entry.id : undefined
  const what = hasCommand(entry) && entry.command !== ""
    ? entry.command
    : hasType(entry) && entry.type !== ""
    ? entry.type
    : undefined
  if (id === undefined) return what === undefined ? undefined : quoted(what)
  return what === undefined ? id : `${id} ${quoted(what)}`
}

/**
 * The entries of such an inventory as a veto names them: "shell sh_1 `npm run dev`", "2 shells:
 * sh_1, sh_2", "1 inbox item" (no label known), "shells (on a further page)".
 */
const entriesNamed = (kind: string, entries: ReadonlyArray<unknown>, furtherPage: boolean): string => {
  const labels = entries.flatMap((entry) => {
    const label = entryLabel(entry)
    return label === undefined ? [] : [label]
  })
  const page = furtherPage ? " (and more on a further page)" : ""
  if (entries.length === 0) return `${kind}s (on a further page)`
  if (entries.length === 1) return `${labels.length === 1 ? `${kind} ${labels.join("")}` : `1 ${kind}`}${page}`
  return `${entries.length} ${kind}s${labels.length === 0 ? "" : `: ${listed(labels)}`}${page}`
}

/** The distinct directories of the tree, in first-seen order. */
export const treeDirectories = (tree: ReadonlyArray<TreeNode>): ReadonlyArray<string> => [
  ...new Set(tree.map((node) => node.directory))
]

/**
 * The decision. Unknowns are reported before busy evidence: both retain, but a malformed or
 * missing inventory is a fault worth surfacing even when something else is also running.
 */
export const decide = (inv: Inventories): Decision => {
  if (!inv.tree.some((node) => node.id === inv.sessionId)) {
    return unknown(`session ${inv.sessionId} is not in its own tree`)
  }
  const directories = treeDirectories(inv.tree)
  const trusted = inv.trustMissingFor
  const absentByDesign = trusted !== undefined && releasesWithoutInboxOrShells.has(trusted.version)
  const absentReason = (reason: string) =>
    trusted === undefined ? reason : `${reason} (release ${trusted.version} is not known to lack it)`

  // Unknowns first: every inventory must have been read for every directory / session.
  for (const directory of directories) {
    if (!inv.statusByDirectory.has(directory)) return unknown(`no v1 session status for ${directory}`)
    if (!inv.ptyByDirectory.has(directory)) return unknown(`no v1 PTY list for ${directory}`)
    const v2 = inv.ptyV2ByDirectory.get(directory)
    if (v2 === undefined) return unknown(`no v2 PTY list for ${directory}`)
    if (v2.location.directory !== directory) {
      return unknown(`v2 PTY list for ${directory} answered for ${v2.location.directory}`)
    }
    const shells = inv.shellsByDirectory.get(directory)
    if (shells === undefined) return unknown(`no v2 shell list for ${directory}`)
    if (shells._tag === "Absent") {
      if (absentByDesign) continue
      return unknown(`v2 shell list for ${directory} unavailable: ${absentReason(shells.reason)}`)
    }
    if (shells.value.location !== undefined && shells.value.location.directory !== directory) {
      return unknown(`v2 shell list for ${directory} answered for ${shells.value.location.directory}`)
    }
  }
  for (const node of inv.tree) {
    const inbox = inv.inboxBySession.get(node.id)
    if (inbox === undefined) return unknown(`no v2 inbox for session ${node.id}`)
    if (inbox._tag === "Absent" && !absentByDesign) {
      return unknown(`v2 inbox for session ${node.id} unavailable: ${absentReason(inbox.reason)}`)
    }
  }

  // Everything was read: any evidence of work retains.
  for (const node of inv.tree) {
    // Read in every directory asked, not only the session's own: any report of execution counts.
    for (const [directory, statuses] of inv.statusByDirectory) {
      const status = Object.hasOwn(statuses, node.id) ? statuses[node.id] : undefined
      if (status !== undefined && status.type !== "idle") {
        return busy(`session ${node.id} is ${status.type === "retry" ? "retrying" : status.type} in ${directory} (v1)`)
      }
    }
    if (Object.hasOwn(inv.active.data, node.id)) return busy(`session ${node.id} is active (v2)`)
    const inbox = inv.inboxBySession.get(node.id)
    if (inbox?._tag === "Read" && (inbox.value.data.length !== 0 || inbox.value.cursor?.next !== undefined)) {
      const items = entriesNamed("inbox item", inbox.value.data, inbox.value.cursor?.next !== undefined)
      return busy(`session ${node.id} has ${items} not yet delivered (v2)`)
    }
  }
  for (const directory of directories) {
    const ptys = inv.ptyByDirectory.get(directory) ?? []
    if (ptys.length !== 0) return busy(`${ptysNamed(ptys)} in ${directory} (v1)`)
    const ptysV2 = inv.ptyV2ByDirectory.get(directory)?.data ?? []
    if (ptysV2.length !== 0) return busy(`${ptysNamed(ptysV2)} in ${directory} (v2)`)
    const shells = inv.shellsByDirectory.get(directory)
    if (shells?._tag === "Read" && (shells.value.data.length !== 0 || shells.value.cursor?.next !== undefined)) {
      return busy(`${entriesNamed("shell", shells.value.data, shells.value.cursor?.next !== undefined)} in ${directory} (v2)`)
    }
  }
  return idle
}

/** Whether the runtime may be released, and if not, why; `undefined` when the answer is unknown. */
export const canStop = (inv: Inventories): StopAnswer | undefined => {
  const decision = decide(inv)
  switch (decision._tag) {
    case "Idle":
      return stopPermitted
    case "Busy":
      return stopVetoed(decision.reason)
    case "Unknown":
      return undefined
  }
}
