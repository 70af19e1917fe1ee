/**
 * Logins for the web pages. The CLI, holding the token, asks for a one-time login code and prints
 * a URL with it in the fragment (never sent to the server, never in its request log); the login
 * page posts the code once and gets an HttpOnly, SameSite=Strict session cookie. The token itself
 * never reaches the browser.
 *
 * SameSite does not tell ports apart (every `127.0.0.1:*` page is the same site), so a request
 * that a cookie authorises and that changes state must also come from this server's own origin.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { HttpApiSecurity } from "effect/http-api"
import { createHash, randomBytes } from "node:crypto"

/** The session cookie's name. */
export const sessionCookie = "quiesce_session"

/** The cookie as an HttpApi security scheme (it sits beside the bearer token). */
export const sessionSecurity = HttpApiSecurity.apiKey({ in: "cookie", key: sessionCookie })

/** How long a login code may wait to be used. */
export const loginCodeTtlMillis = 5 * 60_000

/** How long a page session lasts (the cookie's Max-Age says the same). */
export const sessionTtlMillis = 12 * 60 * 60_000

/** Bounds on what is held: the oldest goes first beyond them. */
const maxCodes = 64
const maxSessions = 256

export interface LoginCode {
  /** The code: 32 random bytes, base64url. */
  readonly code: string
  readonly expiresAt: number
}

export class PageSessions extends Context.Service<PageSessions, {
  /** A new one-time login code. */
  readonly issueCode: Effect.Effect<LoginCode>
  /** Uses up a code: a new session's id, or none when the code is unknown, used or expired. */
  readonly redeem: (code: string) => Effect.Effect<Option.Option<string>>
  /** Whether a session id is current. */
  readonly isValid: (sessionId: string) => Effect.Effect<boolean>
}>()("quiesce/http/PageSessions") {
  static readonly layer: Layer.Layer<PageSessions> = Layer.sync(PageSessions, () => {
    // Keyed by a digest: what is held cannot be used as a code or a cookie, and a lookup's timing says nothing about one.
    const codes = new Map<string, number>()
    const sessions = new Map<string, number>()
    const keyOf = (secret: string) => createHash("sha256").update(secret).digest("base64url")
    const bounded = (entries: Map<string, number>, max: number) => {
      for (const key of entries.keys()) {
        if (entries.size <= max) break
        entries.delete(key)
      }
    }
    const take = (entries: Map<string, number>, secret: string, now: number, consume: boolean) => {
      const key = keyOf(secret)
      const expiresAt = entries.get(key)
      if (expiresAt === undefined) return false
      if (consume || expiresAt <= now) entries.delete(key)
      return expiresAt > now
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
          if (code === "" || !take(codes, code, now, true)) return Option.none()
          const id = secret()
          sessions.set(keyOf(id), now + sessionTtlMillis)
          bounded(sessions, maxSessions)
          return Option.some(id)
        }),
      isValid: (sessionId) =>
        Effect.map(Clock.currentTimeMillis, (now) => sessionId !== "" && take(sessions, sessionId, now, false))
    })
  })
}

const readMethods = new Set(["GET", "HEAD", "OPTIONS"])

/**
 * Whether a request a cookie authorises may go ahead: reads always; anything else only from this
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
