/**
 * One request passed to a daemon and its answer passed back, over node:http with kept-alive
 * connections (a routed request should cost well under a millisecond beyond the daemon's own
 * work). Interrupting it (the hub's caller went away) aborts the request to the daemon. Beside it,
 * a stream opened at a daemon (an agent's live events), passed on as it comes (`openStream`).
 */
import { NodeStream } from "@effect/platform-node"
import { Effect, Option, Schema, type Scope, Stream } from "effect"
import { HttpTraceContext } from "effect/http"
import * as http from "node:http"
import type { RoutedRequest, RoutedResponse } from "../../domain/hubDaemons.ts"

/** The daemon could not be reached, or the connection broke before its answer was whole. */
export class ForwardFailed extends Schema.TaggedError<ForwardFailed>()("ForwardFailed", {
  message: Schema.String,
  /** The system's error code: `ECONNREFUSED` means nothing reached the daemon. */
  code: Schema.NullOr(Schema.String)
}) {}

const codeOf = (error: Error) => "code" in error && typeof error.code === "string" ? error.code : null

const header = (value: string | ReadonlyArray<string> | undefined) => typeof value === "string" ? value : value?.[0]

export interface ForwardOptions {
  /** How long the whole answer may take; undefined: as long as it takes (a prompt waiting for its turn). */
  readonly responseTimeoutMillis: number | undefined
}

/** How long connecting to a daemon may take (loopback: a daemon that does not accept is wedged or stopped). */
const connectTimeoutMillis = 5_000

const failedWith = (error: Error) => new ForwardFailed({ message: error.message, code: codeOf(error) })

/** The hub's span as W3C trace headers (`traceparent`), so the daemon's spans join the hub's trace; none outside a span. */
const traceHeaders = Effect.map(Effect.option(Effect.currentSpan), (span) => Option.isSome(span) ? HttpTraceContext.toHeaders(span.value) : {})

/** A daemon's answer passed back: its status, the headers the hub keeps, and its body. */
const answerOf = (response: http.IncomingMessage, body: Uint8Array): RoutedResponse => ({
  status: response.statusCode ?? 502,
  contentType: header(response.headers["content-type"]),
  retryAfter: header(response.headers["retry-after"]),
  body
})

export const makeForwarder = () => {
  const agent = new http.Agent({ keepAlive: true })
  return (target: { readonly baseUrl: string; readonly token: string }, request: RoutedRequest, options: ForwardOptions) =>
    Effect.flatMap(traceHeaders, (trace) => Effect.callback<RoutedResponse, ForwardFailed>((resume) => {
      const hasBody = request.method !== "GET" && request.method !== "HEAD"
      const timeout = (what: string, millis: number) =>
        setTimeout(() => {
          outgoing.destroy()
          resume(Effect.fail(new ForwardFailed({ message: `the daemon did not ${what} within ${millis} ms`, code: "ETIMEDOUT" })))
        }, millis)
      const outgoing = http.request(`${target.baseUrl}${request.path}${request.search}`, {
        method: request.method,
        agent,
        headers: {
          authorization: `Bearer ${target.token}`,
          ...trace,
          ...(hasBody
            ? { "content-type": request.contentType ?? "application/json", "content-length": String(request.body.byteLength) }
            : {})
        }
      }, (response) => resume(Effect.map(wholeBody(response), (body) => answerOf(response, body))))
      outgoing.on("error", (error) => resume(Effect.fail(failedWith(error))))
      const timers = [
        ...(options.responseTimeoutMillis === undefined ? [] : [timeout("answer", options.responseTimeoutMillis)])
      ]
      // A kept-alive socket is connected already; a new one must connect in time.
      outgoing.on("socket", (socket) => {
        if (socket.connecting) {
          const connecting = timeout("accept the connection", connectTimeoutMillis)
          socket.once("connect", () => clearTimeout(connecting))
          timers.push(connecting)
        }
      })
      outgoing.on("close", () => timers.forEach(clearTimeout))
      outgoing.end(hasBody ? request.body : undefined)
      return Effect.sync(() => outgoing.destroy())
    }))
}

/** A daemon's answer to a streaming request: its body as it comes (200), or its whole answer (a refusal). */
export type OpenedStream =
  | { readonly _tag: "stream"; readonly body: Stream.Stream<Uint8Array, ForwardFailed> }
  | { readonly _tag: "answer"; readonly response: RoutedResponse }

/** How long a daemon may take to answer a streaming request's headers. */
const streamHeadersTimeoutMillis = 30_000

/**
 * Opens a `GET` at the daemon whose answer is a stream (`GET /v1/agents/{id}/events`), with
 * `headers` added (`Last-Event-ID`) and the hub's span (W3C traceparent). Nothing is buffered: the
 * body is read as its reader pulls, so a slow reader slows the daemon's socket, not the hub's
 * memory. Its own connection (never a kept-alive one), destroyed when the scope closes: the
 * reader went away, the relay moved on, the hub stops.
 */
export const openStream = (
  target: { readonly baseUrl: string; readonly token: string },
  path: string,
  headers: Readonly<Record<string, string>>
): Effect.Effect<OpenedStream, ForwardFailed, Scope.Scope> =>
  Effect.flatMap(traceHeaders, (trace) =>
    Effect.acquireRelease(
      Effect.callback<{ readonly outgoing: http.ClientRequest; readonly response: http.IncomingMessage }, ForwardFailed>((resume) => {
        const outgoing = http.request(`${target.baseUrl}${path}`, {
          method: "GET",
          agent: false,
          headers: {
            ...headers,
            authorization: `Bearer ${target.token}`,
            ...trace
          }
        })
        const timer = setTimeout(() => {
          outgoing.destroy()
          resume(Effect.fail(
            new ForwardFailed({ message: `the daemon did not answer within ${streamHeadersTimeoutMillis} ms`, code: "ETIMEDOUT" })
          ))
        }, streamHeadersTimeoutMillis)
        outgoing.on("response", (response) => {
          clearTimeout(timer)
          resume(Effect.succeed({ outgoing, response }))
        })
        outgoing.on("error", (error) => {
          clearTimeout(timer)
          resume(Effect.fail(failedWith(error)))
        })
        outgoing.end()
        return Effect.sync(() => {
          clearTimeout(timer)
          outgoing.destroy()
        })
      }),
      ({ outgoing }) => Effect.sync(() => outgoing.destroy())
    )).pipe(
      Effect.flatMap(({ response }): Effect.Effect<OpenedStream, ForwardFailed> =>
        response.statusCode === 200
          ? Effect.succeed({
            _tag: "stream",
            body: NodeStream.fromReadable<Uint8Array, ForwardFailed>({
              evaluate: () => response,
              onError: (error) => error instanceof Error ? failedWith(error) : new ForwardFailed({ message: String(error), code: null })
            })
          })
          : Effect.map(wholeBody(response), (body) => ({ _tag: "answer", response: answerOf(response, body) }))
      )
    )

/** The rest of an answer, whole; interrupted (the caller went away), the answer is dropped. */
const wholeBody = (response: http.IncomingMessage) =>
  Effect.callback<Uint8Array, ForwardFailed>((resume) => {
    const chunks: Array<Buffer> = []
    response.on("data", (chunk: Buffer) => chunks.push(chunk))
    response.on("error", (error) => resume(Effect.fail(failedWith(error))))
    response.on("end", () => resume(Effect.succeed(Buffer.concat(chunks))))
    return Effect.sync(() => response.destroy())
  })
