// @ts-check
// A daemon's agents and live runtimes: why each is still resident (its blockers, its provider's
// veto and reason, a failed probe), the actions on it, a prompt box, and each agent's turns as they
// run (the daemon's live events; without them, read every 2 s). Served by the daemon at `/`, and by a
// hub at `/homes/NAME/`, whose requests the hub forwards to that home's daemon.
import {
  api,
  ApiError,
  blockerLine,
  blockerWord,
  countdownElement,
  failureOutcome,
  formatBytes,
  h,
  idElement,
  idleTimeoutText,
  localTime,
  outcomeElement,
  pollWhileVisible,
  problemWords,
  promptLine,
  refusedSinceElement,
  relative,
  rowActions,
  signOutButton,
  startTicking,
  table
} from "./common.js"
import { followWhileVisible } from "./eventStream.js"
import { makeLiveTurns } from "./liveTurns.js"
import { promptBox } from "./promptBox.js"

/**
 * @typedef {{ agentId: string, kind: string, detail?: string }} MemberBlocker
 * @typedef {{ agentId: string, at: string, outcome: string, message?: string, since?: string }} Probe
 * @typedef {{
 *   agentId: string, provider: string, cwd: string, labels: Record<string, string>, sessionId: string | null,
 *   resident: boolean, lifecycle: string, lastActivityAt: string, parentAgentId: string | null, pid: number | null,
 *   pendingPermissions: string[], providerAvailable: boolean
 * }} Agent
 * @typedef {{
 *   agentId: string, provider: string, sessionId: string | null, pid: number | null, rssBytes: number | null, measuredProcesses: number | null,
 *   family: string[], idleSince: string, eligibleAt: string | null, state: string, blockers: MemberBlocker[],
 *   lastProbe: Probe | null
 * }} Runtime
 * @typedef {{ outcome: string, blockers: MemberBlocker[], state?: string, lastProbe?: Probe | null, error?: { _tag: string, message: string } }} CollectResult
 * @typedef {{ blockers: MemberBlocker[], veto: { agentId: string, outcome: string, message?: string } | null }} CloseStakes
 * @typedef {{ agentId: string, ended: CloseStakes }} ClosedRuntime
 * @typedef {{ category: string, agentId?: string, detail?: string }} RetirementBlocker
 * @typedef {{
 *   pid: number, port: number, packageVersion: string, idleTimeout: { value: string | null, millis: number | null, source: string },
 *   phase: string, idleSince: string, deadline: string | null, blockers: RetirementBlocker[]
 * }} DaemonStatus
 * @typedef {{
 *   turnId: string, state: string, acceptedAt: string, endedAt: string | null, reply: string | null,
 *   text: string, error: { _tag?: string, message?: string } | null
 * }} Turn
 * @typedef {{ pid: number, readyAt: number, expiring: boolean, rssBytes: number | null, measuredProcesses: number | null }} WarmProcess
 * @typedef {{ provider: string, target: number, ready: WarmProcess[], starting: number, lastFailure: string | null, retryAt: number | null }} WarmReserve
 * @typedef {{
 *   budget: { high: number | null, low: number | null, minAvailable: number | null, maxResident: number | null },
 *   residentBytes: number, residentRuntimes: number, unmeasuredRuntimes: number, availableBytes: number | null,
 *   pressure: { since: string, causes: string[] } | null, episodes: number,
 *   held: { agentId: string, rssBytes: number | null, veto: string | null, blockers: MemberBlocker[] }[]
 * }} Memory
 * @typedef {import("./common.js").Outcome} Outcome
 */

/** The home's name when the hub serves this page (`/homes/NAME/`); its API is the hub's forwarding. */
const homeMatch = /^\/homes\/([^/]+)\//.exec(location.pathname)
const base = homeMatch === null ? "/v1" : `/v1/homes/${homeMatch[1]}`
const homeName = homeMatch === null ? null : decodeURIComponent(homeMatch[1] ?? "")

const main = document.getElementById("app")
const status = document.getElementById("status")
const title = document.getElementById("title")
const turnDialog = document.getElementById("turn-dialog")
const closeDialog = document.getElementById("close-dialog")

/**
 * `saved`: through a hub, why the home has no daemon, its agents then read from its saved store.
 * @type {{ daemon: DaemonStatus | null, agents: Agent[], runtimes: Map<string, Runtime>, reserves: WarmReserve[], memory: Memory | null, problem: Outcome | null, saved: string | null }}
 */
let shown = { daemon: null, agents: [], runtimes: new Map(), reserves: [], memory: null, problem: null, saved: null }

/**
 * @param {string} agentId
 */
const agentPath = (agentId) => `${base}/agents/${encodeURIComponent(agentId)}`

const { act, outcomeOf } = rowActions(failureOutcome, () => render(), () => poller.refreshNow())

/**
 * A probe's word, with its reason.
 * @param {{ outcome: string, message?: string }} probe
 */
const probeLine = (probe) =>
  probe.outcome === "vetoed"
    ? `vetoed by its provider: ${probe.message ?? "no reason given"}`
    : `the provider's probe ${probe.outcome === "timed-out" ? "timed out" : "failed"}${probe.message === undefined ? "" : `: ${probe.message}`}`

/**
 * @param {string} agentId
 */
const collect = (agentId) =>
  act(agentId, async () => {
    /** @type {CollectResult} */
    const result = await api(`${base}/runtimes/${encodeURIComponent(agentId)}/collect`, { method: "POST" })
    if (result.outcome === "collected") return { kind: "ok", text: "Collected: released; the next prompt resumes its session." }
    if (result.outcome === "failed") {
      const words = problemWords(result.error?._tag ?? "", result.error?.message ?? "")
      return { kind: "error", text: `Not collected: ${words.text}`, details: words.details }
    }
    // The reasons, worded as the row's state words them: the row shows each reason it still has once (see agentRow).
    const details = [
      ...result.blockers.map((blocker) => reasonLine(blocker, agentId)),
      ...(result.lastProbe === undefined || result.lastProbe === null ? [] : [probeLine(result.lastProbe)])
    ]
    return { kind: "refused", text: "Not collected: it stays resident.", details }
  })

/**
 * What a close of an agent's runtime ends, one line each: its blockers, then its provider's refusal and reason.
 * @param {CloseStakes} stakes
 * @param {string} agentId
 */
const stakesLines = (stakes, agentId) => [
  ...stakes.blockers.map((blocker) => reasonLine(blocker, agentId)),
  ...(stakes.veto === null ? [] : [probeLine(stakes.veto)])
]

/**
 * @param {unknown} value
 * @returns {value is MemberBlocker}
 */
const isMemberBlocker = (value) =>
  typeof value === "object" && value !== null && "agentId" in value && typeof value.agentId === "string" &&
  "kind" in value && typeof value.kind === "string"

/**
 * @param {unknown} value
 * @returns {value is NonNullable<CloseStakes["veto"]>}
 */
const isRefusal = (value) =>
  typeof value === "object" && value !== null && "agentId" in value && typeof value.agentId === "string" &&
  "outcome" in value && typeof value.outcome === "string"

/**
 * The stakes a refused close names (its problem body), read defensively.
 * @param {Record<string, unknown>} body
 * @returns {CloseStakes}
 */
const refusedStakes = (body) => {
  const blockers = body["blockers"]
  const veto = body["veto"]
  return { blockers: Array.isArray(blockers) ? blockers.filter(isMemberBlocker) : [], veto: isRefusal(veto) ? veto : null }
}

/**
 * Close asks the daemon plainly first: a runtime with nothing to lose is closed. One with work (a
 * blocker, its provider's veto) is refused, and the refusal's list goes into a confirmation whose
 * own button alone closes it by force; cancel leaves everything as it was.
 * @param {string} agentId
 */
const close = (agentId) =>
  act(agentId, async () => {
    try {
      await api(`${agentPath(agentId)}/close`, { method: "POST" })
      return { kind: "ok", text: "Closed: its runtime is released and the agent kept." }
    } catch (error) {
      if (!(error instanceof ApiError) || error.tag !== "RuntimeCloseRefused") throw error
      const stakes = refusedStakes(error.body)
      confirmClose(agentId, stakes)
      return { kind: "refused", text: "Not closed: that would end its work.", details: stakesLines(stakes, agentId) }
    }
  })

/**
 * The confirmation names the agent and each piece of work the close would end.
 * @param {string} agentId
 * @param {CloseStakes} stakes
 */
const confirmClose = (agentId, stakes) => {
  if (!(closeDialog instanceof HTMLDialogElement)) return
  closeDialog.querySelector("[data-close-text]")?.replaceChildren(
    "Close the runtime of ",
    h("strong", { class: "mono" }, agentId),
    "? It still has work, which the close ends:"
  )
  closeDialog.querySelector("[data-close-stakes]")?.replaceChildren(...stakesLines(stakes, agentId).map((line) => h("li", {}, line)))
  const confirm = closeDialog.querySelector("[data-close-confirm]")
  const cancel = closeDialog.querySelector("[data-close-cancel]")
  if (!(confirm instanceof HTMLButtonElement) || !(cancel instanceof HTMLButtonElement)) return
  confirm.onclick = () => {
    closeDialog.close()
    void act(agentId, async () => {
      /** @type {ClosedRuntime} */
      const closed = await api(`${agentPath(agentId)}/close?force=true`, { method: "POST" })
      const ended = stakesLines(closed.ended, agentId)
      return ended.length === 0
        ? { kind: "ok", text: "Closed: its runtime is released and the agent kept." }
        : { kind: "ok", text: "Closed by force: its runtime is released and the agent kept; it ended:", details: ended }
    })
  }
  cancel.onclick = () => closeDialog.close()
  closeDialog.showModal()
}

/**
 * @param {string} agentId
 * @param {string} permissionId
 * @param {boolean} allow
 */
const answer = (agentId, permissionId, allow) =>
  act(agentId, async () => {
    await api(`${agentPath(agentId)}/permissions/${encodeURIComponent(permissionId)}`, { method: "POST", body: { allow } })
    return { kind: "ok", text: `Permission ${permissionId} ${allow ? "allowed" : "denied"}.` }
  })

/**
 * Shows an agent's recent turns; each opens its output.
 * @param {Agent} agent
 */
const openTurns = async (agent) => {
  if (!(turnDialog instanceof HTMLDialogElement)) return
  const body = turnDialog.querySelector("[data-turn-body]")
  const heading = turnDialog.querySelector("[data-turn-title]")
  if (body === null || heading === null) return
  heading.textContent = `Turns of ${agent.agentId}`
  body.replaceChildren(h("p", { class: "muted" }, "Loading…"))
  if (!turnDialog.open) turnDialog.showModal()
  try {
    /** @type {Turn[]} */
    const turns = await api(`${agentPath(agent.agentId)}/turns`)
    body.replaceChildren(
      turns.length === 0
        ? h("p", { class: "muted" }, "No turn yet.")
        : h(
          "ul",
          { class: "turns" },
          turns.map((turn) =>
            h(
              "li",
              { "data-turn": turn.turnId },
              h("button", { type: "button", class: "link prompt-line", title: turn.text, onclick: () => showTurn(agent, turn) }, promptLine(turn.text)),
              h("span", { class: "muted" }, ` · ${turn.state} · `),
              h("time", { class: "muted", datetime: turn.acceptedAt, title: localTime(turn.acceptedAt) }, relative(turn.acceptedAt))
            )
          )
        )
    )
  } catch (error) {
    body.replaceChildren(h("div", {}, outcomeElement(failureOutcome(error))))
  }
}

/**
 * @param {Agent} agent
 * @param {Turn} turn
 */
const showTurn = (agent, turn) => {
  if (!(turnDialog instanceof HTMLDialogElement)) return
  const body = turnDialog.querySelector("[data-turn-body]")
  const heading = turnDialog.querySelector("[data-turn-title]")
  if (body === null || heading === null) return
  heading.replaceChildren("Turn ", idElement(turn.turnId), ` · ${turn.state}`)
  body.replaceChildren(h(
    "div",
    {},
    h("p", { class: "muted" }, `accepted ${localTime(turn.acceptedAt)}`, turn.endedAt === null ? "" : ` · ended ${localTime(turn.endedAt)}`),
    turn.error === null ? null : outcomeElement({ kind: "error", ...problemWords(turn.error._tag ?? "", turn.error.message ?? "") }),
    h("div", { class: "muted" }, "Prompt"),
    h("pre", { class: "prompt" }, turn.text),
    h("div", { class: "muted" }, "Reply"),
    h("pre", { class: "output", "data-turn-output": "" }, turn.reply ?? "(no reply)"),
    h("button", { type: "button", onclick: () => void openTurns(agent) }, "All turns")
  ))
}

/** Blockers that mean the agent itself is at work (rather than held for someone else). */
const workingKinds = new Set([
  "lifecycle-not-idle",
  "foreground-turn",
  "queued-prompt",
  "pending-replacement",
  "permission-response-in-flight",
  "lifecycle-operation",
  "foreground-mutation",
  "undrained-events",
  "running-subagents"
])

/**
 * A blocker as a reason: what it means, whose (when another member of the family), and its detail.
 * @param {MemberBlocker} blocker
 * @param {string} agentId the row's agent
 */
const reasonLine = (blocker, agentId) =>
  `${blocker.agentId === agentId ? "" : `its family member ${blocker.agentId}: `}${blockerWord(blocker.kind)}` +
  (blocker.detail === undefined ? "" : ` (${blocker.detail})`)

/**
 * One state per agent, in a word, and what it means: released; working; waiting for a permission
 * answer; idle (and when it is released); or kept resident, because of each reason named.
 * @typedef {{ word: string, badge: string, when: Node | null, reasons: HTMLElement[] }} AgentState
 * @param {Agent} agent
 * @param {Runtime | undefined} runtime
 * @returns {AgentState}
 */
const stateOf = (agent, runtime) => {
  if (!agent.resident) return { word: "released", badge: "released", when: h("div", { class: "muted" }, "its next prompt resumes it"), reasons: [] }
  if (runtime === undefined) return { word: "resident", badge: "running", when: null, reasons: [] }
  const reasons = [
    ...runtime.blockers.map((b) => h("li", { class: "blocker" }, reasonLine(b, agent.agentId))),
    ...(runtime.state === "collection-disabled" ? [h("li", {}, "releasing idle runtimes is turned off (agents.idleRuntimeCleanup)")] : []),
    ...(runtime.state === "not-resumable" && !runtime.blockers.some((b) => b.kind === "not-resumable")
      ? [h("li", {}, blockerWord("not-resumable"))]
      : []),
    ...(runtime.lastProbe === null
      ? []
      : [h(
        "li",
        { class: `probe probe-${runtime.lastProbe.outcome}`, "data-probe": runtime.lastProbe.outcome, "data-reason": probeLine(runtime.lastProbe) },
        probeLine(runtime.lastProbe),
        refusedSinceElement(runtime.lastProbe.outcome, runtime.lastProbe.since)
      )])
  ]
  const own = runtime.blockers.filter((b) => b.agentId === agent.agentId)
  if (runtime.state === "blocked" && own.some((b) => workingKinds.has(b.kind))) return { word: "working", badge: "running", when: null, reasons }
  if (runtime.state === "blocked" && own.some((b) => b.kind === "pending-permission")) {
    return { word: "waiting for permission", badge: "blocked", when: null, reasons }
  }
  if (runtime.state === "idle") {
    return {
      word: "idle",
      badge: "idle",
      when: runtime.eligibleAt === null ? null : h("div", { class: "muted" }, "releases in ", countdownElement(runtime.eligibleAt)),
      reasons
    }
  }
  return { word: "kept resident", badge: "vetoed", when: null, reasons }
}

/**
 * The state cell: the word, when it is released or why it stays, and the last action's outcome
 * (without the reasons the cell already shows, so a refusal does not say them twice).
 * @param {Agent} agent
 * @param {Runtime | undefined} runtime
 */
const stateCell = (agent, runtime) => {
  const state = stateOf(agent, runtime)
  // A reason's own words (without "vetoed since …"), as an action's outcome would list it.
  const shownReasons = new Set(state.reasons.map((reason) => reason.dataset["reason"] ?? reason.textContent ?? ""))
  const outcome = outcomeOf(agent.agentId)
  const unshown = outcome?.details?.filter((line) => typeof line !== "string" || !shownReasons.has(line))
  const told = outcome === undefined || unshown === undefined || unshown.length === outcome.details?.length
    ? outcome
    : { ...outcome, text: unshown.length === 0 ? `${outcome.text.replace(/\.$/, "")}, because of what is listed above.` : outcome.text, details: unshown }
  return h(
    "td",
    { class: "state" },
    h("span", { class: `badge badge-${state.badge}`, "data-state-word": state.word, "data-residency": runtime?.state ?? "released" }, state.word),
    state.when,
    state.reasons.length === 0
      ? null
      : h("div", { class: "because" }, state.word === "kept resident" ? "because:" : "", h("ul", { class: "blockers" }, state.reasons)),
    outcomeElement(told)
  )
}

/**
 * An agent's own labels as `key=value` chips; the daemon's `quiesce.*` labels (a parent, say) are
 * shown in their own words elsewhere.
 * @param {Record<string, string>} labels
 */
const labelList = (labels) => {
  const own = Object.entries(labels).filter(([key]) => !key.startsWith("quiesce."))
  return own.length === 0 ? null : h(
    "div",
    { class: "labels" },
    own.map(([key, value]) => h("span", { class: "label", "data-label": key, title: `${key}=${value}` }, `${key}=${value}`))
  )
}

/**
 * @param {Agent} agent
 */
const agentRow = (agent) => {
  const runtime = shown.runtimes.get(agent.agentId)
  return h(
    "tr",
    { class: agent.resident ? "resident" : "released", "data-agent": agent.agentId },
    h(
      "td",
      { class: "agent" },
      h("div", { class: "name" }, idElement(agent.agentId)),
      h("div", { class: "muted path", title: agent.cwd }, agent.cwd),
      agent.parentAgentId === null ? null : h("div", { class: "muted" }, "child of ", idElement(agent.parentAgentId)),
      labelList(agent.labels)
    ),
    h("td", {}, agent.provider, agent.providerAvailable ? null : h("div", { class: "failure" }, "not configured")),
    h("td", { class: "session" }, agent.sessionId === null ? "—" : idElement(agent.sessionId)),
    stateCell(agent, runtime),
    h("td", { class: "number" }, runtime === undefined ? "—" : formatBytes(runtime.rssBytes)),
    h(
      "td",
      { class: "time" },
      runtime === undefined
        // Kept counting between reads (which, following the events, come only every 30 s when nothing happens).
        ? h("time", { datetime: agent.lastActivityAt, title: localTime(agent.lastActivityAt), "data-relative": agent.lastActivityAt }, relative(agent.lastActivityAt))
        : h("time", { datetime: runtime.idleSince, title: localTime(runtime.idleSince), "data-relative": runtime.idleSince }, relative(runtime.idleSince))
    ),
    h(
      "td",
      {},
      h(
        "div",
        { class: "actions" },
        agent.resident ? h("button", { type: "button", onclick: () => void collect(agent.agentId) }, "Collect now") : null,
        // Destructive: unlike Collect now, it can end work (after a confirmation naming it).
        agent.resident ? h("button", { type: "button", class: "danger", onclick: () => void close(agent.agentId) }, "Close") : null,
        h("button", { type: "button", onclick: () => prompts?.choose(agent.agentId) }, "Prompt"),
        h("button", { type: "button", onclick: () => void openTurns(agent) }, "Turns"),
        agent.pendingPermissions.map((permissionId) =>
          h(
            "div",
            { class: "permission" },
            h("span", {}, "permission ", idElement(permissionId)),
            h("button", { type: "button", onclick: () => void answer(agent.agentId, permissionId, true) }, "Allow"),
            h("button", { type: "button", class: "danger", onclick: () => void answer(agent.agentId, permissionId, false) }, "Deny")
          )
        )
      )
    )
  )
}

/**
 * @param {DaemonStatus} daemon
 */
const daemonSummary = (daemon) =>
  h(
    "p",
    { class: "summary" },
    `pid ${daemon.pid} · ${daemon.packageVersion} · idle timeout `,
    h("strong", {}, idleTimeoutText(daemon.idleTimeout)),
    daemon.phase === "retiring"
      ? h("span", {}, " · ", h("span", { class: "badge badge-retiring" }, "retiring"))
      : daemon.deadline === null
      ? ""
      : h("span", {}, " · retires in ", countdownElement(daemon.deadline)),
    daemon.blockers.length === 0
      ? ""
      : h("span", {}, " · kept by: ", daemon.blockers.flatMap((b, index) => index === 0 ? [blockerLine(b)] : ["; ", blockerLine(b)]))
  )

/**
 * The resident runtimes' memory against the budget (docs/collector.md), and a pressure episode under way.
 * @param {Memory} memory
 */
const memorySummary = (memory) =>
  h(
    "p",
    { class: "summary", "data-memory": "" },
    "memory ",
    h("strong", {}, formatBytes(memory.residentBytes)),
    memory.budget.high === null || memory.budget.low === null
      ? ""
      : ` of ${formatBytes(memory.budget.high)} (released down to ${formatBytes(memory.budget.low)})`,
    memory.budget.maxResident === null ? "" : ` · ${memory.residentRuntimes} of at most ${memory.budget.maxResident} runtimes`,
    memory.budget.minAvailable === null
      ? ""
      : ` · ${memory.availableBytes === null ? "available unknown" : `${formatBytes(memory.availableBytes)} available`}, floor ${formatBytes(memory.budget.minAvailable)}`,
    memory.unmeasuredRuntimes === 0 ? "" : ` · ${memory.unmeasuredRuntimes} unmeasured`,
    " · ",
    memory.pressure === null
      ? "no pressure"
      : h("span", { class: "badge badge-retiring" }, `under pressure (${memory.pressure.causes.join(", ")}) since ${relative(memory.pressure.since)}`),
    memory.held.length === 0
      ? ""
      : ` · nothing more can be released: held by ${memory.held.map((holder) =>
        `${holder.agentId} (${holder.rssBytes === null ? "unmeasured" : formatBytes(holder.rssBytes)}${holder.veto === null ? "" : `, vetoed: ${holder.veto}`}${
          holder.blockers.length === 0 ? "" : `, ${holder.blockers.map((b) => b.kind).join(", ")}`
        })`
      ).join(", ")}`
  )

/**
 * One provider's warm reserve: processes started before any agent needs them, and their memory.
 * @param {WarmReserve} reserve
 */
const reserveRow = (reserve) => {
  const measured = reserve.ready.filter((process) => process.rssBytes !== null)
  const bytes = measured.reduce((sum, process) => sum + (process.rssBytes ?? 0), 0)
  return h(
    "tr",
    { "data-reserve": reserve.provider },
    h("td", {}, reserve.provider),
    h("td", {}, `${reserve.ready.length} ready of ${reserve.target}${reserve.starting === 0 ? "" : `, ${reserve.starting} starting`}`),
    h("td", { class: "mono" }, reserve.ready.map((process) => String(process.pid)).join(", ") || "-"),
    h("td", {}, measured.length === 0 ? "-" : formatBytes(bytes)),
    h("td", {}, reserve.lastFailure ?? "-")
  )
}

/** The agents table's columns. */
const agentColumns = ["Agent", "Provider", "Session", "State", "Memory", "Idle since", ""]

const render = () => {
  prompts?.setAgents(shown.agents.map((agent) => agent.agentId))
  if (main === null) return
  const resident = shown.agents.filter((agent) => agent.resident).length
  main.replaceChildren(h(
    "div",
    {},
    shown.problem === null ? null : h("div", { "data-problem": "" }, outcomeElement(shown.problem)),
    shown.saved === null ? null : h("div", { class: "outcome outcome-refused", role: "status", "data-saved-store": "" }, shown.saved),
    shown.daemon === null ? null : daemonSummary(shown.daemon),
    shown.memory === null ? null : memorySummary(shown.memory),
    shown.agents.length === 0
      ? h("p", { class: "empty" }, shown.problem === null ? "No agent yet: create one with quiesce agents create." : "")
      : h(
        "div",
        {},
        h("p", { class: "muted" }, `${shown.agents.length} agents, ${resident} resident`),
        table(
          "agents",
          agentColumns,
          // Each agent, then its live turns (what runs now, and the last ended) below it.
          shown.agents.flatMap((agent) => [agentRow(agent), live.row(agent.agentId, agentColumns.length)].filter((row) => row !== null))
        )
      ),
    shown.reserves.length === 0
      ? null
      : h(
        "div",
        {},
        h("h2", {}, "Warm reserve"),
        h("p", { class: "muted" }, "Started processes without a session: the next create or resume of their provider takes one."),
        table("reserves", ["Provider", "Processes", "Pids", "Memory", "Last failure"], shown.reserves.map(reserveRow))
      )
  ))
}

/**
 * Why a home served through the hub shows its saved agents: its daemon is retired or force-stopped.
 * @param {string} tag
 */
const savedStoreLine = (tag) =>
  tag === "HomeRetired"
    ? `The home ${homeName} is retired: its daemon is not running, so its agents are read from its saved store (read-only). Its next prompt starts it.`
    : tag === "HomeStopped"
    ? `The home ${homeName} is force-stopped: its agents are read from its saved store (read-only). quiesce daemons resume ${homeName} starts it again.`
    : null

/**
 * The turns the page shows running are read with the rest: without a stream that is how their end,
 * reply and error show; with one, it covers what happened before the stream opened.
 */
const readUnendedTurns = () => Promise.all(live.unended().map(({ agentId, turnId }) => readTurn(agentId, turnId)))

/**
 * Reads one turn into the page's live turns.
 * @param {string} agentId
 * @param {string} turnId
 */
const readTurn = async (agentId, turnId) => {
  try {
    /** @type {Turn} */
    const turn = await api(`${agentPath(agentId)}/turns/${encodeURIComponent(turnId)}`)
    live.update(agentId, turn)
  } catch {
    // Read again at the next round while it has not ended; the agents' own read says what is wrong.
  }
}

const refresh = async () => {
  await readUnendedTurns()
  try {
    /** @type {Promise<DaemonStatus>} */
    const daemonRead = api(`${base}/daemon`)
    /** @type {Promise<Agent[]>} */
    const agentsRead = api(`${base}/agents`)
    /** @type {Promise<Runtime[]>} */
    const runtimesRead = api(`${base}/runtimes`)
    /** @type {Promise<WarmReserve[]>} */
    const reservesRead = api(`${base}/warm-reserve`)
    /** @type {Promise<Memory | null>} */
    // A daemon older than the memory budget has no such route: it has no budget.
    const memoryRead = api(`${base}/memory`).catch(() => null)
    const [daemon, agents, runtimes, reserves, memory] = await Promise.all([daemonRead, agentsRead, runtimesRead, reservesRead, memoryRead])
    shown = { daemon, agents, runtimes: new Map(runtimes.map((runtime) => [runtime.agentId, runtime])), reserves, memory, problem: null, saved: null }
    if (status !== null) status.textContent = `Updated ${new Date().toLocaleTimeString()}`
  } catch (error) {
    // Through a hub, a home without a daemon answers with what it is (a read never starts its
    // daemon), and the hub reads its agents from its saved store.
    const saved = error instanceof ApiError ? savedStoreLine(error.tag) : null
    /** @type {Agent[] | null} */
    const agents = saved === null ? null : await api(`${base}/agents`).then((/** @type {Agent[]} */ list) => list, () => null)
    /** @type {Outcome} */
    const problem = { ...failureOutcome(error), kind: "refused" }
    shown = agents === null
      ? { daemon: null, agents: [], runtimes: new Map(), reserves: [], memory: null, problem, saved: null }
      : { daemon: null, agents, runtimes: new Map(), reserves: [], memory: null, problem: null, saved }
    if (status !== null) status.textContent = `Updated ${new Date().toLocaleTimeString()}`
  }
  render()
}

if (title !== null && homeName !== null) {
  title.replaceChildren(h("a", { href: "/" }, "Quiesce hub"), " › ", homeName)
  document.title = `${homeName} · Quiesce`
  // The session here is the hub's.
  document.getElementById("signed-out")?.replaceChildren(`The session ended: get a new link with quiesce --hub ${homeName} open.`)
}

turnDialog?.querySelector("[data-turn-close]")?.addEventListener("click", () => {
  if (turnDialog instanceof HTMLDialogElement) turnDialog.close()
})

document.getElementById("account")?.append(signOutButton())

/** The page's live turns, from the events (or, without a stream, from reading them). */
const live = makeLiveTurns()

/** How often the page reads everything: every 2 s without a stream, every 30 s (memory, say) while it follows one. */
const pollMillis = { polling: 2_000, streaming: 30_000 }

/** After an event that changes the agents' states, the page reads them once, this long after the last such event. */
const eventDebounceMillis = 250

/** @type {ReturnType<typeof setTimeout> | undefined} */
let refreshSoon
const refreshAfterEvents = () => {
  if (refreshSoon !== undefined) clearTimeout(refreshSoon)
  refreshSoon = setTimeout(() => {
    refreshSoon = undefined
    void poller.refreshNow()
  }, eventDebounceMillis)
}

/** Output shown at most once a frame, however fast it comes. */
let renderQueued = false
const renderSoon = () => {
  if (renderQueued) return
  renderQueued = true
  requestAnimationFrame(() => {
    renderQueued = false
    render()
  })
}

/** @type {ReturnType<typeof promptBox> | null} */
const prompts = (() => {
  const form = document.getElementById("prompt-form")
  if (!(form instanceof HTMLFormElement)) return null
  return promptBox({
    form,
    // Per page: a daemon's own, or a home's through the hub.
    storageKey: `quiesce.pendingPrompt:${base}`,
    send: (prompt) => api(`${agentPath(prompt.agentId)}/prompts`, { method: "POST", body: { text: prompt.text, clientMessageId: prompt.clientMessageId } }),
    sent: (prompt, turn) => {
      // A turn that ended already (a repeated prompt's, say) has its reply in the journal, not in events to come: read first.
      const read = turn.state === "running" ? Promise.resolve() : readTurn(prompt.agentId, turn.turnId)
      void read.then(() => {
        live.follow(prompt.agentId, turn.turnId, prompt.text, turn.state)
        render()
        return poller.refreshNow()
      })
    }
  })
})()

const stream = followWhileVisible(`${base}/events`, {
  // Following: what happened before it opened is read once, then only what the events say changed.
  onOpen: () => void poller.refreshNow(),
  onEvent: (event) => {
    const change = live.apply(event)
    if (change === null) return
    if (change.change === "agents") {
      renderSoon()
      refreshAfterEvents()
    } else if (change.change === "turns" || change.agentId === undefined || change.turnId === undefined) renderSoon()
    else if (!live.showOutput(change.agentId, change.turnId)) renderSoon()
  },
  // Not following (a hub that does not relay the stream, a daemon that stopped): the page polls every 2 s again.
  onClosed: (reason) => {
    if (reason !== "hidden") void poller.refreshNow()
  }
})

const poller = pollWhileVisible(refresh, () => stream.isOpen() ? pollMillis.streaming : pollMillis.polling)
startTicking()
