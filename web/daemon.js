// @ts-check
// A daemon's agents and live runtimes: why each is still resident (its blockers, its provider's
// veto and reason, a failed probe), and the actions on it. Served by the daemon at `/`, and by a
// hub at `/homes/NAME/`, whose requests the hub forwards to that home's daemon.
import {
  api,
  ApiError,
  blockerLine,
  countdownElement,
  failureOutcome,
  formatBytes,
  h,
  localTime,
  outcomeElement,
  pollWhileVisible,
  refusedSinceElement,
  relative,
  rowActions,
  signOutButton,
  startTicking,
  table
} from "./common.js"

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

/** @type {{ daemon: DaemonStatus | null, agents: Agent[], runtimes: Map<string, Runtime>, reserves: WarmReserve[], memory: Memory | null, problem: string | null }} */
let shown = { daemon: null, agents: [], runtimes: new Map(), reserves: [], memory: null, problem: null }

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
    if (result.outcome === "failed") return { kind: "error", text: `Not collected: ${result.error?._tag}: ${result.error?.message}` }
    const details = [
      ...result.blockers.map(blockerLine),
      ...(result.lastProbe === undefined || result.lastProbe === null ? [] : [probeLine(result.lastProbe)])
    ]
    return { kind: "refused", text: `Not collected: it is ${result.state ?? "retained"}.`, details }
  })

/**
 * What a close ends, one line each: its blockers, then its provider's refusal and reason.
 * @param {CloseStakes} stakes
 */
const stakesLines = (stakes) => [
  ...stakes.blockers.map(blockerLine),
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
      return { kind: "refused", text: "Not closed: that would end its work.", details: stakesLines(stakes) }
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
  closeDialog.querySelector("[data-close-stakes]")?.replaceChildren(...stakesLines(stakes).map((line) => h("li", {}, line)))
  const confirm = closeDialog.querySelector("[data-close-confirm]")
  const cancel = closeDialog.querySelector("[data-close-cancel]")
  if (!(confirm instanceof HTMLButtonElement) || !(cancel instanceof HTMLButtonElement)) return
  confirm.onclick = () => {
    closeDialog.close()
    void act(agentId, async () => {
      /** @type {ClosedRuntime} */
      const closed = await api(`${agentPath(agentId)}/close?force=true`, { method: "POST" })
      const ended = stakesLines(closed.ended)
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
              {},
              h("button", { type: "button", class: "link", onclick: () => showTurn(agent, turn) }, turn.turnId),
              ` ${turn.state} · `,
              h("time", { datetime: turn.acceptedAt, title: localTime(turn.acceptedAt) }, relative(turn.acceptedAt))
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
  heading.textContent = `Turn ${turn.turnId} (${turn.state})`
  body.replaceChildren(h(
    "div",
    {},
    h("p", { class: "muted" }, `accepted ${localTime(turn.acceptedAt)}`, turn.endedAt === null ? "" : ` · ended ${localTime(turn.endedAt)}`),
    turn.error === null ? null : h("div", { class: "outcome outcome-error" }, `${turn.error._tag ?? "error"}: ${turn.error.message ?? ""}`),
    h("div", { class: "muted" }, "Prompt"),
    h("pre", { class: "prompt" }, turn.text),
    h("div", { class: "muted" }, "Reply"),
    h("pre", { class: "output", "data-turn-output": "" }, turn.reply ?? "(no reply)"),
    h("button", { type: "button", onclick: () => void openTurns(agent) }, "All turns")
  ))
}

/**
 * What keeps a runtime resident, by name: each blocker, the provider's veto and its reason, a failed probe.
 * @param {Runtime | undefined} runtime
 */
const residency = (runtime) => {
  if (runtime === undefined) return h("span", { class: "muted" }, "—")
  const lines = [
    ...runtime.blockers.map((b) => h("li", { class: "blocker" }, blockerLine(b))),
    ...(runtime.lastProbe === null ? [] : [h(
      "li",
      { class: `probe probe-${runtime.lastProbe.outcome}`, "data-probe": runtime.lastProbe.outcome },
      probeLine(runtime.lastProbe),
      refusedSinceElement(runtime.lastProbe.outcome, runtime.lastProbe.since)
    )])
  ]
  return h(
    "div",
    {},
    h("span", { class: `badge badge-${runtime.state}`, "data-residency": runtime.state }, runtime.state),
    lines.length === 0 ? null : h("ul", { class: "blockers" }, lines)
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
      {},
      h("div", { class: "name mono" }, agent.agentId),
      h("div", { class: "muted path" }, agent.cwd),
      agent.parentAgentId === null ? null : h("div", { class: "muted" }, `child of ${agent.parentAgentId}`)
    ),
    h("td", {}, agent.provider, agent.providerAvailable ? null : h("div", { class: "failure" }, "not configured")),
    h("td", { class: "mono" }, agent.sessionId ?? "—"),
    h(
      "td",
      {},
      h("span", { class: `badge badge-${agent.resident ? "running" : "retired"}` }, agent.resident ? "resident" : "released"),
      h("div", { class: "muted" }, agent.lifecycle)
    ),
    h("td", { class: "number" }, runtime === undefined ? "—" : formatBytes(runtime.rssBytes)),
    h(
      "td",
      {},
      runtime === undefined
        ? h("time", { datetime: agent.lastActivityAt, title: localTime(agent.lastActivityAt) }, relative(agent.lastActivityAt))
        : h("time", { datetime: runtime.idleSince, title: localTime(runtime.idleSince) }, relative(runtime.idleSince))
    ),
    h("td", {}, runtime === undefined || runtime.eligibleAt === null ? "—" : h("span", {}, "in ", countdownElement(runtime.eligibleAt))),
    h("td", {}, residency(runtime), outcomeElement(outcomeOf(agent.agentId))),
    h(
      "td",
      {},
      h(
        "div",
        { class: "actions" },
        agent.resident ? h("button", { type: "button", onclick: () => void collect(agent.agentId) }, "Collect now") : null,
        // Destructive: unlike Collect now, it can end work (after a confirmation naming it).
        agent.resident ? h("button", { type: "button", class: "danger", onclick: () => void close(agent.agentId) }, "Close") : null,
        h("button", { type: "button", onclick: () => void openTurns(agent) }, "Turns"),
        agent.pendingPermissions.map((permissionId) =>
          h(
            "div",
            { class: "permission" },
            h("span", { class: "mono" }, `permission ${permissionId}`),
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
    h("strong", {}, daemon.idleTimeout.millis === null ? "none" : `${daemon.idleTimeout.value}`),
    ` (${daemon.idleTimeout.source}) · `,
    daemon.phase === "retiring"
      ? h("span", { class: "badge badge-retiring" }, "retiring")
      : daemon.deadline === null
      ? "no idle timer"
      : h("span", {}, "retires in ", countdownElement(daemon.deadline)),
    daemon.blockers.length === 0 ? "" : ` · kept by: ${daemon.blockers.map(blockerLine).join("; ")}`
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

const render = () => {
  if (main === null) return
  const resident = shown.agents.filter((agent) => agent.resident).length
  main.replaceChildren(h(
    "div",
    {},
    shown.problem === null ? null : h("div", { class: "outcome outcome-refused", role: "status", "data-problem": "" }, shown.problem),
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
          ["Agent", "Provider", "Session", "State", "Memory", "Idle since", "Releasable", "Why resident", ""],
          shown.agents.map(agentRow)
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

const refresh = async () => {
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
    shown = { daemon, agents, runtimes: new Map(runtimes.map((runtime) => [runtime.agentId, runtime])), reserves, memory, problem: null }
    if (status !== null) status.textContent = `Updated ${new Date().toLocaleTimeString()}`
  } catch (error) {
    // Through a hub, a retired home answers with what it is (a read never starts its daemon).
    const text = error instanceof ApiError ? `${error.tag}: ${error.message}` : failureOutcome(error).text
    shown = { daemon: null, agents: [], runtimes: new Map(), reserves: [], memory: null, problem: text }
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

const poller = pollWhileVisible(refresh, 2000)
startTicking()
