import { Context, type Effect, type Option } from "effect"
import type { LoginCode, PageSession } from "../domain/pageSession.ts"

/**
 * The web pages' logins: one-time codes, and the sessions they are exchanged for (a cookie and a
 * key, see `layers/http/pageSessions.ts`, which also keeps them).
 */
export class PageSessions extends Context.Service<PageSessions, {
  /** A new one-time login code. */
  readonly issueCode: Effect.Effect<LoginCode>
  /** Uses up a code: a new session, or none when the code is unknown, used or expired. */
  readonly redeem: (code: string) => Effect.Effect<Option.Option<PageSession>>
  /** Whether a session id (the cookie) is current: enough for a page shell, which holds no data. */
  readonly isCurrent: (sessionId: string) => Effect.Effect<boolean>
  /** Whether a session id and its key together are current: what the API takes. */
  readonly authorizes: (sessionId: string, key: string) => Effect.Effect<boolean>
  /** Ends a session (sign out). */
  readonly end: (sessionId: string) => Effect.Effect<void>
}>()("quiesce/http/PageSessions") {}
