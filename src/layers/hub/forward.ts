/**
 * One request passed to a daemon and its answer passed back, over node:http with kept-alive
 * connections (a routed request should cost well under a millisecond beyond the daemon's own
 * work). Interrupting it (the hub's caller went away) aborts the request to the daemon.
 */
import { Effect, Option, Schema } from "effect"
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

export const makeForwarder = () => {
  const agent = new http.Agent({ keepAlive: true })
  return (target: { readonly baseUrl: string; readonly token: string }, request: RoutedRequest, options: ForwardOptions) =>
    // The hub's span goes along (W3C traceparent), so the daemon's spans join the hub's trace.
    Effect.flatMap(Effect.option(Effect.currentSpan), (span) => Effect.callback<RoutedResponse, ForwardFailed>((resume) => {
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
          ...(Option.isSome(span) ? HttpTraceContext.toHeaders(span.value) : {}),
          ...(hasBody
            ? { "content-type": request.contentType ?? "application/json", "content-length": String(request.body.byteLength) }
            : {})
        }
      }, (response) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on("error", (error) => resume(Effect.fail(new ForwardFailed({ message: error.message, code: codeOf(error) }))))
        response.on("end", () =>
          resume(Effect.succeed({
            status: response.statusCode ?? 502,
            contentType: header(response.headers["content-type"]),
            retryAfter: header(response.headers["retry-after"]),
            body: Buffer.concat(chunks)
          })))
      })
      outgoing.on("error", (error) => resume(Effect.fail(new ForwardFailed({ message: error.message, code: codeOf(error) }))))
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
