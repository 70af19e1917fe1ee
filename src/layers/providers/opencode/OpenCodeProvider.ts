/**
 * OpenCode as a provider (P1, P4): each agent runtime is one `opencode serve` process on
 * 127.0.0.1 (see `serverProcess.ts`), driven over its v1 HTTP API for the session's directory:
 *
 * - create: `POST /session?directory=D`; resume: a new server, then `GET /session/{id}?directory=D`
 *   (sessions persist in the server's data dir, `$XDG_DATA_HOME/opencode/opencode.db`);
 * - a turn: `POST /session/{id}/prompt_async` (204), then the event stream until the session, having
 *   been `busy`, is `idle` again; the reply is the text of the newest assistant message;
 * - interrupt: `POST /session/{id}/abort`; permissions: `permission.asked` events of the session or
 *   any descendant session, answered with `POST /permission/{id}/reply` (`once` / `reject`);
 * - events: a stream that ends while the server lives is reopened (bounded); failing that, turns
 *   and the probe fail;
 * - close: ends the server's process group, then the groups its commands run in; the saved
 *   session stays;
 * - `canStopRuntime`: work the adapter sees (a turn, a pending permission, a completion notice not
 *   yet run) vetoes at once; otherwise the P4 probe reads this server's inventories for the
 *   session (`probe.ts`); last, a process the server started that runs outside its tree (a job the
 *   `bash` tool backgrounded with `&`, found by the runtime's environment marker, see
 *   `escapedProcesses.ts`) vetoes while it runs. Such processes are never ended. Every veto says
 *   what holds the runtime.
 */
import { Cause, Deferred, Duration, Effect, Exit, type Layer, Schedule, Schema } from "effect"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import { ProviderFailed, type ProviderRegistrationRefused, RuntimeProbeFailed } from "../../../domain/errors.ts"
import {
  type AgentClient,
  type AgentSession,
  type SessionConfig,
  type StopAnswer,
  stopPermitted,
  stopVetoed,
  type TurnEnd
} from "../../../domain/provider.ts"
import { ProviderRegistry } from "../../../services/ProviderRegistry.ts"
import { readUntilDone } from "../plugin/PluginProcess.ts"
import { descendantGroups, endGroups } from "../../../platform/detachedGroups.ts"
import { escapedProcesses, escapedReason, runtimeEnv } from "../../../platform/escapedProcesses.ts"
import {
  Acknowledged,
  type EventEnvelope,
  MessageList,
  PermissionAskedEvent,
  PermissionRepliedEvent,
  PtyList,
  PtyListV2,
  Session,
  SessionCreatedEvent,
  SessionErrorEvent,
  SessionScoped,
  SessionStatusEvent,
  SessionStatusMap
} from "./apiTypes.ts"
import { openEventStream } from "./events.ts"
import { type BadAnswer, getJson, requestJson, requestNoContent } from "./http.ts"
import { canStopRuntime } from "./probe.ts"
import { type OpenCodeServer, startServer } from "./serverProcess.ts"
import type { CliProviderOptions } from "../process/cliOptions.ts"

/**
 * Defaults: provider "opencode", command "opencode", args `serve --hostname 127.0.0.1 --port 0`
 * (they must run the server on loopback); useful env: `OPENCODE_CONFIG`, `XDG_DATA_HOME`.
 */
export interface OpenCodeProviderOptions extends CliProviderOptions {
  /** How long the server may take to start answering. Default 60 s. */
  readonly startTimeout?: Duration.Input | undefined
  /** Told where each server listens once it answers, with its session id (for inspection and tests). */
  readonly onServer?: ((server: OpenCodeServerInfo) => void) | undefined
  /**
   * How long a completion notice may stay unseen: after a child session goes idle, the parent is
   * expected to run its notice turn (busy, then idle). Until then the release is vetoed; past this
   * bound the probe fails (`RuntimeProbeFailed`), which retains too. Default 5 minutes.
   */
  readonly completionNoticeTimeout?: Duration.Input | undefined
  /**
   * Default false: an inventory the server does not serve retains the runtime (unknown is never
   * empty), so releases lacking the v2 inbox and shell list are never released. True reads their
   * absence as empty for releases known to lack them; every inventory they serve still vetoes.
   */
  readonly trustMissingInventories?: boolean | undefined
}

const decodeWith = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) => {
  const decode = Schema.decodeUnknownOption(schema)
  return (value: unknown): S["Type"] | undefined => {
    const decoded = decode(value)
    return decoded._tag === "Some" ? decoded.value : undefined
  }
}
const asScoped = decodeWith(SessionScoped)
const asStatus = decodeWith(SessionStatusEvent)
const asError = decodeWith(SessionErrorEvent)
const asPermissionAsked = decodeWith(PermissionAskedEvent)
const asPermissionReplied = decodeWith(PermissionRepliedEvent)
const asCreated = decodeWith(SessionCreatedEvent)

/** Where a runtime's server listens, the headers it requires (its password), and its session. */
export interface OpenCodeServerInfo {
  readonly pid: number
  readonly baseUrl: string
  readonly headers: Readonly<Record<string, string>>
  readonly sessionId: string
  /** The server's release, from `GET /global/health` at start. */
  readonly version: string
}

/** How often a lost event stream is reopened before the runtime is declared broken. */
const reconnectAttempts = 3
const reconnectDelay = "250 millis"
/** A stream that lived this long before it ended was healthy: the reconnect budget is restored. */
const healthyStream = 10_000

/** A child session went idle; its parent's completion notice turn has not been seen yet. */
interface Notice {
  readonly child: string
  readonly since: number
  sawBusy: boolean
}

/** The turn in flight: it ends at the first `idle` after the session was seen `busy`. */
interface Turn {
  /** The daemon's id for the turn, which a veto names. */
  readonly id: string
  readonly done: Deferred.Deferred<TurnEnd, ProviderFailed>
  sawBusy: boolean
  error: string | undefined
}

/**
 * The OpenCode client, not yet registered: each session one `opencode serve` process driven over
 * HTTP. Every server still running ends when the scope closes; {@link layer} registers it.
 */
export const makeOpenCodeClient = Effect.fnUntraced(function*(options: OpenCodeProviderOptions) {
  const provider = options.provider ?? "opencode"
  const scope = yield* Effect.scope
  const requestTimeout = Duration.fromInputUnsafe(options.requestTimeout ?? "30 seconds")
  const closeGrace = options.closeGrace ?? "2 seconds"
  const noticeTimeout = Duration.toMillis(Duration.fromInputUnsafe(options.completionNoticeTimeout ?? "5 minutes"))
  /** Each live server, with how to close it: the session's own close once it has one. */
  const running = new Map<OpenCodeServer, Effect.Effect<void>>()
  const failed = (operation: string, message: string, refused?: boolean) =>
    new ProviderFailed({ provider, operation, message, ...(refused === true ? { refused } : {}) })

  yield* Effect.addFinalizer(() =>
    Effect.forEach([...running.values()], (close) => close, {
      concurrency: "unbounded",
      discard: true
    })
  )

  const open = (config: SessionConfig, resume: PersistenceHandle | null) =>
    Effect.gen(function*() {
      // Marks every process the runtime starts, so jobs that leave its tree are still seen (probe).
      const server = yield* startServer({
        command: options.command ?? "opencode",
        args: options.args ?? ["serve", "--hostname", "127.0.0.1", "--port", "0"],
        env: { ...options.env, ...runtimeEnv(config.runtimeMarker) },
        cwd: config.cwd,
        startTimeout: options.startTimeout ?? "60 seconds",
        onSpawn: options.onSpawn
      }).pipe(Effect.mapError((error) => failed("spawn", `${provider}: ${error.message}`)))
      running.set(server, server.process.terminate(closeGrace))
      const endpoint = server.endpoint
      const where = { directory: config.cwd }
      const stop = Effect.suspend(() => {
        running.delete(server)
        return server.process.terminate(closeGrace)
      })

      /** One bounded request; any bad answer is a typed failure of the operation. */
      const call = <A>(operation: string, request: Effect.Effect<A, BadAnswer>): Effect.Effect<A, ProviderFailed> =>
        request.pipe(
          Effect.mapError((bad) => failed(operation, bad.message)),
          Effect.timeoutOrElse({
            duration: requestTimeout,
            orElse: () => Effect.fail(failed(operation, `no answer within ${Duration.format(requestTimeout)}`))
          })
        )

      // The stream is connected (its first event seen) before any prompt, so no event is missed.
      let stream = yield* call("events", openEventStream(endpoint, config.cwd)).pipe(
        Effect.mapError((error) => failed(error.operation, `${error.message}; server stderr: ${server.process.stderrTail()}`)),
        Effect.onError(() => stop)
      )
      const connected = Deferred.makeUnsafe<void, ProviderFailed>()
      const abortStream = () => stream.abort()

      const session = yield* (resume === null
        ? call("create", requestJson(endpoint, { method: "POST", path: "session", query: where, body: {} }, Session))
        : call(
          "resume",
          requestJson(endpoint, { method: "GET", path: `session/${encodeURIComponent(resume.sessionId)}`, query: where }, Session)
        )).pipe(Effect.onError(() => Effect.andThen(Effect.sync(abortStream), stop)))
      const sessionId = session.id
      const sessionPath = (rest: string) => `session/${encodeURIComponent(sessionId)}${rest}`

      let turn: Turn | undefined
      const permissions = new Set<string>()
      /** Every descendant session seen created (child, grandchild, …), with its parent. */
      const parentOf = new Map<string, string>()
      /** Descendants reported as running subagents (until they go idle). */
      const runningChildren = new Set<string>()
      /** Sessions of the tree last seen busy (or retrying). */
      const busySessions = new Set<string>()
      /**
       * Completion notices not yet seen: when a child session goes idle, 1.18.33 runs a turn of its
       * own in the parent. Until that parent has been seen busy and then idle again, the notice is
       * work the inventories may not show (the inbox 1.18.33 lacks), so it vetoes.
       */
      const notices = new Map<string, Notice>()
      /** Set once the event stream is gone for good: turns and the probe then fail. */
      let broken: string | undefined
      let closing = false

      const inTree = (id: string) => id === sessionId || parentOf.has(id)

      /** What the adapter itself sees holding the runtime (a turn, a permission), if anything. */
      const adapterWork = (): string | undefined => {
        if (turn !== undefined) return `turn ${turn.id} is running`
        if (permissions.size === 0) return undefined
        const ids = [...permissions]
        const shown = ids.slice(0, 3).join(", ")
        const more = ids.length > 3 ? ` and ${ids.length - 3} more` : ""
        return ids.length === 1 ? `permission ${shown} is pending` : `permissions ${shown}${more} are pending`
      }

      /** The oldest notice not yet seen, and whether it is past the bound. */
      const pendingNotice = () => {
        const [parent, notice] = [...notices].sort((a, b) => a[1].since - b[1].since)[0] ?? []
        if (parent === undefined || notice === undefined) return undefined
        const overdue = Date.now() - notice.since > noticeTimeout
        return {
          overdue,
          reason: overdue
            ? `session ${parent} did not run the completion notice of ${notice.child} within ${noticeTimeout} ms`
            : `session ${parent} has not yet run the completion notice of ${notice.child}`
        }
      }

      const finishTurn = (exit: Exit.Exit<TurnEnd, ProviderFailed>) => {
        const current = turn
        turn = undefined
        if (current !== undefined) Deferred.doneUnsafe(current.done, exit)
      }

      const resolvePermission = (id: string) => {
        if (permissions.delete(id)) config.onEvent({ _tag: "PermissionResolved", id })
      }

      /** The newest assistant message's text: the turn's reply. */
      const replyText = call(
        "reply",
        requestJson(endpoint, { method: "GET", path: sessionPath("/message"), query: { ...where, limit: "4" } }, MessageList)
      ).pipe(Effect.map((messages) => {
        // Only an answer to this turn's prompt (after the newest user message) is its reply: an
        // aborted turn that never answered has none, not the previous turn's.
        const prompted = messages.findLastIndex((message) => message.info.role === "user")
        const answers = messages.slice(prompted + 1)
        const last = [...answers].reverse().find((message) => message.info.role === "assistant")
        return (last?.parts ?? [])
          .filter((part) => part.type === "text" && part.synthetic !== true)
          .map((part) => part.text ?? "")
          .join("")
      }))

      const turnEnded = (current: Turn): Effect.Effect<void> =>
        replyText.pipe(
          Effect.tap((text) => Effect.sync(() => config.onEvent({ _tag: "Reply", text }))),
          Effect.matchEffect({
            onFailure: (error) => Effect.sync(() => finishTurn(Exit.fail(error))),
            onSuccess: (text) =>
              Effect.sync(() =>
                finishTurn(
                  current.error === undefined
                    ? Exit.succeed({ reply: text === "" ? null : text })
                    : Exit.fail(failed("turn", current.error))
                )
              )
          })
        )

      /** A status of a session of the tree: subagents, completion notices, and our turn. */
      const statusOf = (about: string, status: "idle" | "busy" | "retry"): Effect.Effect<void> => {
        if (status === "idle") {
          const wasBusy = busySessions.delete(about)
          const notice = notices.get(about)
          if (notice !== undefined && (notice.sawBusy || wasBusy)) notices.delete(about)
          const parent = parentOf.get(about)
          if (parent !== undefined && wasBusy) {
            // The parent's notice turn may already be running; then its own idle settles it.
            notices.set(parent, { child: about, since: Date.now(), sawBusy: busySessions.has(parent) })
          }
          if (runningChildren.delete(about)) config.onEvent({ _tag: "SubagentFinished", id: about })
        } else {
          busySessions.add(about)
          const notice = notices.get(about)
          if (notice !== undefined) notice.sawBusy = true
        }
        if (about !== sessionId) return Effect.void
        const current = turn
        if (current === undefined) return Effect.void
        if (status !== "idle") current.sawBusy = true
        // An `idle` before this turn went busy is left over from an earlier one (aborts repeat it).
        if (status === "idle" && current.sawBusy) return turnEnded(current)
        return Effect.void
      }

      const onEvent = (event: EventEnvelope): Effect.Effect<void> => {
        if (event.type === "server.connected") {
          Deferred.doneUnsafe(connected, Exit.void)
          return Effect.void
        }
        const created = event.type === "session.created" ? asCreated(event.properties) : undefined
        if (created !== undefined) {
          const { id, parentID } = created.info
          // Descendants at any depth: a grandchild names a child we already track.
          if (parentID !== undefined && inTree(parentID) && !inTree(id)) {
            parentOf.set(id, parentID)
            runningChildren.add(id)
            config.onEvent({ _tag: "SubagentStarted", id })
          }
          return Effect.void
        }
        if (event.type === "session.error") {
          const error = asError(event.properties)
          if (error?.sessionID === sessionId && turn !== undefined && error.error?.name !== "MessageAbortedError") {
            turn.error = `${error.error?.name ?? "error"}: ${JSON.stringify(error.error?.data ?? null).slice(0, 300)}`
          }
          return Effect.void
        }
        const about = asScoped(event.properties)?.sessionID
        if (about === undefined || !inTree(about)) return Effect.void
        config.onEvent({ _tag: "Activity" })
        switch (event.type) {
          case "permission.asked": {
            // A subagent's permission too: unanswered, the subagent would wait forever.
            const asked = asPermissionAsked(event.properties)
            if (asked !== undefined && !permissions.has(asked.id)) {
              permissions.add(asked.id)
              config.onEvent({ _tag: "PermissionRequested", id: asked.id })
            }
            return Effect.void
          }
          case "permission.replied": {
            const replied = asPermissionReplied(event.properties)
            if (replied !== undefined) resolvePermission(replied.requestID)
            return Effect.void
          }
          case "session.idle":
            return statusOf(about, "idle")
          case "session.status": {
            const status = asStatus(event.properties)?.status.type
            return status === undefined ? Effect.void : statusOf(about, status)
          }
          default:
            return Effect.void
        }
      }

      const logMalformed = (payloads: ReadonlyArray<string>) =>
        Effect.forEach(payloads, (payload) =>
          Effect.logWarning("OpenCode event did not decode").pipe(Effect.annotateLogs({ provider, payload })), {
          discard: true
        })

      /** The stream is gone for good: the turn fails, later turns and probes fail too. */
      const streamLost = (why: string) =>
        Effect.sync(() => {
          broken ??= why
          abortStream()
          Deferred.doneUnsafe(connected, Exit.fail(failed("events", why)))
          finishTurn(Exit.fail(failed("events", `${provider} event stream ended: ${why}`)))
        })

      /**
       * After a reconnect, events sent while no stream was open are lost: the statuses are read
       * again, so a turn whose idle was missed still ends and a busy session is not forgotten.
       */
      const resync = call("events", getJson(endpoint, "session/status", where, SessionStatusMap)).pipe(
        Effect.flatMap((statuses) => {
          const idle = [...busySessions].filter((id) => !Object.hasOwn(statuses, id))
          for (const [id, status] of Object.entries(statuses)) {
            if (inTree(id) && status.type !== "idle") busySessions.add(id)
          }
          return Effect.forEach(idle, (id) => statusOf(id, "idle"), { discard: true })
        })
      )

      /** Reads one stream until it ends; then reconnects (bounded) while the server lives. */
      const pump = (attemptsLeft: number): Effect.Effect<void> => {
        const opened = Date.now()
        return readUntilDone(
          stream.next.pipe(
            Effect.flatMap((batch) =>
              batch === undefined
                ? Effect.succeed(false)
                : logMalformed(batch.malformed).pipe(
                  Effect.andThen(Effect.forEach(batch.events, onEvent, { discard: true })),
                  Effect.as(true)
                )
            )
          )
        ).pipe(
          Effect.matchEffect({
            onFailure: (bad) => Effect.succeed(bad.message),
            onSuccess: () => Effect.succeed("closed by the server")
          }),
          Effect.flatMap((why) => {
            abortStream()
            if (closing || broken !== undefined || Deferred.isDoneUnsafe(server.process.exited)) {
              return streamLost(why)
            }
            return reconnect(why, Date.now() - opened > healthyStream ? reconnectAttempts : attemptsLeft)
          })
        )
      }

      /** Up to `attemptsLeft` tries to reopen; every stream after that shares what is left. */
      const reconnect = (why: string, attemptsLeft: number): Effect.Effect<void> => {
        if (attemptsLeft <= 0) return streamLost(`${why}; it kept ending (${reconnectAttempts} reconnects)`)
        let tries = 0
        return call("events", openEventStream(endpoint, config.cwd)).pipe(
          Effect.tap(() => Effect.sync(() => tries++)),
          Effect.tapError(() => Effect.sync(() => tries++)),
          Effect.retry({ times: attemptsLeft - 1, schedule: Schedule.spaced(reconnectDelay) }),
          Effect.matchEffect({
            onFailure: (error) =>
              Effect.logWarning("OpenCode event stream could not be reopened").pipe(
                Effect.annotateLogs({ provider, ended: why, message: error.message }),
                Effect.andThen(streamLost(`${why}; reconnecting failed: ${error.message}`))
              ),
            onSuccess: (reopened) =>
              Effect.gen(function*() {
                stream = reopened
                if (closing) return yield* streamLost(why)
                yield* Effect.logInfo("OpenCode event stream reopened").pipe(Effect.annotateLogs({ provider, ended: why }))
                yield* resync.pipe(Effect.catch((error) => streamLost(`${why}; ${error.message}`)))
                return yield* pump(attemptsLeft - tries)
              })
          })
        )
      }

      yield* pump(reconnectAttempts).pipe(Effect.ensuring(Effect.sync(abortStream)), Effect.forkIn(scope))
      yield* Deferred.await(server.process.exited).pipe(
        Effect.flatMap((code) => streamLost(`${provider} exited with code ${code}`)),
        Effect.forkIn(scope)
      )

      yield* Deferred.await(connected).pipe(
        Effect.timeoutOrElse({
          duration: requestTimeout,
          orElse: () => Effect.fail(failed("events", "the event stream sent nothing"))
        }),
        Effect.onError(() => Effect.andThen(Effect.sync(abortStream), stop))
      )

      /**
       * PTYs run in process groups of their own and outlive the server (verified on 1.18.33), so
       * they are removed through the API before the server ends; `DELETE` ends their process.
       */
      const removePtys = Effect.gen(function*() {
        const location = { "location[directory]": config.cwd }
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

      /**
       * Commands of the `bash` tool run in process groups of their own: they are noted while they
       * are still the server's descendants (never once it has exited: its pid may be reused) and
       * ended after it. A job backgrounded with `&` was reparented to init already and is not found.
       */
      const commandGroups = Effect.sync(() => {
        if (Deferred.isDoneUnsafe(server.process.exited)) return []
        const groups = descendantGroups(server.process.pid)
        for (const group of groups) options.onSpawn?.(group)
        return groups
      })

      const closeSession: Effect.Effect<void> = Effect.gen(function*() {
        closing = true
        if (!Deferred.isDoneUnsafe(server.process.exited)) {
          yield* call("close", removePtys).pipe(
            Effect.catch((error) =>
              Effect.logWarning("OpenCode PTYs could not be removed before close").pipe(
                Effect.annotateLogs({ provider, message: error.message })
              )
            )
          )
        }
        const groups = yield* commandGroups
        finishTurn(Exit.fail(failed("close", `the ${provider} runtime was closed during the turn`)))
        abortStream()
        yield* stop
        yield* endGroups(groups, closeGrace)
      }).pipe(
        Effect.catchCause((cause) =>
          Effect.logWarning("OpenCode did not close cleanly").pipe(
            Effect.annotateLogs({ provider, cause: Cause.pretty(cause) })
          )
        )
      )
      running.set(server, closeSession)

      options.onServer?.({
        pid: server.process.pid,
        baseUrl: endpoint.baseUrl,
        headers: endpoint.headers ?? {},
        sessionId,
        version: server.version
      })
      const agentSession: AgentSession = {
        pid: server.process.pid,
        exited: Effect.asVoid(Deferred.await(server.process.exited)),
        persistence: Effect.succeed({ provider, sessionId, data: { directory: session.directory } }),
        startTurn: (text, turnId) =>
          Effect.gen(function*() {
            if (broken !== undefined) return yield* failed("prompt", `${provider} event stream is gone: ${broken}`, true)
            if (turn !== undefined) return yield* failed("prompt", "a turn is already running", true)
            const current: Turn = {
              id: turnId,
              done: Deferred.makeUnsafe<TurnEnd, ProviderFailed>(),
              sawBusy: false,
              error: undefined
            }
            turn = current
            yield* call(
              "prompt",
              requestNoContent(endpoint, {
                method: "POST",
                path: sessionPath("/prompt_async"),
                query: where,
                body: { parts: [{ type: "text", text }] }
              })
            ).pipe(Effect.onError(() => Effect.sync(() => {
              if (turn === current) turn = undefined
            })))
            return Deferred.await(current.done)
          }),
        // Not offered: how 1.18.33 folds a prompt into a busy session (and which `idle` then ends
        // which prompt) is not verified, so the registry delivers the prompt after this turn.
        steer: undefined,
        outOfBand: () => undefined,
        respondToPermission: (id, allow) =>
          call(
            "permission",
            requestJson(endpoint, {
              method: "POST",
              path: `permission/${encodeURIComponent(id)}/reply`,
              query: where,
              body: { reply: allow ? "once" : "reject" }
            }, Acknowledged)
          ).pipe(Effect.tap(() => Effect.sync(() => resolvePermission(id)))),
        interrupt: call(
          "abort",
          requestJson(endpoint, { method: "POST", path: sessionPath("/abort"), query: where }, Acknowledged)
        ).pipe(Effect.asVoid),
        close: closeSession,
        canStopRuntime: Effect.suspend(() => {
          const probeFailed = (message: string) =>
            Effect.fail(new RuntimeProbeFailed({ agentId: config.agentId, message: `${provider}: ${message}` }))
          // Without the event stream the adapter cannot see turns, permissions or notices.
          if (broken !== undefined) return probeFailed(`event stream is gone: ${broken}`)
          // Work the adapter sees is an answer already; the server is not asked.
          const own = adapterWork()
          if (own !== undefined) return Effect.succeed(stopVetoed(own))
          const waiting = pendingNotice()
          if (waiting !== undefined) {
            return waiting.overdue
              ? probeFailed(waiting.reason)
              : Effect.logDebug("OpenCode release vetoed").pipe(
                Effect.annotateLogs({ provider, reason: waiting.reason }),
                Effect.as(stopVetoed(waiting.reason))
              )
          }
          return canStopRuntime({
            agentId: config.agentId,
            baseUrl: endpoint.baseUrl,
            headers: endpoint.headers,
            sessionId,
            trustMissingInventories: options.trustMissingInventories === true
              ? { serverVersion: server.version }
              : undefined
          }).pipe(
            // A turn, a permission or a notice may have appeared while the server answered.
            Effect.map((answer): StopAnswer => {
              if (!answer.canStop) return answer
              const since = adapterWork() ?? pendingNotice()?.reason
              return since === undefined ? answer : stopVetoed(since)
            }),
            // Last: a job the bash tool left behind (`&`) runs outside the server's tree and no
            // inventory lists it; it vetoes while it runs and is never ended by the adapter.
            Effect.flatMap((answer): Effect.Effect<StopAnswer, RuntimeProbeFailed> =>
              answer.canStop
                ? escapedProcesses(server.process.pid, config.runtimeMarker).pipe(
                  Effect.mapError((error) =>
                    new RuntimeProbeFailed({ agentId: config.agentId, message: `${provider}: ${error.message}` })
                  ),
                  Effect.flatMap((escaped) => {
                    if (escaped.length === 0) return Effect.succeed(stopPermitted)
                    const reason = escapedReason(escaped)
                    return Effect.logDebug("OpenCode release vetoed").pipe(
                      Effect.annotateLogs({ provider, reason }),
                      Effect.as(stopVetoed(reason))
                    )
                  })
                )
                : Effect.succeed(answer)
            )
          )
        })
      }
      return agentSession
    })

  const client: AgentClient = {
    provider,
    create: (config) => open(config, null),
    resume: (handle, config) => open(config, handle)
  }
  return client
})

/** Adds the OpenCode provider to the `ProviderRegistry`; its servers end with the layer. */
export const layer = (options: OpenCodeProviderOptions = {}): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> =>
  ProviderRegistry.register(makeOpenCodeClient(options))
