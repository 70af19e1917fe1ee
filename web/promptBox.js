// @ts-check
// The daemon page's prompt box: a prompt to one agent, sent once however often it is submitted.
// Each typed prompt gets a client message id, made once and kept in the tab's sessionStorage until
// the daemon confirmed its turn; a second submit while it is sent does nothing, a submit of the same
// text after a failure sends the same id, and a page reloaded during the send sends it again with
// that id. The daemon answers a repeated id with the turn it already has, so the prompt runs once.
import { failureOutcome, h, idElement, outcomeElement, problemWords } from "./common.js"

/**
 * @typedef {{ agentId: string, text: string, clientMessageId: string }} PendingPrompt
 * @typedef {{ turnId: string, state: string, error: { _tag?: string, message?: string } | null }} SentTurn
 * @typedef {{
 *   form: HTMLFormElement,
 *   storageKey: string,
 *   send: (prompt: PendingPrompt) => Promise<SentTurn>,
 *   sent: (prompt: PendingPrompt, turn: SentTurn) => void
 * }} PromptBoxOptions
 */

/**
 * @param {unknown} value
 * @returns {value is PendingPrompt}
 */
const isPending = (value) =>
  typeof value === "object" && value !== null &&
  "agentId" in value && typeof value.agentId === "string" &&
  "text" in value && typeof value.text === "string" &&
  "clientMessageId" in value && typeof value.clientMessageId === "string"

/**
 * Wires the prompt box in `form` (its `[data-prompt-agent]` select, `[data-prompt-text]` text,
 * `[data-prompt-send]` button and `[data-prompt-outcome]` line). Enter sends; Shift+Enter is a new line.
 * @param {PromptBoxOptions} options
 */
export const promptBox = ({ form, storageKey, send, sent }) => {
  const picker = form.querySelector("[data-prompt-agent]")
  const textArea = form.querySelector("[data-prompt-text]")
  const button = form.querySelector("[data-prompt-send]")
  const outcome = form.querySelector("[data-prompt-outcome]")
  if (!(picker instanceof HTMLSelectElement) || !(textArea instanceof HTMLTextAreaElement) || !(button instanceof HTMLButtonElement)) {
    throw new Error("The page's prompt box is incomplete.")
  }
  let sending = false
  /** The agent to pick once the list has it (a pending prompt's, or a row's Prompt button). */
  let wanted = ""

  /**
   * @param {import("./common.js").Outcome | undefined} told
   * @param {Node[]} [before]
   */
  const tell = (told, before = []) => outcome?.replaceChildren(...before, ...(told === undefined ? [] : [outcomeElement(told) ?? ""]))

  /** @returns {PendingPrompt | null} */
  const pendingPrompt = () => {
    try {
      const parsed = JSON.parse(sessionStorage.getItem(storageKey) ?? "null")
      return isPending(parsed) ? parsed : null
    } catch {
      return null
    }
  }

  /**
   * @param {PendingPrompt} prompt
   */
  const deliver = async (prompt) => {
    sending = true
    button.disabled = true
    textArea.readOnly = true
    tell({ kind: "ok", text: "Sending…" })
    try {
      const turn = await send(prompt)
      // Confirmed: this prompt is done; the next one typed is a new one.
      sessionStorage.removeItem(storageKey)
      if (textArea.value === prompt.text) textArea.value = ""
      const head = h("span", { "data-sent-turn": turn.turnId }, "Turn ", idElement(turn.turnId), ` of ${prompt.agentId}: `)
      tell(
        turn.error === null
          ? { kind: "ok", text: turn.state === "running" ? "running; its output follows below its agent." : `${turn.state}.` }
          : { kind: "error", ...problemWords(turn.error._tag ?? "", turn.error.message ?? "") },
        [head]
      )
      sent(prompt, turn)
    } catch (error) {
      const failure = failureOutcome(error)
      tell({ ...failure, text: `Not sent: ${failure.text} Send again to retry: it runs once.` })
    } finally {
      sending = false
      button.disabled = false
      textArea.readOnly = false
    }
  }

  const submit = () => {
    if (sending) return
    const agentId = picker.value
    const text = textArea.value
    if (agentId === "") return tell({ kind: "refused", text: "Choose an agent first." })
    if (text.trim() === "") return tell({ kind: "refused", text: "Type a prompt first." })
    const pending = pendingPrompt()
    // The same prompt again (after a failure): the same id, so it still runs at most once.
    const clientMessageId = pending !== null && pending.agentId === agentId && pending.text === text
      ? pending.clientMessageId
      : crypto.randomUUID()
    const prompt = { agentId, text, clientMessageId }
    sessionStorage.setItem(storageKey, JSON.stringify(prompt))
    void deliver(prompt)
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault()
    submit()
  })
  textArea.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return
    event.preventDefault()
    submit()
  })

  // A prompt whose send the page did not see confirmed (it was reloaded meanwhile): sent again, with its id.
  const unconfirmed = pendingPrompt()
  if (unconfirmed !== null) {
    wanted = unconfirmed.agentId
    textArea.value = unconfirmed.text
    void deliver(unconfirmed)
  }

  return {
    /**
     * The agents to choose from, in the page's order; the one chosen stays chosen.
     * @param {string[]} agentIds
     */
    setAgents: (agentIds) => {
      const chosen = wanted !== "" ? wanted : picker.value
      const current = [...picker.options].map((option) => option.value)
      if (current.length !== agentIds.length || current.some((id, index) => id !== agentIds[index])) {
        picker.replaceChildren(...agentIds.map((id) => h("option", { value: id }, id)))
      }
      if (agentIds.includes(chosen)) {
        picker.value = chosen
        wanted = ""
      }
    },
    /**
     * Chooses an agent (its row's Prompt button) and puts the cursor in the box.
     * @param {string} agentId
     */
    choose: (agentId) => {
      wanted = agentId
      if ([...picker.options].some((option) => option.value === agentId)) {
        picker.value = agentId
        wanted = ""
      }
      textArea.focus()
    }
  }
}
