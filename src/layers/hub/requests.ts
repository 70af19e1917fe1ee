/**
 * What a request routed to a home's daemon is: a mutation (which may start a retired daemon) or
 * not, as the daemon's API says of its endpoints (`StartsDaemon`); for a prompt, its client
 * message id; and whether the daemon's answer was a refusal to admit it.
 */
import { Context, Option, Schema } from "effect"
import { HttpApi } from "effect/http-api"
import { randomBytes } from "node:crypto"
import { StartsDaemon } from "../../api/annotations.ts"
import { QuiesceApi } from "../../api/QuiesceApi.ts"
import type { PreparedRequest, RoutedRequest, RoutedResponse } from "../../domain/hubDaemons.ts"

/** Whether a method only reads. */
export const isRead = (method: string) => method === "GET" || method === "HEAD"

/** An endpoint's path as a pattern: each `:param` one non-empty segment, the rest literal. */
const patternOf = (path: string) =>
  new RegExp(`^${path.split("/").map((segment) => segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("/")}$`)

/**
 * The daemon's endpoints that may start it (create, prompt, interrupt, permission answer, delete),
 * from their `StartsDaemon` annotation. Nothing else does — reads, retire now, collect, sweep,
 * close, unknown routes.
 */
export const startingRoutes: ReadonlyArray<{ readonly method: string; readonly path: string; readonly pattern: RegExp }> = (() => {
  const routes: Array<{ method: string; path: string; pattern: RegExp }> = []
  HttpApi.reflect(QuiesceApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      if (Context.getOption(endpoint.annotations, StartsDaemon).pipe(Option.getOrElse(() => false))) {
        routes.push({ method: endpoint.method, path: endpoint.path, pattern: patternOf(endpoint.path) })
      }
    }
  })
  return routes
})()

/** A mutation (create, prompt, permission answer, interrupt, delete): the only kind of request that may start a daemon. */
export const startsDaemon = (request: Pick<RoutedRequest, "method" | "path">) =>
  startingRoutes.some((route) => route.method === request.method && route.pattern.test(request.path))

const promptPath = /^\/v1\/agents\/[^/]+\/prompts$/

const JsonObject = Schema.fromJsonString(Schema.Record(Schema.String, Schema.Unknown))
const decodeObject = Schema.decodeUnknownOption(JsonObject)

/**
 * A prompt without a client message id gets one here (`hub-…`), so that the hub's own retries of
 * it (across a retirement, after a connection that broke) are answered from the daemon's journal
 * and never run it twice; the hub tells the caller which (`quiesce-client-message-id`). A body
 * the daemon would refuse anyway is passed on as it is.
 */
export const prepare = (request: RoutedRequest): PreparedRequest => {
  const mutation = startsDaemon(request)
  if (request.method !== "POST" || !promptPath.test(request.path)) return { request, mutation, prompt: undefined }
  const body = decodeObject(new TextDecoder().decode(request.body))
  if (Option.isNone(body)) return { request, mutation, prompt: undefined }
  const waits = body.value["wait"] === true
  const given = body.value["clientMessageId"]
  if (typeof given === "string") return { request, mutation, prompt: { clientMessageId: given, injected: false, waits } }
  if (given !== undefined) return { request, mutation, prompt: undefined }
  const clientMessageId = `hub-${randomBytes(12).toString("hex")}`
  return {
    request: { ...request, body: new TextEncoder().encode(JSON.stringify({ ...body.value, clientMessageId })) },
    mutation,
    prompt: { clientMessageId, injected: true, waits }
  }
}

const Refusal = Schema.fromJsonString(Schema.Struct({ _tag: Schema.String, retryAfterSeconds: Schema.optionalKey(Schema.Number) }))
const decodeRefusal = Schema.decodeUnknownOption(Refusal)

/** A 503 from a daemon that is retiring or shutting down: the request was not admitted. */
export const notAdmitted = (response: RoutedResponse) => {
  if (response.status !== 503) return Option.none()
  const refusal = decodeRefusal(new TextDecoder().decode(response.body))
  return Option.isSome(refusal) && (refusal.value._tag === "DaemonRetiring" || refusal.value._tag === "ShuttingDown")
    ? Option.some(refusal.value)
    : Option.none()
}
