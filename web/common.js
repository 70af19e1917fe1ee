// @ts-check
// What both pages share: building elements, calling the API, formatting times and sizes, and
// polling only while the page is visible.
import { problemSentence } from "./problems.js"

/**
 * @typedef {string | number | Node | null | undefined | false} Child
 * @typedef {{ [name: string]: string | number | boolean | ((event: Event) => void) | undefined }} Attributes
 */

/**
 * An element with attributes (`on…` are listeners) and children; text is always text, never HTML.
 * @param {string} tag
 * @param {Attributes} [attributes]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElement}
 */
export const h = (tag, attributes = {}, ...children) => {
  const element = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue
    if (typeof value === "function") element.addEventListener(name.slice(2), value)
    else if (value === true) element.setAttribute(name, "")
    else element.setAttribute(name, String(value))
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue
    element.append(typeof child === "object" ? child : String(child))
  }
  return element
}

/** An error answer of the API: its problem's tag, message and the rest of its fields. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} tag
   * @param {string} message
   * @param {Record<string, unknown>} body
   */
  constructor(status, tag, message, body) {
    super(message)
    this.status = status
    this.tag = tag
    this.body = body
  }
}

/**
 * @param {unknown} value
 * @returns {value is Record<string, unknown>}
 */
export const isRecord = (value) => typeof value === "object" && value !== null && !Array.isArray(value)

/** Where the page keeps its session's key: this origin's storage, which no other port of the host can read. */
const keyStorage = "quiesce.sessionKey"

/** The header the key goes in; the cookie, its other half, the browser sends itself. */
const keyHeader = "quiesce-session-key"

/**
 * @param {string} key
 */
export const rememberSessionKey = (key) => localStorage.setItem(keyStorage, key)

export const forgetSessionKey = () => localStorage.removeItem(keyStorage)

/** Set once the server said the session is over: the page stops asking. */
let signedOut = false

/** Whether the server said the session is over (the page stops asking). */
export const isSignedOut = () => signedOut

/**
 * The headers that carry the page's session besides its cookie (its key), for a request of its own.
 * @returns {Record<string, string>}
 */
export const sessionHeaders = () => {
  /** @type {Record<string, string>} */
  const headers = {}
  const key = localStorage.getItem(keyStorage)
  if (key !== null) headers[keyHeader] = key
  return headers
}

/**
 * Calls the API with the page's session (its cookie, and its key in a header); an answer that is
 * not 2xx becomes an `ApiError`, and a request that never got an answer says so.
 * @template T
 * @param {string} path
 * @param {{ method?: string, body?: unknown }} [options]
 * @returns {Promise<T>}
 */
export const api = async (path, options = {}) => {
  const headers = sessionHeaders()
  /** @type {RequestInit} */
  const init = { method: options.method ?? "GET", credentials: "same-origin", headers }
  if (options.body !== undefined) {
    headers["content-type"] = "application/json"
    init.body = JSON.stringify(options.body)
  }
  /** @type {Response} */
  let response
  try {
    response = await fetch(path, init)
  } catch {
    throw new ApiError(0, "NoAnswer", "It may have retired or stopped: start it again, then reload.", {})
  }
  const text = await response.text()
  // The API's own JSON, whose shapes the callers name (see the typedefs of each page).
  const body = parseJson(text)
  if (!response.ok) {
    const fields = isRecord(body) ? body : {}
    const tag = typeof fields["_tag"] === "string" ? fields["_tag"] : `HTTP ${response.status}`
    const message = typeof fields["message"] === "string"
      ? fields["message"]
      : typeof fields["detail"] === "string"
      ? fields["detail"]
      : response.statusText
    if (response.status === 401) showSignedOut()
    throw new ApiError(response.status, tag, message, fields)
  }
  return body
}

/**
 * @param {string} text
 */
const parseJson = (text) => {
  try {
    return text === "" ? null : JSON.parse(text)
  } catch {
    return null
  }
}

/** The session ended (expired, signed out, or the server restarted): stop, and say how to get a new one. */
export const showSignedOut = () => {
  // Only a page with data signs out; the login page shows its own answer.
  if (document.getElementById("signed-out") === null) return
  signedOut = true
  document.body.classList.add("signed-out")
  const banner = document.getElementById("signed-out")
  if (banner !== null) banner.hidden = false
}

/**
 * A "Sign out" button: ends the session on the server, forgets the key, and shows the login page.
 * @returns {HTMLElement}
 */
export const signOutButton = () =>
  h("button", {
    type: "button",
    onclick: () => {
      api("/v1/session", { method: "DELETE" }).catch(() => undefined).finally(() => {
        try {
          forgetSessionKey()
        } finally {
          location.replace("/login")
        }
      })
    }
  }, "Sign out")

/**
 * "3 h ago", "in 12 s".
 * @param {string | null | undefined} iso
 * @param {number} [now]
 */
export const relative = (iso, now = Date.now()) => {
  if (iso === null || iso === undefined) return "—"
  const millis = Date.parse(iso) - now
  const seconds = Math.round(Math.abs(millis) / 1000)
  const amount = seconds < 60
    ? `${seconds} s`
    : seconds < 3600
    ? `${Math.floor(seconds / 60)} min`
    : seconds < 86400
    ? `${Math.floor(seconds / 3600)} h`
    : `${Math.floor(seconds / 86400)} d`
  return millis >= 0 ? `in ${amount}` : `${amount} ago`
}

/**
 * A countdown to a time: "4:05", "1:02:03", or "due" once it passed.
 * @param {string} iso
 * @param {number} [now]
 */
export const countdown = (iso, now = Date.now()) => {
  const left = Math.round((Date.parse(iso) - now) / 1000)
  if (left <= 0) return "due"
  const hours = Math.floor(left / 3600)
  const minutes = Math.floor((left % 3600) / 60)
  const seconds = String(left % 60).padStart(2, "0")
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, "0")}:${seconds}` : `${minutes}:${seconds}`
}

/**
 * The local time of an ISO 8601 instant.
 * @param {string | null | undefined} iso
 */
export const localTime = (iso) => iso === null || iso === undefined ? "—" : new Date(iso).toLocaleString()

/**
 * @param {number | null | undefined} bytes
 */
export const formatBytes = (bytes) => {
  if (bytes === null || bytes === undefined) return "unknown"
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KiB`
  if (bytes < 1024 * 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
  return `${(bytes / 1024 / 1024 / 1024).toFixed(2)} GiB`
}

/**
 * How long a provider's refusal has held ("vetoed since 3 h ago"), so a stuck background job
 * stands out; nothing when it is not known.
 * @param {string} outcome
 * @param {string | undefined} since
 */
export const refusedSinceElement = (outcome, since) =>
  since === undefined ? null : h(
    "span",
    { class: "since", "data-since": since },
    ` · ${outcome === "vetoed" || outcome === "veto" ? "vetoed" : "failing"} since `,
    h("time", { datetime: since, title: localTime(since) }, relative(since))
  )

/**
 * A time element that keeps counting down (see `startTicking`).
 * @param {string} iso
 */
export const countdownElement = (iso) =>
  h("time", { datetime: iso, "data-countdown": iso, title: localTime(iso) }, countdown(iso))

/** Updates every countdown and every "… ago" (`data-relative`) on the page once a second, while the page is visible. */
export const startTicking = () => {
  setInterval(() => {
    if (document.visibilityState !== "visible") return
    for (const element of document.querySelectorAll("[data-countdown]")) {
      const iso = element.getAttribute("data-countdown")
      if (iso !== null) element.textContent = countdown(iso)
    }
    for (const element of document.querySelectorAll("[data-relative]")) {
      const iso = element.getAttribute("data-relative")
      if (iso !== null) element.textContent = relative(iso)
    }
  }, 1000)
}

/**
 * Runs `refresh` now and every `intervalMillis` while the page is visible; a hidden page makes
 * no request at all (and a visible one only reads, which never counts as activity). One chain of
 * timers at most: `refreshNow` replaces the pending one, and a call during a refresh runs one more
 * right after it. A session that ended stops it. The interval may be a function, read at each
 * round (a page following a live stream polls less often).
 * @param {() => Promise<void>} refresh
 * @param {number | (() => number)} intervalMillis
 */
export const pollWhileVisible = (refresh, intervalMillis) => {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer
  let running = false
  let again = false
  const cancel = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
  }
  const tick = async () => {
    cancel()
    if (running) {
      again = true
      return
    }
    if (document.visibilityState !== "visible" || signedOut) return
    running = true
    try {
      await refresh()
    } catch (error) {
      // A refresh that threw (a row it could not show) must not stop the page's updates.
      console.error(error)
    } finally {
      running = false
    }
    if (again) {
      again = false
      return tick()
    }
    if (document.visibilityState === "visible" && !signedOut) {
      timer = setTimeout(tick, typeof intervalMillis === "number" ? intervalMillis : intervalMillis())
    }
  }
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") void tick()
    else cancel()
  })
  void tick()
  return { refreshNow: tick }
}

/**
 * A line saying what an action did, kept on its row until the next action on it.
 * @typedef {{ kind: "ok" | "refused" | "error", text: string, details?: (string | Node)[] }} Outcome
 */

/**
 * @param {Outcome | undefined} outcome
 */
export const outcomeElement = (outcome) =>
  outcome === undefined ? null : h(
    "div",
    { class: `outcome outcome-${outcome.kind}`, role: "status" },
    h("span", {}, outcome.text),
    outcome.details !== undefined && outcome.details.length > 0
      ? h("ul", {}, outcome.details.map((line) => h("li", {}, line)))
      : null
  )

/**
 * A problem in words: what its type means, then its own detail (the tag itself stays out of sight).
 * @param {string} tag
 * @param {string} message
 * @param {number} [status]
 * @returns {{ text: string, details: string[] }}
 */
export const problemWords = (tag, message, status) => {
  const text = problemSentence(tag, status)
  return { text, details: message === "" || message === text ? [] : [message] }
}

/**
 * The outcome of a failed action, or of a page that could not read: a sentence and the detail.
 * @param {unknown} error
 * @returns {Outcome}
 */
export const failureOutcome = (error) =>
  error instanceof ApiError
    ? { kind: error.status === 409 ? "refused" : "error", ...problemWords(error.tag, error.message, error.status) }
    : { kind: "error", text: error instanceof Error ? error.message : String(error) }

/**
 * What each blocker means, in words: a runtime's blocker kinds (why it stays resident) and the
 * daemon's retirement categories (why it stays up). Each is shown with its tag on hover.
 * @type {ReadonlyMap<string, string>}
 */
const blockerWords = new Map([
  ["lifecycle-not-idle", "it is not idle"],
  ["internal-agent", "it is internal to its host"],
  ["foreground-turn", "a turn is running"],
  ["queued-prompt", "a prompt is queued"],
  ["pending-replacement", "its runtime is being replaced"],
  ["pending-permission", "it waits for a permission answer"],
  ["permission-response-in-flight", "a permission answer is on its way"],
  ["lifecycle-operation", "it is being opened, closed or resumed"],
  ["foreground-mutation", "a change to it is under way"],
  ["undrained-events", "its session's last events are still being saved"],
  ["running-subagents", "its provider's subagents are running"],
  ["caller-protected", "a delivery or a finish watch waits on it"],
  ["not-resumable", "its session could not be resumed once released"],
  ["veto", "vetoed by its provider"],
  ["probe-failure", "its provider could not be asked"],
  ["probe-failed", "its provider could not be asked"],
  ["turn-accepted", "a turn is queued"],
  ["turn-dispatched", "a turn is running"],
  ["turn-running", "a turn is running"],
  ["queued-delivery", "a message waits for delivery"],
  ["finish-recovery", "finish watches are being restored"],
  ["finish-registration", "a finish watch is being registered"],
  ["finish-held", "a finish watch waits"],
  ["finish-notification", "a finish is being delivered"],
  ["finish-remote-watch", "it watches an agent on another server"],
  ["store-failing", "its store cannot save"],
  ["prompt-accepting", "a prompt is being accepted"],
  ["agent-creating", "an agent is being created"],
  ["activity", "there was activity"],
  ["release-declined", "a runtime declined its release"]
])

/**
 * A blocker kind or retirement category in words; one the page does not know, as it is.
 * @param {string} kind
 */
export const blockerWord = (kind) => blockerWords.get(kind) ?? kind

/**
 * A blocker as one line: its category or kind, whose (an id, kept on one line), and its detail.
 * @param {{ category?: string, kind?: string, agentId?: string, detail?: string }} blocker
 */
export const blockerLine = (blocker) =>
  h(
    "span",
    { title: blocker.category ?? blocker.kind ?? "" },
    blockerWord(blocker.category ?? blocker.kind ?? "blocker"),
    blocker.agentId === undefined ? null : [" ", h("span", { class: "nowrap" }, "(", idElement(blocker.agentId), ")")],
    blocker.detail === undefined || blocker.detail === "" ? null : `: ${blocker.detail}`
  )

/**
 * A table with a header row, in a box that scrolls sideways when the window is narrower than the
 * table (its cells keep their ids on one line rather than squeezing them).
 * @param {string} className
 * @param {string[]} headings
 * @param {Node[]} rows
 */
export const table = (className, headings, rows) =>
  h(
    "div",
    { class: "table-scroll" },
    h(
      "table",
      { class: className },
      h("thead", {}, h("tr", {}, headings.map((heading) => h("th", {}, heading)))),
      h("tbody", {}, rows)
    )
  )

/**
 * An id (an agent's, a session's, a turn's) on one line: cut with an ellipsis when its column is
 * narrow, the whole id on hover, and selected whole by a click, so a copy takes all of it.
 * @param {string} id
 * @param {string} [className]
 */
export const idElement = (id, className = "") =>
  h("span", { class: `id mono${className === "" ? "" : ` ${className}`}`, title: id, "data-id": id }, id)

/**
 * Where an idle timeout came from, in words; nothing when none was given anywhere.
 * @type {ReadonlyMap<string, string>}
 */
const timeoutSources = new Map([["flag", "set by --daemon-idle-timeout"], ["config", "from config.json"], ["hub", "the hub's default"], ["omitted", ""]])

/**
 * The idle timeout a daemon armed: "1h (from config.json)", "none (0s, from config.json)", or
 * plainly "none" when nothing set one.
 * @param {{ value: string | null, millis: number | null, source: string }} timeout
 */
export const idleTimeoutText = (timeout) => {
  const source = timeoutSources.get(timeout.source) ?? timeout.source
  if (timeout.millis !== null) return source === "" ? `${timeout.value}` : `${timeout.value} (${source})`
  if (timeout.value === null || source === "") return "none"
  return `none (${timeout.value}, ${source})`
}

/**
 * Actions on rows: each shows "Working…", then its outcome (or its failure) on its row, then the
 * page lists again. An outcome stays on its row until the next action on it.
 * @param {(failure: unknown) => Outcome} describeFailure
 * @param {() => void} render
 * @param {() => Promise<void>} refresh
 */
export const rowActions = (describeFailure, render, refresh) => {
  /** @type {Map<string, Outcome>} */
  const outcomes = new Map()
  /**
   * @param {string} key
   * @param {() => Promise<Outcome>} action
   */
  const act = async (key, action) => {
    outcomes.set(key, { kind: "ok", text: "Working…" })
    render()
    try {
      outcomes.set(key, await action())
    } catch (error) {
      outcomes.set(key, describeFailure(error))
    }
    render()
    await refresh()
  }
  return { act, outcomeOf: (/** @type {string} */ key) => outcomes.get(key) }
}

/** How many characters of a prompt's first line a list of turns shows. */
const promptLineLength = 80

/**
 * A prompt as one short line: its first line with text, cut to {@link promptLineLength}.
 * @param {string} text
 */
export const promptLine = (text) => {
  const first = text.split("\n").map((line) => line.trim()).find((line) => line !== "") ?? ""
  if (first === "") return "(an empty prompt)"
  const more = first.length > promptLineLength || text.trim() !== first
  return `${first.slice(0, promptLineLength)}${more ? "…" : ""}`
}
