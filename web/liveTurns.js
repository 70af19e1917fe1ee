// @ts-check
// The turns the daemon page shows as they run, per agent: what the live events tell (a turn
// accepted, running, its output as it comes, its end with its reply or its error in words), or,
// without a stream, what a read of the turn says. Each agent keeps its last few turns.
import { h, idElement, outcomeElement, problemWords, promptLine } from "./common.js"

/**
 * @typedef {{
 *   turnId: string, state: string, prompt: string | null, output: string, reply: string | null,
 *   error: { _tag?: string, message?: string } | null, missed: boolean
 * }} LiveTurn
 * @typedef {import("./eventStream.js").StreamEvent} StreamEvent
 * @typedef {{ turnId: string, state: string, text: string, reply: string | null, error: { _tag?: string, message?: string } | null }} TurnRead
 */

/** How many turns an agent's live row keeps. */
const turnsKept = 3

/** How much of a turn's output the page keeps (its end, the newest). */
const outputKept = 64 * 1024

/** A turn's state in words. */
const stateWords = new Map([
  ["accepted", "accepted, waiting for its agent"],
  ["running", "running"],
  ["completed", "completed"],
  ["failed", "failed"],
  ["interrupted", "interrupted"]
])

/** Whether a turn's state is one it ends in. */
const ended = (/** @type {string} */ state) => state === "completed" || state === "failed" || state === "interrupted"

/**
 * @param {Record<string, unknown>} data
 * @param {string} field
 */
const text = (data, field) => {
  const value = data[field]
  return typeof value === "string" ? value : null
}

/**
 * @param {unknown} value
 * @returns {{ _tag?: string, message?: string } | null}
 */
const errorOf = (value) => {
  if (typeof value !== "object" || value === null) return null
  const tag = "_tag" in value && typeof value._tag === "string" ? value._tag : undefined
  const message = "message" in value && typeof value.message === "string" ? value.message : undefined
  return { ...(tag === undefined ? {} : { _tag: tag }), ...(message === undefined ? {} : { message }) }
}

/** The live turns of every agent on the page. */
export const makeLiveTurns = () => {
  /** @type {Map<string, LiveTurn[]>} */
  const byAgent = new Map()

  /**
   * The agent's turn, made (and the oldest dropped past `turnsKept`) when it is new to the page.
   * @param {string} agentId
   * @param {string} turnId
   * @returns {LiveTurn}
   */
  const turnOf = (agentId, turnId) => {
    const turns = byAgent.get(agentId) ?? []
    let turn = turns.find((candidate) => candidate.turnId === turnId)
    if (turn === undefined) {
      turn = { turnId, state: "running", prompt: null, output: "", reply: null, error: null, missed: false }
      turns.push(turn)
      if (turns.length > turnsKept) turns.shift()
      byAgent.set(agentId, turns)
    }
    return turn
  }

  return {
    /**
     * Takes one event of the daemon-wide stream. Returns what it changed on the page: `output`
     * (only that turn's output, see `showOutput`), `turns` (a live row), `agents` (the agents'
     * states: read them again), or nothing.
     * @param {StreamEvent} event
     * @returns {{ change: "output" | "turns" | "agents", agentId?: string, turnId?: string } | null}
     */
    apply: (event) => {
      const agentId = text(event.data, "agentId")
      const turnId = text(event.data, "turnId")
      if (event.type === "no-daemon") return { change: "agents" }
      if (event.type === "gap") {
        // Events were missed: a turn's output may lack some, and the agents are read again.
        for (const turns of byAgent.values()) for (const turn of turns) if (!ended(turn.state)) turn.missed = true
        return { change: "agents" }
      }
      if (agentId === null) return null
      if (event.type === "turn-accepted" && turnId !== null) {
        const turn = turnOf(agentId, turnId)
        turn.state = "accepted"
        turn.prompt = text(event.data, "prompt")
        return { change: "agents" }
      }
      if (event.type === "turn-running" && turnId !== null) {
        turnOf(agentId, turnId).state = "running"
        return { change: "agents" }
      }
      if (event.type === "output" && turnId !== null) {
        const known = byAgent.get(agentId)?.some((turn) => turn.turnId === turnId) ?? false
        const turn = turnOf(agentId, turnId)
        // A turn already running when the page began to follow: what came before is not shown.
        if (!known) turn.missed = true
        const more = text(event.data, "text") ?? ""
        turn.output = (turn.output + more).slice(-outputKept)
        return { change: known ? "output" : "turns", agentId, turnId }
      }
      if (event.type === "turn-ended" && turnId !== null) {
        const turn = turnOf(agentId, turnId)
        turn.state = text(event.data, "state") ?? "completed"
        turn.reply = text(event.data, "reply")
        turn.error = errorOf(event.data["error"])
        return { change: "agents" }
      }
      if (["permission-asked", "permission-resolved", "resumed", "released", "vetoed"].includes(event.type)) return { change: "agents" }
      return null
    },

    /**
     * A turn the page sent (from its prompt box) in the state the daemon answered with, shown
     * before any event of it arrives (what its events said already stays).
     * @param {string} agentId
     * @param {string} turnId
     * @param {string} prompt
     * @param {string} state
     */
    follow: (agentId, turnId, prompt, state) => {
      const known = byAgent.get(agentId)?.some((turn) => turn.turnId === turnId) ?? false
      const turn = turnOf(agentId, turnId)
      if (turn.prompt === null) turn.prompt = prompt
      if (!known) turn.state = state
    },

    /**
     * What a read of a turn said (the page reads the turns it shows running with everything else:
     * without a stream that is how it learns their end; with one, it covers events that came
     * before the stream opened).
     * @param {string} agentId
     * @param {TurnRead} read
     */
    update: (agentId, read) => {
      const turn = turnOf(agentId, read.turnId)
      // A read answered after the turn's end arrived as an event says nothing newer.
      if (ended(turn.state) && !ended(read.state)) return
      turn.state = read.state
      turn.prompt ??= read.text
      turn.reply = read.reply
      turn.error = read.error
    },

    /** The turns that have not ended, by agent (to read without a stream). */
    unended: () =>
      [...byAgent].flatMap(([agentId, turns]) => turns.filter((turn) => !ended(turn.state)).map((turn) => ({ agentId, turnId: turn.turnId }))),

    /**
     * An agent's live row (below its own row in the table), or null when it has none.
     * @param {string} agentId
     * @param {number} columns
     */
    row: (agentId, columns) => {
      const turns = byAgent.get(agentId)
      if (turns === undefined || turns.length === 0) return null
      return h(
        "tr",
        { class: "live-turns", "data-live-agent": agentId },
        h("td", { colspan: columns }, turns.map(turnElement))
      )
    },

    /**
     * Shows a turn's output where it is already on the page; false when it is not (render the rows).
     * @param {string} agentId
     * @param {string} turnId
     */
    showOutput: (agentId, turnId) => {
      const turn = byAgent.get(agentId)?.find((candidate) => candidate.turnId === turnId)
      const element = document.querySelector(`[data-live-turn="${CSS.escape(turnId)}"] [data-live-output]`)
      if (turn === undefined || element === null) return false
      element.textContent = turn.output
      element.scrollTop = element.scrollHeight
      return true
    }
  }
}

/**
 * One turn: its id and state, its prompt's first line, its output (or, once ended, its reply), and
 * its error in words.
 * @param {LiveTurn} turn
 */
const turnElement = (turn) => {
  const shownText = ended(turn.state) && turn.reply !== null ? turn.reply : turn.output
  return h(
    "div",
    { class: "live-turn", "data-live-turn": turn.turnId, "data-turn-state": turn.state },
    h(
      "div",
      { class: "live-head" },
      "Turn ",
      idElement(turn.turnId),
      " · ",
      h("strong", { class: `turn-${turn.state}` }, stateWords.get(turn.state) ?? turn.state),
      turn.prompt === null ? null : h("span", { class: "muted prompt-line", title: turn.prompt }, ` · ${promptLine(turn.prompt)}`)
    ),
    turn.missed ? h("div", { class: "muted" }, "Some of its output came before the page followed it: it is not shown.") : null,
    h("pre", { class: "output live-output", "data-live-output": "" }, shownText === "" && ended(turn.state) ? "(no output)" : shownText),
    turn.error === null ? null : outcomeElement({ kind: "error", ...problemWords(turn.error._tag ?? "", turn.error.message ?? "") })
  )
}
