/**
 * The web pages: static HTML, plain ES modules and a style sheet from the package's `web/` folder,
 * which fetch the same JSON API as every other client. A daemon serves its runtimes page at `/`;
 * a hub serves its inventory at `/` and each home's daemon page at `/homes/{name}/` (whose
 * requests go through the hub's forwarding). Nothing but the server itself is ever fetched.
 *
 * The page shells hold no data: a visitor without a session gets the login page (401), and the
 * data only ever comes from the API, which checks the session (see pageSessions.ts).
 */
import { Duration, Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, HttpApiSecurity } from "effect/http-api"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { packageRoot } from "../../domain/version.ts"
import { CrossOriginRefused, LoginCodeInvalid } from "../../api/errors.ts"
import type { LoginLink } from "../../api/session.ts"
import { PageSessions } from "../../services/PageSessions.ts"
import { sameOriginOrRead, sessionCookieName, sessionTtlMillis } from "./pageSessions.ts"
import type { ServedRoute } from "./requestProblems.ts"

/** Which server serves the pages. */
export type PageHost = "daemon" | "hub"

const webDir = path.join(packageRoot, "web")

const contentTypes = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  svg: "image/svg+xml"
} as const

/** Every file served under `/assets/`: nothing else in the folder, or outside it, can be asked for. */
const assetNames = [
  "style.css",
  "common.js",
  "problems.js",
  "eventStream.js",
  "liveTurns.js",
  "promptBox.js",
  "daemon.js",
  "hub.js",
  "login.js",
  "icon.svg"
] as const

/** A page may load and fetch only from its own server, run no inline script, and be framed by nobody. */
const securityHeaders = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store"
}

interface WebFile {
  readonly body: string
  readonly contentType: string
}

const extensionOf = (name: string) => {
  const extension = path.extname(name).slice(1)
  return extension === "html" || extension === "js" || extension === "css" || extension === "svg" ? extension : undefined
}

/** Read once, when the server starts: a file missing from the package is a broken install, said at once. */
const readWebFile = (name: string): WebFile => {
  const extension = extensionOf(name)
  if (extension === undefined) throw new Error(`not a web file: ${name}`)
  return { body: readFileSync(path.join(webDir, name), "utf8"), contentType: contentTypes[extension] }
}

const respond = (file: WebFile, status = 200) =>
  HttpServerResponse.text(file.body, { status, contentType: file.contentType, headers: securityHeaders })

/** Where the pages are (every one a GET). */
const pagePaths = { home: "/", login: "/login", homePage: "/homes/*" } as const

const assetPath = (name: string): `/${string}` => `/assets/${name}`

/** The page routes a daemon or a hub serves, as paths (to tell a wrong method from an unknown path). */
export const servedPages = (host: PageHost): ReadonlyArray<ServedRoute> =>
  [pagePaths.home, pagePaths.login, ...assetNames.map(assetPath), ...(host === "hub" ? [pagePaths.homePage] : [])]
    .map((path) => ({ method: "GET", path }))

/** The page routes of a daemon or a hub, to merge beside its API routes. */
export const pageRoutes = (host: PageHost): Layer.Layer<never, never, HttpRouter.HttpRouter | PageSessions> =>
  Layer.unwrap(Effect.gen(function*() {
    const sessions = yield* PageSessions
    const login = readWebFile("login.html")
    const daemonPage = readWebFile("daemon.html")
    const home = host === "hub" ? readWebFile("hub.html") : daemonPage
    const guarded = (page: WebFile) => (request: HttpServerRequest.HttpServerRequest) =>
      Effect.map(sessions.isCurrent(request.cookies[sessionCookieName(request.headers["host"])] ?? ""), (valid) => valid ? respond(page) : respond(login, 401))
    const routes = [
      HttpRouter.route("GET", pagePaths.home, guarded(home)),
      HttpRouter.route("GET", pagePaths.login, respond(login)),
      // One route per file: any other path is answered as every path nothing serves is.
      ...assetNames.map((name) => HttpRouter.route("GET", assetPath(name), respond(readWebFile(name)))),
      ...(host === "hub" ? [HttpRouter.route("GET", pagePaths.homePage, guarded(daemonPage))] : [])
    ]
    return HttpRouter.addAll(routes)
  }))

/** `POST /v1/login-links`: a one-time login link for the bearer of the token. */
export const loginLink = (sessions: PageSessions["Service"]): Effect.Effect<LoginLink> =>
  Effect.map(sessions.issueCode, ({ code, expiresAt }) => ({
    path: `/login#${code}`,
    expiresAt: new Date(expiresAt).toISOString()
  }))

/** The session cookie of the server a request was sent to, set (or, with "", cleared). */
const setSessionCookie = (request: HttpServerRequest.HttpServerRequest, value: string, maxAgeMillis: number) =>
  HttpApiBuilder.securitySetCookie(HttpApiSecurity.apiKey({ in: "cookie", key: sessionCookieName(request.headers["host"]) }), value, {
    // Plain HTTP on loopback: a Secure cookie would not be sent back.
    secure: false,
    sameSite: "strict",
    path: "/",
    maxAge: Duration.millis(maxAgeMillis)
  })

/** `POST /v1/session`: uses up a login code; sets the session cookie and answers the session's key. */
export const startSession = Effect.fn("startSession")(function*(sessions: PageSessions["Service"], code: string) {
  const request = yield* HttpServerRequest.HttpServerRequest
  if (!sameOriginOrRead(request)) {
    return yield* new CrossOriginRefused({ message: "A login must come from this server's own login page" })
  }
  const session = yield* sessions.redeem(code)
  if (Option.isNone(session)) {
    return yield* new LoginCodeInvalid({
      message: "This login link is used or expired: get a new one with quiesce open (or quiesce hub open)"
    })
  }
  yield* setSessionCookie(request, session.value.id, sessionTtlMillis)
  return { key: session.value.key, expiresAt: new Date(session.value.expiresAt).toISOString() }
})

/** `DELETE /v1/session`: ends the request's session, if it has one, and clears its cookie. */
export const endSession = Effect.fn("endSession")(function*(sessions: PageSessions["Service"]) {
  const request = yield* HttpServerRequest.HttpServerRequest
  yield* sessions.end(request.cookies[sessionCookieName(request.headers["host"])] ?? "")
  yield* setSessionCookie(request, "", 0)
})

/**
 * The session group's handlers (link, start, end) over the page sessions, the same on a daemon
 * and on a hub. Each API still builds its own group from them (`handleAll`): the group's type
 * carries that API's middleware.
 */
export const sessionHandlers = Effect.gen(function*() {
  const sessions = yield* PageSessions
  return {
    link: () => loginLink(sessions),
    start: ({ payload }: { readonly payload: { readonly code: string } }) => startSession(sessions, payload.code),
    end: () => endSession(sessions)
  }
})
