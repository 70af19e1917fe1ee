/**
 * The web pages' logins (see `services/PageSessions.ts`): a one-time code the token's holder is
 * given, and the session a page gets for it.
 */

/** A one-time login code and when it expires (epoch ms). */
export interface LoginCode {
  /** The code: 32 random bytes, base64url. */
  readonly code: string
  readonly expiresAt: number
}

/** A new session's two halves: the cookie's value and the page's key. */
export interface PageSession {
  readonly id: string
  readonly key: string
  readonly expiresAt: number
}
