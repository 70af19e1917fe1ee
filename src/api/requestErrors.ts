/**
 * The errors of a request the API could not take as it came, whichever route it was meant for:
 * a body, path or query that fails its schema, a body in a media type the operation does not
 * read, a path no route has, a method the path does not take, and the server's own failure.
 * Each is a typed error answered as the API's one problem shape (see problem.ts), so a client
 * reads them as it reads every other error. Shared by the daemon's and the hub's APIs; the server
 * side is `layers/http/requestProblems.ts`.
 */
import { Schema } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import { asProblem } from "./problem.ts"

/** One invalid value of a request: where it is (its slot first: `payload`, `params`, `query`) and what is wrong. */
export const RequestIssue = Schema.Struct({
  path: Schema.Array(Schema.Union([Schema.String, Schema.Int])),
  message: Schema.String
})
export type RequestIssue = typeof RequestIssue.Type

/** The request's body, path parameters or query failed their schema; nothing was done. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  message: Schema.String,
  /** Every invalid value, not just the first. */
  errors: Schema.Array(RequestIssue)
}) {
  /** The issues as one sentence: `payload.cwd: Missing key; payload.extra: Expected no excess property`. */
  static readonly of = (errors: ReadonlyArray<RequestIssue>) =>
    new InvalidRequest({
      message: `Invalid request: ${errors.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ")}`,
      errors
    })
}

/** The body's media type is not one the operation reads (the API reads `application/json`); nothing was done. */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", {
  message: Schema.String,
  contentType: Schema.String
}) {
  static readonly of = (contentType: string) =>
    new UnsupportedMediaType({
      message: `A body of type ${contentType} is not read here: send application/json`,
      contentType
    })
}

/** No route has this path. */
export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()("RouteNotFound", {
  message: Schema.String,
  method: Schema.String,
  path: Schema.String
}) {
  static readonly of = (method: string, path: string) =>
    new RouteNotFound({ message: `No route ${method} ${path}`, method, path })
}

/** The path has routes, none for this method; `allow` lists the methods it takes (also the `Allow` header). */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", {
  message: Schema.String,
  method: Schema.String,
  path: Schema.String,
  allow: Schema.Array(Schema.String)
}) {
  static readonly of = (method: string, path: string, allow: ReadonlyArray<string>) =>
    new MethodNotAllowed({ message: `${path} takes ${allow.join(", ")}, not ${method}`, method, path, allow })
}

/** The server failed to answer (a bug: it is logged); whether anything was done is unknown. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  message: Schema.String
}) {}

export const InvalidRequestError = InvalidRequest.pipe(asProblem(400))
export const UnsupportedMediaTypeError = UnsupportedMediaType.pipe(asProblem(415))
export const RouteNotFoundError = RouteNotFound.pipe(asProblem(404))
export const MethodNotAllowedError = MethodNotAllowed.pipe(asProblem(405))
export const InternalErrorError = InternalError.pipe(asProblem(500))

/**
 * On every operation: a request whose body, path parameters or query fail their schema is 400
 * `InvalidRequest` (a body's unknown members too: the schemas say `additionalProperties: false`),
 * a body of another media type 415 `UnsupportedMediaType`, and a response that fails its own
 * schema 500 `InternalError`. Declared here, it is in the OpenAPI document and the typed clients.
 */
export class RequestProblems extends HttpApiMiddleware.Service<RequestProblems>()("quiesce/http/RequestProblems", {
  error: [InvalidRequestError, UnsupportedMediaTypeError, InternalErrorError]
}) {}
