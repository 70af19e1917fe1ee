// @ts-check
// The login: the one-time code is in the URL's fragment (`/login#CODE`), which the browser never
// sends anywhere; it is posted once, the session cookie comes back, and the page moves on to `/`
// replacing this history entry, so the code does not stay in the history either.
import { api, failureOutcome, h } from "./common.js"

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
  api("/v1/session", { method: "POST", body: { code } }).then(
    () => location.replace(next),
    (error) => say(failureOutcome(error).text, "error")
  )
}
