/**
 * The daemon's own middleware: the request body limit, the admission gate on mutations, and the
 * in-flight count around every request (with `Retry-After` on a 503).
 */
import { ByteSize, Effect, Layer } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { RequestTooLarge } from "../../api/errors.ts"
import { AdmissionGate, RequestBodyLimit } from "../../api/middleware.ts"
import { ShuttingDown, StillOpening } from "../../domain/errors.ts"
import { Admission } from "../../services/Admission.ts"
import { DaemonLifecycle } from "../../services/DaemonLifecycle.ts"
import { InFlightRequests } from "../../services/InFlightRequests.ts"

/** The body reader's own overflow (a defect of the payload decoder, an empty 413 if left alone). */
const isBodyTooLarge = (defect: unknown) =>
  HttpServerError.isHttpServerError(defect) && defect.reason._tag === "RequestParseError" &&
  defect.reason.reason === "BodyTooLarge"

/**
 * Bounds request bodies at `limitBytes`, answering 413 `RequestTooLarge` beyond it. A declared
 * `Content-Length` over the limit is refused before any of the body is read. Otherwise the limit
 * goes to the body reader (`MaxBodySize`), which stops reading a body (chunked, say) at the limit,
 * so memory stays bounded; the rest is drained and the connection closed by the server.
 */
export const requestBodyLimitLayer = (limitBytes: number) => {
  const maxBodySize = ByteSize.bytes(limitBytes)
  return Layer.succeed(
    RequestBodyLimit,
    // No span of its own: it wraps the whole request, whose server span is there already.
    RequestBodyLimit.of(Effect.fnUntraced(function*(httpEffect) {
      const declared = (yield* HttpServerRequest.HttpServerRequest).headers["content-length"]
      if (declared !== undefined && Number(declared) > limitBytes) return yield* RequestTooLarge.of(limitBytes)
      return yield* httpEffect.pipe(
        Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBodySize),
        Effect.catchDefect((defect) =>
          isBodyTooLarge(defect) ? Effect.fail(RequestTooLarge.of(limitBytes)) : Effect.die(defect)
        )
      )
    }))
  )
}

/** Mutations are refused once the shutdown began (`ShuttingDown`) or while a retirement is attempted (`DaemonRetiring`). */
export const admissionGateLayer = Layer.effect(
  AdmissionGate,
  Effect.gen(function*() {
    const admission = yield* Admission
    const lifecycle = yield* DaemonLifecycle
    return AdmissionGate.of((httpEffect) =>
      Effect.gen(function*() {
        const state = yield* admission.state
        if (state === "opening") return yield* StillOpening.of("request")
        if (state === "closed") return yield* ShuttingDown.of("request")
        yield* lifecycle.admit("request")
        return yield* httpEffect
      })
    )
  })
)

/**
 * Around every request: it counts as in flight (a retirement waits for it to leave), and a 503
 * (shutting down, retiring) tells the client when to try again.
 */
export const requestsLayer = Layer.unwrap(Effect.gen(function*() {
  const requests = yield* InFlightRequests
  const lifecycle = yield* DaemonLifecycle
  return HttpRouter.middleware((httpEffect) =>
    requests.track(httpEffect).pipe(
      Effect.map((response) =>
        response.status === 503
          ? HttpServerResponse.setHeader(response, "retry-after", String(lifecycle.retryAfterSeconds()))
          : response
      )
    ), { global: true })
}))
