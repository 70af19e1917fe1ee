/**
 * The routes one runtime's server is driven through, for the session's directory: each call is
 * bounded by the request timeout, and any bad answer is a typed failure of its operation
 * (`ProviderFailed`). The probe's inventories are read by `probe.ts`, not here.
 */
import { Duration, Effect } from "effect"
import { ProviderFailed } from "../../../domain/errors.ts"
import { Acknowledged, MessageList, PtyList, PtyListV2, Session, SessionStatusMap } from "./apiTypes.ts"
import { openEventStream } from "./events.ts"
import { type BadAnswer, type Endpoint, getJson, requestJson, requestNoContent } from "./http.ts"

/** Builds the provider's failures: `refused` marks a request the runtime turned down before doing anything. */
export const providerFailure = (provider: string) => (operation: string, message: string, refused?: boolean) =>
  new ProviderFailed({ provider, operation, message, ...(refused === true ? { refused } : {}) })

/** Which server, for which directory, and how long each request may take. */
export interface ServerCallsOptions {
  readonly provider: string
  readonly endpoint: Endpoint
  /** The session's directory: it selects the server's instance on every v1 route. */
  readonly directory: string
  readonly requestTimeout: Duration.Duration
}

/** The newest assistant message's text, if it answers the newest user message: a turn's reply. */
export const replyOf = (messages: MessageList): string => {
  // Only an answer to this turn's prompt (after the newest user message) is its reply: an
  // aborted turn that never answered has none, not the previous turn's.
  const prompted = messages.findLastIndex((message) => message.info.role === "user")
  const answers = messages.slice(prompted + 1)
  const last = [...answers].reverse().find((message) => message.info.role === "assistant")
  return (last?.parts ?? [])
    .filter((part) => part.type === "text" && part.synthetic !== true)
    .map((part) => part.text ?? "")
    .join("")
}

/** The calls to one runtime's server; `session(id)` gives those about its session. */
export const makeServerCalls = (options: ServerCallsOptions) => {
  const { endpoint, requestTimeout } = options
  const failed = providerFailure(options.provider)
  const where = { directory: options.directory }

  /** One bounded request; any bad answer is a typed failure of the operation. */
  const call = <A>(operation: string, request: Effect.Effect<A, BadAnswer>): Effect.Effect<A, ProviderFailed> =>
    request.pipe(
      Effect.mapError((bad) => failed(operation, bad.message)),
      Effect.timeoutOrElse({
        duration: requestTimeout,
        orElse: () => Effect.fail(failed(operation, `no answer within ${Duration.format(requestTimeout)}`))
      })
    )

  /**
   * PTYs run in process groups of their own and outlive the server (verified on 1.18.33), so
   * they are removed through the API before the server ends; `DELETE` ends their process.
   */
  const removePtys = Effect.gen(function*() {
    const location = { "location[directory]": options.directory }
    const v1 = yield* getJson(endpoint, "pty", where, PtyList)
    yield* Effect.forEach(v1, (pty) =>
      requestJson(endpoint, { method: "DELETE", path: `pty/${encodeURIComponent(pty.id)}`, query: where }, Acknowledged), {
      discard: true
    })
    const v2 = yield* getJson(endpoint, "api/pty", location, PtyListV2)
    yield* Effect.forEach(v2.data, (pty) =>
      requestNoContent(endpoint, { method: "DELETE", path: `api/pty/${encodeURIComponent(pty.id)}`, query: location }), {
      discard: true
    })
  })

  const session = (sessionId: string) => {
    const sessionPath = (rest: string) => `session/${encodeURIComponent(sessionId)}${rest}`
    return {
      /** The reply of the turn that just ended (see {@link replyOf}). */
      reply: call(
        "reply",
        requestJson(endpoint, { method: "GET", path: sessionPath("/message"), query: { ...where, limit: "4" } }, MessageList)
      ).pipe(Effect.map(replyOf)),
      /** Starts a turn: `prompt_async` answers 204 at once; the turn's end comes as events. */
      prompt: (text: string) =>
        call(
          "prompt",
          requestNoContent(endpoint, {
            method: "POST",
            path: sessionPath("/prompt_async"),
            query: where,
            body: { parts: [{ type: "text", text }] }
          })
        ),
      abort: call(
        "abort",
        requestJson(endpoint, { method: "POST", path: sessionPath("/abort"), query: where }, Acknowledged)
      ).pipe(Effect.asVoid)
    }
  }

  return {
    /** Connects to the event stream (`events.ts`). */
    openEvents: call("events", openEventStream(endpoint, options.directory)),
    /** The statuses of the sessions executing now (an idle one is absent). */
    statuses: call("events", getJson(endpoint, "session/status", where, SessionStatusMap)),
    create: call("create", requestJson(endpoint, { method: "POST", path: "session", query: where, body: {} }, Session)),
    resume: (sessionId: string) =>
      call(
        "resume",
        requestJson(endpoint, { method: "GET", path: `session/${encodeURIComponent(sessionId)}`, query: where }, Session)
      ),
    /** Answers a permission request (`once` or `reject`). */
    replyPermission: (id: string, allow: boolean) =>
      call(
        "permission",
        requestJson(endpoint, {
          method: "POST",
          path: `permission/${encodeURIComponent(id)}/reply`,
          query: where,
          body: { reply: allow ? "once" : "reject" }
        }, Acknowledged)
      ),
    removePtys: call("close", removePtys),
    session
  }
}

/** The calls to one runtime's server. */
export type ServerCalls = ReturnType<typeof makeServerCalls>
