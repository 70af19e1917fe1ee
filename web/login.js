// @ts-check
// The login: the one-time code is in the URL's fragment (`/login#CODE`), which the browser never
// sends anywhere; it is posted once, the session comes back (its cookie, and its key, which the
// page keeps in this origin's storage), and the page moves on to `/` replacing this history
// entry, so the code does not stay in the history either.
import { api, failureOutcome, h, outcomeElement, rememberSessionKey } from "./common.js"

const message = document.getElementById("login-message")
const code = location.hash.slice(1)
/** Where the login goes on to: this server's own page, `/` or a home's `/homes/NAME/`, nothing else. */
const requested = new URLSearchParams(location.search).get("next") ?? "/"
const next = /^\/(homes\/[^/?#\\]+\/)?$/.test(requested) ? requested : "/"

/**
 * @param {string} text
 * @param {string} kind
 */
const say = (text, kind) => message?.replaceChildren(h("div", { class: `outcome outcome-${kind}`, role: "status" }, text))

if (code !== "") {
  // The code leaves the address bar before anything else happens.
  history.replaceState(null, "", location.pathname)
  say("Signing in…", "ok")
  /** @type {Promise<{ key: string, expiresAt: string }>} */
  const started = api("/v1/session", { method: "POST", body: { code } })
  started
    .then((session) => {
      try {
        rememberSessionKey(session.key)
      } catch {
        throw new Error("This browser keeps no site storage for this page, which the session needs: allow it, then get a new link")
      }
      location.replace(next)
    })
    .catch((error) => message?.replaceChildren(outcomeElement({ ...failureOutcome(error), kind: "error" }) ?? ""))
}
