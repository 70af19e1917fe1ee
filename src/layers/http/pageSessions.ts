/**
 * Logins for the web pages. The CLI, holding the token, asks for a one-time login code and prints
 * a URL with it in the fragment (never sent to the server, never in its request log); the login
 * page posts the code once and gets a session in two halves:
 *
 * - an HttpOnly, SameSite=Strict cookie, which no script can read, and which gates the page
 *   shells. Browsers send a host's cookies to every port of it, so the cookie's name carries the
 *   port (`quiesce_session_7377`): a hub and its daemons on one host never overwrite each other's.
 * - a key the page keeps in its origin's storage, which no other port can read, and sends as the
 *   `quiesce-session-key` header. A server on another port of the host gets the cookie, never the key.
 *
 * The API takes a session only with both halves. SameSite does not tell ports apart either, so a
 * request that a session authorises and that changes state must also come from this server's own
 * origin.
 */
import { Clock, Effect, Layer, Option } from "effect"
import { sessionKeyHeader } from "../../api/middleware.ts"
import { PageSessions } from "../../services/PageSessions.ts"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"

/** The session cookie's name on the server a request was sent to (`Host`): one per port. */
export const sessionCookieName = (host: string | undefined) => `quiesce_session_${/:(\d+)$/.exec(host ?? "")?.[1] ?? "80"}`

/** How long a login code may wait to be used. */
export const loginCodeTtlMillis = 5 * 60_000

/** How long a page session lasts (the cookie's Max-Age says the same). */
export const sessionTtlMillis = 12 * 60 * 60_000

/** Bounds on what is held: the oldest goes first beyond them. */
const maxCodes = 64
const maxSessions = 256

/** The sessions, kept in memory (a restart signs every page out). */
export const layer: Layer.Layer<PageSessions> = Layer.sync(PageSessions, () => {
  // Keyed by digests: what is held cannot be used as a code, a cookie or a key, and a lookup's
  // timing says nothing about one.
  const digest = (secret: string) => createHash("sha256").update(secret).digest()
  const keyOf = (secret: string) => digest(secret).toString("base64url")
  const codes = new Map<string, number>()
  const sessions = new Map<string, { readonly expiresAt: number; readonly key: Buffer }>()
  const bounded = (entries: Map<string, unknown>, max: number) => {
    for (const key of entries.keys()) {
      if (entries.size <= max) break
      entries.delete(key)
    }
  }
  const current = (sessionId: string, now: number) => {
    if (sessionId === "") return undefined
    const id = keyOf(sessionId)
    const session = sessions.get(id)
    if (session === undefined) return undefined
    if (session.expiresAt > now) return session
    sessions.delete(id)
    return undefined
  }
  const secret = () => randomBytes(32).toString("base64url")
  return PageSessions.of({
    issueCode: Effect.map(Clock.currentTimeMillis, (now) => {
      const code = secret()
      const expiresAt = now + loginCodeTtlMillis
      codes.set(keyOf(code), expiresAt)
      bounded(codes, maxCodes)
      return { code, expiresAt }
    }),
    redeem: (code) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const id = keyOf(code)
        const expiresAt = codes.get(id)
        codes.delete(id)
        if (code === "" || expiresAt === undefined || expiresAt <= now) return Option.none()
        const session = { id: secret(), key: secret(), expiresAt: now + sessionTtlMillis }
        sessions.set(keyOf(session.id), { expiresAt: session.expiresAt, key: digest(session.key) })
        bounded(sessions, maxSessions)
        return Option.some(session)
      }),
    isCurrent: (sessionId) => Effect.map(Clock.currentTimeMillis, (now) => current(sessionId, now) !== undefined),
    authorizes: (sessionId, key) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const session = current(sessionId, now)
        return session !== undefined && key !== "" && timingSafeEqual(session.key, digest(key))
      }),
    end: (sessionId) => Effect.sync(() => void sessions.delete(keyOf(sessionId)))
  })
})

/** What a request's page session is worth: the API may serve it, it has none, or it is a change from elsewhere. */
export type SessionCheck = "authorized" | "unauthorized" | "cross-origin"

/** The request's cookie and key, then its origin (see `sameOriginOrRead`). */
export const checkSession = (
  sessions: PageSessions["Service"],
  request: {
    readonly method: string
    readonly headers: Readonly<Record<string, string | undefined>>
    readonly cookies: Readonly<Record<string, string | undefined>>
  }
): Effect.Effect<SessionCheck> =>
  Effect.map(
    sessions.authorizes(request.cookies[sessionCookieName(request.headers["host"])] ?? "", request.headers[sessionKeyHeader] ?? ""),
    (valid) => !valid ? "unauthorized" : sameOriginOrRead(request) ? "authorized" : "cross-origin"
  )

const readMethods = new Set(["GET", "HEAD"])

/**
 * Whether a request a session authorises may go ahead: reads always; anything else only from this
 * server's own origin (`Origin` naming the `Host` it was sent to, or, without `Origin`,
 * `Sec-Fetch-Site: same-origin`). A request with neither header is not from a browser's page and
 * is refused: other clients use the bearer token.
 */
export const sameOriginOrRead = (request: {
  readonly method: string
  readonly headers: Readonly<Record<string, string | undefined>>
}) => {
  if (readMethods.has(request.method)) return true
  const host = request.headers["host"]
  const origin = request.headers["origin"]
  if (origin !== undefined) return host !== undefined && origin === `http://${host}`
  return request.headers["sec-fetch-site"] === "same-origin"
}
