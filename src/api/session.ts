/**
 * The web pages' login, the same on a daemon and on a hub: the token's holder asks for a one-time
 * link (`quiesce open`); the login page exchanges its code for the session (the cookie, and the
 * key in the answer); signing out ends it. How sessions are kept: `layers/http/pageSessions.ts`.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { StartsDaemon } from "./annotations.ts"
import { CrossOriginRefusedError, LoginCodeInvalidError } from "./errors.ts"
import { Authorization, TokenAuthorization } from "./middleware.ts"

const NonEmptyString = Schema.String.check(Schema.isMinLength(1))

/** A one-time login URL's path (the code is in its fragment) and when the code expires. */
export const LoginLink = Schema.Struct({
  path: Schema.String,
  expiresAt: Schema.String
})
export type LoginLink = typeof LoginLink.Type

/** The login page's request: the code from the link's fragment. */
export const SessionRequest = Schema.Struct({ code: NonEmptyString.check(Schema.isMaxLength(128)) })

/** A started session: the key the page sends with its cookie, and when both expire. */
export const SessionStarted = Schema.Struct({
  key: Schema.String,
  expiresAt: Schema.String
})

/** The login's endpoints (a session is never routed to a daemon: none starts one). */
export class SessionGroup extends HttpApiGroup.make("session")
  .add(
    HttpApiEndpoint.post("link", "/v1/login-links", { success: LoginLink.pipe(HttpApiSchema.status(201)) })
      .middleware(TokenAuthorization)
      .annotate(StartsDaemon, false),
    HttpApiEndpoint.post("start", "/v1/session", {
      payload: SessionRequest,
      success: SessionStarted.pipe(HttpApiSchema.status(201)),
      error: [LoginCodeInvalidError, CrossOriginRefusedError]
    }).annotate(StartsDaemon, false),
    HttpApiEndpoint.delete("end", "/v1/session", { success: HttpApiSchema.NoContent })
      .middleware(Authorization)
      .annotate(StartsDaemon, false)
  )
{}
