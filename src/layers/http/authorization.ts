/**
 * Who may call: the bearer token (compared in constant time), or a web page's session (see
 * pageSessions.ts). The `Authorization` and `TokenAuthorization` middleware of both APIs, and the
 * same check for what no API middleware guards (requests no route takes, the hub's forwarding).
 */
import { Effect, Layer, Redacted } from "effect"
import { HttpServerRequest } from "effect/http"
import { createHash, timingSafeEqual } from "node:crypto"
import { CrossOriginRefused, Unauthorized } from "../../api/errors.ts"
import { Authorization, TokenAuthorization } from "../../api/middleware.ts"
import { PageSessions } from "../../services/PageSessions.ts"
import { checkSession, type SessionCheck } from "./pageSessions.ts"

const digest = (value: string) => createHash("sha256").update(value).digest()

/** Compares in constant time (over digests, so the length does not leak either). */
const tokenMatches = (expected: Buffer, candidate: string) => timingSafeEqual(expected, digest(candidate))

/**
 * The bearer check: whether a credential is the token. An empty credential (what a missing header decodes to) never matches, and an
 * empty configured token matches nothing: a server given no token refuses every request.
 */
export const bearerAccepts = (token: string) => {
  const expected = digest(token)
  return (candidate: string) => token !== "" && candidate !== "" && tokenMatches(expected, candidate)
}

/**
 * Whether a request carries the token (`Authorization: Bearer`) or a page session, for what no
 * API middleware guards: requests no route takes, the hub's forwarding.
 */
export const checkCredentials = (accepts: (candidate: string) => boolean, sessions: PageSessions["Service"]) =>
(request: HttpServerRequest.HttpServerRequest): Effect.Effect<SessionCheck> => {
  const header = request.headers["authorization"] ?? ""
  return header.startsWith("Bearer ") && accepts(header.slice(7)) ? Effect.succeed("authorized") : checkSession(sessions, request)
}

/**
 * The `Authorization` middleware: the bearer token (`bearerAccepts`), or else a page session whose
 * request is a read or comes from this server's own origin.
 */
export const authorizationLayer = (token: string) => {
  const accepts = bearerAccepts(token)
  return Layer.effect(
    Authorization,
    Effect.gen(function*() {
      const sessions = yield* PageSessions
      return Authorization.of({
        bearer: (httpEffect, { credential }) => accepts(Redacted.value(credential)) ? httpEffect : Effect.fail(Unauthorized.missingToken()),
        // The key arrives as the credential; `checkSession` reads it with the cookie.
        session: (httpEffect) =>
          Effect.gen(function*() {
            const check = yield* checkSession(sessions, yield* HttpServerRequest.HttpServerRequest)
            if (check === "unauthorized") return yield* Unauthorized.missingToken()
            if (check === "cross-origin") return yield* CrossOriginRefused.ofSession()
            return yield* httpEffect
          })
      })
    })
  ).pipe(
    Layer.merge(Layer.succeed(
      TokenAuthorization,
      TokenAuthorization.of({
        bearer: (httpEffect, { credential }) => accepts(Redacted.value(credential)) ? httpEffect : Effect.fail(Unauthorized.missingToken())
      })
    ))
  )
}
