/**
 * The Claude Code runtime safety decision (P2), kept pure so every case is a unit test.
 *
 * Background work lives in the CLI process: shells started with `run_in_background`, monitors,
 * background agents. The CLI reports the live roster (`background_tasks_changed`) and each task's
 * completion report (`task_notification`), which wakes the agent into a turn of its own. So a
 * runtime may be released only when the adapter owes it nothing, the CLI is idle, the roster is
 * empty, and every completion report has been both received and consumed by a later turn.
 *
 * Whether the roster can be believed depends on the CLI: 2.1.292 and newer are known to report
 * it; an older one counts only once it has sent a roster; before either is known (no version yet,
 * or one that does not parse) the answer is unknown, which retains the runtime.
 */

/** The first release known to report the background roster. */
export const rosterVersion: readonly [number, number, number] = [2, 1, 292]

/** `major.minor.patch` from a version string such as "2.1.332" or "2.1.332 (Claude Code)". */
export const parseVersion = (version: string): readonly [number, number, number] | undefined => {
  const match = /^\s*(\d+)\.(\d+)\.(\d+)/.exec(version)
  return match === null ? undefined : [Number(match[1]), Number(match[2]), Number(match[3])]
}

const atLeast = (version: readonly [number, number, number], floor: readonly [number, number, number]): boolean => {
  for (let i = 0; i < 3; i++) {
    if (version[i]! !== floor[i]!) return version[i]! > floor[i]!
  }
  return true
}

/** What the adapter knows of the CLI's background work. A fresh process starts empty. */
export interface BackgroundWork {
  /** The CLI's version as it reported it, if it has. */
  readonly version: string | undefined
  /** Whether the CLI has sent a roster since it started. */
  readonly rosterSeen: boolean
  /** The latest roster's task ids. */
  readonly live: ReadonlySet<string>
  /** Tasks seen started or listed whose completion report has not arrived. */
  readonly awaitingReport: ReadonlySet<string>
  /** Completion reports received, by task, with the number of turns started when each arrived. */
  readonly unconsumed: ReadonlyMap<string, number>
  /** Turns the CLI has started (each opens with `system`/`init`). */
  readonly turnsStarted: number
  /** What the CLI said each task is (its `description`), for the tasks still tracked: names a veto. */
  readonly descriptions: ReadonlyMap<string, string>
}

export const freshWork: BackgroundWork = {
  version: undefined,
  rosterSeen: false,
  live: new Set(),
  awaitingReport: new Set(),
  unconsumed: new Map(),
  turnsStarted: 0,
  descriptions: new Map()
}

/** What the CLI said that bears on its background work. */
export type Observation =
  | { readonly _tag: "Version"; readonly version: string }
  | { readonly _tag: "TurnStarted"; readonly version: string | undefined }
  | { readonly _tag: "TurnEnded" }
  | {
    readonly _tag: "Roster"
    readonly taskIds: ReadonlyArray<string>
    /** The descriptions the roster gave, by task id. */
    readonly descriptions?: ReadonlyMap<string, string> | undefined
  }
  | { readonly _tag: "TaskStarted"; readonly taskId: string; readonly description?: string | undefined }
  | { readonly _tag: "TaskReported"; readonly taskId: string }

export const observe = (work: BackgroundWork, observation: Observation): BackgroundWork => {
  switch (observation._tag) {
    case "Version":
      return { ...work, version: observation.version }
    case "TurnStarted":
      return { ...work, version: observation.version ?? work.version, turnsStarted: work.turnsStarted + 1 }
    case "TurnEnded": {
      // A report is consumed by a turn that started after it arrived; this turn, if it did, has ended.
      const unconsumed = new Map([...work.unconsumed].filter(([, arrivedAt]) => arrivedAt >= work.turnsStarted))
      // A task no longer tracked needs no description.
      const tracked = (taskId: string) => work.live.has(taskId) || work.awaitingReport.has(taskId) || unconsumed.has(taskId)
      const descriptions = new Map([...work.descriptions].filter(([taskId]) => tracked(taskId)))
      return { ...work, unconsumed, descriptions }
    }
    case "Roster": {
      const live = new Set(observation.taskIds)
      return {
        ...work,
        rosterSeen: true,
        live,
        awaitingReport: new Set([...work.awaitingReport, ...live]),
        descriptions: new Map([...work.descriptions, ...(observation.descriptions ?? [])])
      }
    }
    case "TaskStarted":
      return {
        ...work,
        awaitingReport: new Set([...work.awaitingReport, observation.taskId]),
        descriptions: observation.description === undefined
          ? work.descriptions
          : new Map([...work.descriptions, [observation.taskId, observation.description]])
      }
    case "TaskReported": {
      const awaitingReport = new Set(work.awaitingReport)
      awaitingReport.delete(observation.taskId)
      const unconsumed = new Map(work.unconsumed)
      unconsumed.set(observation.taskId, work.turnsStarted)
      return { ...work, awaitingReport, unconsumed }
    }
  }
}

/** What the adapter knows from the stream itself. */
export interface LocalState {
  /** A prompt was sent and its turn's `result` has not arrived. */
  readonly turnInFlight: boolean
  /** The CLI started a turn of its own (output without a prompt) and its `result` has not arrived. */
  readonly autonomousTurn: boolean
  /** Prompts written to the CLI that it has not yet been seen to take up. */
  readonly unstartedMessages: number
  /** `can_use_tool` requests not yet answered or withdrawn. */
  readonly permissionsPending: number
  /** Lines read from the CLI and not yet processed, and our control requests (other than a probe's) not yet answered. */
  readonly processing: number
  /** The CLI's own last word on its state (`idle`, `running`, `requires_action`), if it gave one. */
  readonly sessionState: string | undefined
  /** The daemon's id of the turn in flight, when the adapter knows it (names the veto). */
  readonly turnId?: string | undefined
  /** The ids of the `can_use_tool` requests pending (names the veto). */
  readonly permissionIds?: ReadonlyArray<string> | undefined
}

export const idleLocal: LocalState = {
  turnInFlight: false,
  autonomousTurn: false,
  unstartedMessages: 0,
  permissionsPending: 0,
  processing: 0,
  sessionState: undefined
}

export interface Veto {
  readonly _tag: "Veto"
  readonly reason: string
}

export type Decision =
  | { readonly _tag: "Permit" }
  | Veto
  /** The roster cannot be believed yet; the runtime stays resident. */
  | { readonly _tag: "Unknown"; readonly reason: string }

const veto = (reason: string): Veto => ({ _tag: "Veto", reason })

/** "task t1", "tasks t1, t2, t3 and 2 more": the ids a veto names, the first few. */
const named = (kind: string, ids: ReadonlyArray<string>): string => {
  const shown = ids.slice(0, 3)
  const more = ids.length > shown.length ? ` and ${ids.length - shown.length} more` : ""
  return `${kind}${ids.length === 1 ? "" : "s"} ${shown.join(", ")}${more}`
}

/** A task as a veto names it: its id, then what the CLI said it is (first line, shortened). */
const describedTask = (work: BackgroundWork) => (taskId: string): string => {
  const description = ((work.descriptions.get(taskId) ?? "").split("\n")[0] ?? "").trim()
  if (description === "" || description === taskId) return taskId
  return `${taskId} \`${description.length > 80 ? `${description.slice(0, 80)}…` : description}\``
}

/** Why the adapter itself says the runtime is busy, if it does; checked before the CLI is asked. */
export const localVeto = (local: LocalState): Veto | undefined => {
  if (local.turnInFlight) return veto(local.turnId === undefined ? "a turn is in flight" : `turn ${local.turnId} is in flight`)
  if (local.autonomousTurn) return veto("an autonomous turn is in flight")
  if (local.unstartedMessages !== 0) return veto(`${local.unstartedMessages} message(s) not yet taken up`)
  if (local.permissionsPending !== 0) {
    const ids = local.permissionIds ?? []
    return veto(
      ids.length === local.permissionsPending
        ? `${named("permission", ids)} ${ids.length === 1 ? "is" : "are"} pending`
        : `${local.permissionsPending} permission request(s) pending`
    )
  }
  if (local.processing !== 0) return veto("messages are being processed")
  if (local.sessionState !== undefined && local.sessionState !== "idle") return veto(`the CLI is ${local.sessionState}`)
  return undefined
}

/** Whether the CLI's roster can be believed, and if not, why. */
export const rosterSupport = (work: BackgroundWork): { readonly supported: true } | { readonly supported: false; readonly reason: string } => {
  if (work.rosterSeen) return { supported: true }
  if (work.version === undefined) return { supported: false, reason: "the CLI has not reported its version yet" }
  const parsed = parseVersion(work.version)
  if (parsed === undefined) return { supported: false, reason: `unparseable CLI version "${work.version}"` }
  if (atLeast(parsed, rosterVersion)) return { supported: true }
  return { supported: false, reason: `CLI ${work.version} predates ${rosterVersion.join(".")} and has sent no roster` }
}

export const decide = (local: LocalState, work: BackgroundWork): Decision => {
  const busy = localVeto(local)
  if (busy !== undefined) return busy
  const support = rosterSupport(work)
  if (!support.supported) return { _tag: "Unknown", reason: support.reason }
  const tasks = (ids: Iterable<string>) => named("background task", [...ids].map(describedTask(work)))
  if (work.live.size !== 0) return veto(`${tasks(work.live)} ${work.live.size === 1 ? "is" : "are"} running`)
  if (work.awaitingReport.size !== 0) {
    return veto(`the completion report of ${tasks(work.awaitingReport)} has not arrived`)
  }
  if (work.unconsumed.size !== 0) {
    return veto(`the completion report of ${tasks(work.unconsumed.keys())} is not yet delivered to the agent`)
  }
  return { _tag: "Permit" }
}
