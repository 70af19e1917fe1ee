// @ts-check
// The hub's resident inventory: one row per home, what its daemon armed and where it stands, and
// the operator's actions on the identity the row shows.
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
  refusedSinceElement,
  relative,
  rowActions,
  signOutButton,
  startTicking,
  table
} from "./common.js"

/**
 * @typedef {{ value: string | null, millis: number | null, source: string }} IdleTimeout
 * @typedef {{ category: string, agentId?: string, detail?: string, since?: string }} RetirementBlocker
 * @typedef {{
 *   residentBytes: number, residentRuntimes: number, unmeasuredResident: number,
 *   releasedBytes: number, releasedAgents: number, unmeasuredReleased: number
 * }} MemoryFigures
 * @typedef {MemoryFigures & { byProvider: (MemoryFigures & { provider: string })[], byLabel: (MemoryFigures & { label: string })[] }} MemoryTotals
 * @typedef {{ kind: string, message: string }} RetirementFailure
 * @typedef {{ at: string, trigger: string, outcome: string, blockers: RetirementBlocker[], failure: RetirementFailure | null }} Attempt
 * @typedef {{
 *   name: string, home: string, state: string, archived: boolean, pid: number | null, startTime: number | null,
 *   startedAt: string | null, instanceId: string | null, protocolVersion: number | null, compatible: boolean | null,
 *   packageVersion: string | null, idleTimeout: IdleTimeout | null, phase: string | null, deadline: string | null,
 *   blockers: string[], vetoes?: RetirementBlocker[], lastAttempt: Attempt | null, failure: RetirementFailure | null,
 *   memoryBytes: number | null, memoryTotals?: MemoryTotals, canRetire: boolean, note: string
 * }} DaemonRow
 * @typedef {{
 *   protocolVersion: number, hubDefaultIdleTimeout: { value: string, source: string }, daemons: DaemonRow[], memoryTotals?: MemoryTotals
 * }} Inventory
 * @typedef {{ agentId: string, provider: string, sessionId: string }} CollectedRuntime
 * @typedef {{ collected: CollectedRuntime[], failures: { agentId: string, error: { _tag: string, message: string } }[] }} SweepResult
 * @typedef {import("./common.js").Outcome} Outcome
 */

const main = document.getElementById("app")
const status = document.getElementById("status")
const dialog = document.getElementById("stop-dialog")

/** @type {Inventory | undefined} */
let shown

/**
 * A failed action; a refused retire now carries the blockers of that very attempt.
 * @param {unknown} error
 * @returns {Outcome}
 */
const refusal = (error) => {
  const outcome = failureOutcome(error)
  const listed = error instanceof ApiError ? error.body["blockers"] : undefined
  return Array.isArray(listed) && listed.length > 0
    ? { kind: "refused", text: "Retire now refused: it stays resident, kept by", details: listed.map(blockerLine) }
    : outcome
}

const { act, outcomeOf } = rowActions(refusal, () => render(), () => poller.refreshNow())

/**
 * @param {DaemonRow} row
 */
const identityOf = (row) => ({ pid: row.pid ?? 0, startTime: row.startTime, instanceId: row.instanceId ?? "" })

/**
 * @param {string} name
 */
const homePath = (name) => `/v1/daemons/${encodeURIComponent(name)}`

/**
 * @param {DaemonRow} row
 */
const retire = (row) =>
  act(row.name, async () => {
    /** @type {Attempt} */
    const attempt = await api(`${homePath(row.name)}/retire`, { method: "POST", body: identityOf(row) })
    return { kind: "ok", text: `Retired at ${localTime(attempt.at)}: its agents are saved; the next mutation brings it back.` }
  })

/**
 * Wake: starts the daemon of a retired or force-stopped home (the hub's resume, which also lifts a
 * force stop); its agents stay released until their next prompt resumes each.
 * @param {DaemonRow} row
 */
const wake = (row) =>
  act(row.name, async () => {
    /** @type {DaemonRow} */
    const woken = await api(`${homePath(row.name)}/resume`, { method: "POST" })
    return woken.state === "running"
      ? { kind: "ok", text: `Woken: its daemon runs${woken.pid === null ? "" : ` as pid ${woken.pid}`}; each agent resumes on its next prompt.` }
      : { kind: "error", text: `Not woken: the home is ${woken.state}.`, details: [woken.note] }
  })

/**
 * Collect idle: the home's daemon sweeps now, releasing each runtime idle for its idle period with
 * nothing to lose (no blocker, no veto); nothing that would be lost ends, so it asks nothing first.
 * @param {DaemonRow} row
 */
const collectIdle = (row) =>
  act(row.name, async () => {
    /** @type {SweepResult} */
    const swept = await api(`/v1/homes/${encodeURIComponent(row.name)}/sweep`, { method: "POST" })
    const failures = swept.failures.map((failure) => {
      const words = problemWords(failure.error._tag, failure.error.message)
      return h("span", {}, idElement(failure.agentId), `: ${[words.text, ...words.details].join(" ")}`)
    })
    const released = swept.collected.map((runtime) => h("span", {}, idElement(runtime.agentId), ` (${runtime.provider}) released`))
    if (failures.length > 0) {
      return { kind: "error", text: `Collected ${countOf(swept.collected.length)}; ${countOf(failures.length)} could not be released:`, details: [...released, ...failures] }
    }
    return swept.collected.length === 0
      ? { kind: "ok", text: "Nothing to collect: no runtime has been idle for its idle period with nothing keeping it." }
      : { kind: "ok", text: `Collected ${countOf(swept.collected.length)}: released, each resumes on its next prompt.`, details: released }
  })

/**
 * "1 idle agent", "3 idle agents".
 * @param {number} count
 */
const countOf = (count) => `${count} idle ${count === 1 ? "agent" : "agents"}`

/**
 * The confirmation names the home and the process; only its own button stops.
 * @param {DaemonRow} row
 */
const confirmStop = (row) => {
  if (!(dialog instanceof HTMLDialogElement)) return
  const text = dialog.querySelector("[data-stop-text]")
  if (text !== null) {
    text.replaceChildren(
      "Force stop the daemon of ",
      h("strong", {}, row.name),
      ` (${row.home}), pid `,
      h("strong", {}, String(row.pid)),
      "? Running turns, background work and finish watches may be interrupted, and the home stays stopped until you resume it."
    )
  }
  const confirm = dialog.querySelector("[data-stop-confirm]")
  const cancel = dialog.querySelector("[data-stop-cancel]")
  if (!(confirm instanceof HTMLButtonElement) || !(cancel instanceof HTMLButtonElement)) return
  confirm.onclick = () => {
    dialog.close()
    void act(row.name, async () => {
      /** @type {{ name: string, pid: number, killed: boolean, exited: boolean }} */
      const result = await api(`${homePath(row.name)}/stop`, {
        method: "POST",
        body: { identity: identityOf(row), confirm: `${row.name}:${row.pid}` }
      })
      return {
        kind: result.exited ? "ok" : "error",
        text: `Stopped pid ${result.pid}${result.killed ? " (killed after the grace)" : ""}` +
          (result.exited ? "." : ": its exit is not confirmed.")
      }
    })
  }
  cancel.onclick = () => dialog.close()
  dialog.showModal()
}

/**
 * @param {DaemonRow} row
 */
const actions = (row) =>
  h(
    "div",
    { class: "actions" },
    row.canRetire ? h("button", { type: "button", onclick: () => void retire(row) }, "Retire now") : null,
    row.pid !== null ? h("button", { type: "button", class: "danger", onclick: () => confirmStop(row) }, "Force stop") : null,
    row.state === "running" && !row.archived
      ? h("button", { type: "button", title: "Release its runtimes idle for their idle period", onclick: () => void collectIdle(row) }, "Collect idle")
      : null,
    (row.state === "stopped" || row.state === "retired") && !row.archived
      ? h("button", { type: "button", title: "Start its daemon (quiesce daemons resume)", onclick: () => void wake(row) }, "Wake")
      : null,
    row.state !== "stopped" ? h("a", { href: `/homes/${encodeURIComponent(row.name)}/` }, "Runtimes") : null
  )

/**
 * @param {IdleTimeout | null} timeout
 */
const timeoutText = (timeout) => timeout === null ? "—" : idleTimeoutText(timeout)

/** What each kind of failed retirement means. */
const retirementFailures = new Map([
  ["prepare_failed", "Its retirement could not be prepared; nothing was released and it serves on"],
  ["release_failed", "A runtime's release failed after the retirement began"],
  ["reader_drain_failed", "Requests in flight did not end in time"]
])

/**
 * @param {RetirementFailure} failure
 */
const retirementFailureText = (failure) => `${retirementFailures.get(failure.kind) ?? "Its retirement failed"}: ${failure.message}`

/**
 * @param {Attempt | null} attempt
 */
const attemptCell = (attempt) =>
  attempt === null ? "—" : h(
    "div",
    {},
    h("span", { class: `attempt attempt-${attempt.outcome}` }, `${attempt.outcome} (${attempt.trigger})`),
    " ",
    h("time", { datetime: attempt.at, title: localTime(attempt.at) }, relative(attempt.at)),
    attempt.blockers.length > 0 ? h("ul", { class: "blockers" }, attempt.blockers.map((b) => h("li", {}, blockerLine(b)))) : null,
    attempt.failure === null ? null : h("div", { class: "failure" }, retirementFailureText(attempt.failure))
  )

/** Categories a row's `vetoes` explain (whose, why, since when). */
const vetoCategories = new Set(["veto", "probe-failure"])

/**
 * What keeps a home resident: each category, and each provider's veto with its reason and since when.
 * @param {DaemonRow} row
 */
const keepsResident = (row) => {
  const vetoes = row.vetoes ?? []
  const items = [
    ...row.blockers.filter((category) => vetoes.length === 0 || !vetoCategories.has(category)).map((category) => h("li", { title: category }, blockerWord(category))),
    ...vetoes.map((veto) =>
      h("li", { class: "veto", "data-veto": veto.agentId ?? "" }, blockerLine(veto), refusedSinceElement(veto.category, veto.since))
    )
  ]
  return items.length === 0 ? h("span", { class: "muted" }, "none") : h("ul", { class: "blockers" }, items)
}

/**
 * Resident against released memory, in words.
 * @param {MemoryFigures} figures
 */
const figuresText = (figures) => {
  /** @param {number} n */
  const unmeasured = (n) => n === 0 ? "" : ` (${n} unmeasured)`
  return {
    resident: `${formatBytes(figures.residentBytes)} in ${figures.residentRuntimes} runtime${figures.residentRuntimes === 1 ? "" : "s"}` +
      unmeasured(figures.unmeasuredResident),
    released: `${formatBytes(figures.releasedBytes)} by ${figures.releasedAgents} agent${figures.releasedAgents === 1 ? "" : "s"}` +
      unmeasured(figures.unmeasuredReleased)
  }
}

/**
 * A home's memory resident against released.
 * @param {DaemonRow} row
 */
const homeMemory = (row) => {
  if (row.memoryTotals === undefined) return h("span", { class: "muted" }, "—")
  const text = figuresText(row.memoryTotals)
  return h(
    "div",
    { "data-home-memory": row.name },
    h("div", { "data-resident": "" }, `resident ${text.resident}`),
    h("div", { class: "muted", "data-released": "" }, `released ${text.released}`)
  )
}

/**
 * The homes' memory together: in all, per provider, per label.
 * @param {MemoryTotals} totals
 */
const totalsElement = (totals) => {
  /**
   * @param {string} kind
   * @param {string} name
   * @param {MemoryFigures} figures
   */
  const line = (kind, name, figures) => {
    const text = figuresText(figures)
    return h("tr", { "data-total": `${kind}:${name}` }, h("td", {}, kind === "all" ? name : `${kind} ${name}`), h("td", {}, text.resident), h("td", {}, text.released))
  }
  return h(
    "section",
    { class: "totals", "data-memory-totals": "" },
    h("h2", {}, "Memory resident and released"),
    h(
      "p",
      { class: "muted" },
      "Resident: what the homes' live runtimes hold now. Released: what the releases of their released agents gave back " +
        "(each one's size just before its release)."
    ),
    table("memory-totals", ["", "Resident", "Released"], [
      line("all", "all homes", totals),
      ...totals.byProvider.map((entry) => line("provider", entry.provider, entry)),
      ...totals.byLabel.map((entry) => line("label", entry.label, entry))
    ])
  )
}

/**
 * @param {DaemonRow} row
 */
const rowElement = (row) =>
  h(
    "tr",
    { class: `home state-${row.state}${row.archived ? " archived" : ""}`, "data-home": row.name },
    h(
      "td",
      {},
      h("div", { class: "name" }, row.name),
      h("div", { class: "muted path", title: row.home }, row.home),
      row.archived ? h("span", { class: "badge badge-archived" }, "archived") : null
    ),
    h(
      "td",
      {},
      h("span", { class: `badge badge-${row.state}`, "data-state": row.state }, row.state),
      row.phase === "retiring" ? h("span", { class: "badge badge-retiring" }, "retiring") : null,
      h("div", { class: "note" }, row.note),
      outcomeElement(outcomeOf(row.name))
    ),
    h(
      "td",
      {},
      row.pid === null ? "—" : h(
        "div",
        {},
        h("div", {}, `pid ${row.pid}`),
        row.startedAt === null
          ? null
          : h("div", { class: "muted" }, h("time", { datetime: row.startedAt, title: localTime(row.startedAt) }, `started ${relative(row.startedAt)}`)),
        h(
          "div",
          { class: row.compatible === false ? "incompatible" : "muted" },
          `protocol ${row.protocolVersion ?? "?"}${row.compatible === false ? " (incompatible)" : ""}`,
          row.packageVersion === null ? "" : ` · ${row.packageVersion}`
        )
      )
    ),
    h("td", {}, timeoutText(row.idleTimeout)),
    h(
      "td",
      {},
      row.deadline === null ? "—" : h("div", {}, "retires in ", countdownElement(row.deadline))
    ),
    h("td", {}, keepsResident(row)),
    h("td", {}, attemptCell(row.lastAttempt)),
    h("td", { class: "number" }, row.pid === null ? "—" : formatBytes(row.memoryBytes)),
    h("td", {}, homeMemory(row)),
    h("td", {}, actions(row))
  )

const render = () => {
  if (main === null || shown === undefined) return
  const inventory = shown
  main.replaceChildren(
    h(
      "p",
      { class: "summary" },
      "Hub default idle timeout: ",
      h("strong", { "data-hub-default": "" }, inventory.hubDefaultIdleTimeout.value),
      ` (${inventory.hubDefaultIdleTimeout.source}) · daemon protocol ${inventory.protocolVersion} · `,
      `${inventory.daemons.filter((row) => row.state === "running").length} of ${inventory.daemons.length} homes resident`
    ),
    inventory.daemons.length === 0
      ? h("p", { class: "empty" }, "The hub manages no home yet: add one with quiesce hub add NAME DIR.")
      : table(
        "inventory",
        ["Home", "State", "Process", "Idle timeout", "Deadline", "Keeps it resident", "Last attempt", "Memory", "Resident / released", ""],
        inventory.daemons.map(rowElement)
      ),
    ...(inventory.memoryTotals === undefined ? [] : [totalsElement(inventory.memoryTotals)])
  )
}

const refresh = async () => {
  try {
    shown = await api("/v1/daemons")
    if (status !== null) status.textContent = `Updated ${new Date().toLocaleTimeString()}`
    render()
  } catch (error) {
    if (status !== null) {
      const failed = failureOutcome(error)
      status.replaceChildren(failed.text, ...(failed.details ?? []).flatMap((detail) => [" ", detail]))
    }
  }
}

document.getElementById("account")?.append(signOutButton())

const poller = pollWhileVisible(refresh, 2000)
startTicking()
