/**
 * The middleware the APIs declare: who may call (the bearer token, or a web page's session), how
 * large a body may be, and whether the daemon admits changes now. Declared here, their errors are
 * in the OpenAPI documents and the typed clients; the servers implement them (`layers/http`).
 */
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import {
  CrossOriginRefusedError,
  DaemonRetiringError,
  RequestTooLargeError,
  ShuttingDownError,
  StillOpeningError,
  UnauthorizedError
} from "./errors.ts"

/** The header that carries a page session's key. */
export const sessionKeyHeader = "quiesce-session-key"

/** The key as an HttpApi security scheme, beside the bearer token (the cookie is checked with it). */
export const sessionKeySecurity = HttpApiSecurity.apiKey({ in: "header", key: sessionKeyHeader })

/**
 * `Authorization: Bearer <token>` on every route but health, metrics, the OpenAPI document and the
 * login; or a web page's session: its cookie with its key in the `quiesce-session-key` header
 * (see layers/http/pageSessions.ts), which also needs the server's own origin for anything but a read.
 */
export class Authorization extends HttpApiMiddleware.Service<Authorization>()("quiesce/http/Authorization", {
  security: { bearer: HttpApiSecurity.bearer, session: sessionKeySecurity },
  error: [UnauthorizedError, CrossOriginRefusedError]
}) {}

/** The bearer token alone: what may hand out logins (a page session cannot renew itself). */
export class TokenAuthorization extends HttpApiMiddleware.Service<TokenAuthorization>()("quiesce/http/TokenAuthorization", {
  security: { bearer: HttpApiSecurity.bearer },
  error: UnauthorizedError
}) {}

/**
 * Bounds every request's body (413 `RequestTooLarge`): a declared `Content-Length` over the limit
 * is refused before any of the body is read, and a body without one is read no further than it.
 */
export class RequestBodyLimit extends HttpApiMiddleware.Service<RequestBodyLimit>()("quiesce/http/RequestBodyLimit", {
  error: RequestTooLargeError
}) {}

/** Refuses every mutating request with 503 until the daemon is ready, and once it stopped admitting work (shutdown). */
export class AdmissionGate extends HttpApiMiddleware.Service<AdmissionGate>()("quiesce/http/AdmissionGate", {
  error: [StillOpeningError, ShuttingDownError, DaemonRetiringError]
}) {}
