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
 * - `canStopRuntime`: work the adapter sees, then the P4 probe, then processes that left the
 *   server's tree (`stopCheck.ts`).
 *
 * This module composes the parts, each owning its state: the server process (`serverProcess.ts`),
 * its routes (`serverCalls.ts`), the event stream (`eventSubscription.ts`) and the session's state
 * the events drive (`sessionState.ts`, `sessionTree.ts`).
 */
import { Cause, Deferred, Duration, Effect, type Layer } from "effect"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import type { ProviderRegistrationRefused } from "../../../domain/errors.ts"
import type { AgentClient, AgentSession, SessionConfig } from "../../../domain/provider.ts"
import { ProviderRegistry } from "../../../services/ProviderRegistry.ts"
import type { CliProviderOptions } from "../process/cliOptions.ts"
import { descendantGroups, endGroups } from "../../../platform/detachedGroups.ts"
import { runtimeEnv } from "../../../platform/escapedProcesses.ts"
import { connectEvents } from "./eventSubscription.ts"
import { makeServerCalls, providerFailure } from "./serverCalls.ts"
import { type OpenCodeServer, startServer } from "./serverProcess.ts"
import { makeSessionState } from "./sessionState.ts"
import { stopCheck } from "./stopCheck.ts"

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

/** Where a runtime's server listens, the headers it requires (its password), and its session. */
export interface OpenCodeServerInfo {
  readonly pid: number
  readonly baseUrl: string
  readonly headers: Readonly<Record<string, string>>
  readonly sessionId: string
  /** The server's release, from `GET /global/health` at start. */
  readonly version: string
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
  const failed = providerFailure(provider)

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
      const stop = Effect.suspend(() => {
        running.delete(server)
        return server.process.terminate(closeGrace)
      })
      const calls = makeServerCalls({ provider, endpoint: server.endpoint, directory: config.cwd, requestTimeout })

      // The stream is connected (its first event seen) before any prompt, so no event is missed.
      const events = yield* connectEvents({ provider, server, calls, requestTimeout }).pipe(Effect.onError(() => stop))
      const abandon = Effect.andThen(Effect.sync(events.abort), stop)
      const session = yield* (resume === null ? calls.create : calls.resume(resume.sessionId)).pipe(
        Effect.onError(() => abandon)
      )
      const sessionId = session.id
      const sessionCalls = calls.session(sessionId)
      const state = makeSessionState({ provider, sessionId, noticeTimeout, onEvent: config.onEvent, reply: sessionCalls.reply })
      yield* events.start(state, scope).pipe(Effect.onError(() => abandon))

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
        events.closing()
        if (!Deferred.isDoneUnsafe(server.process.exited)) {
          yield* calls.removePtys.pipe(
            Effect.catch((error) =>
              Effect.logWarning("OpenCode PTYs could not be removed before close").pipe(
                Effect.annotateLogs({ provider, message: error.message })
              )
            )
          )
        }
        const groups = yield* commandGroups
        state.failTurn(failed("close", `the ${provider} runtime was closed during the turn`))
        events.abort()
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
        baseUrl: server.endpoint.baseUrl,
        headers: server.endpoint.headers ?? {},
        sessionId,
        version: server.version
      })
      const agentSession: AgentSession = {
        pid: server.process.pid,
        exited: Effect.asVoid(Deferred.await(server.process.exited)),
        persistence: Effect.succeed({ provider, sessionId, data: { directory: session.directory } }),
        startTurn: (text, turnId) =>
          Effect.suspend(() => {
            const gone = events.gone()
            return gone === undefined
              ? state.startTurn(turnId, sessionCalls.prompt(text))
              : Effect.fail(failed("prompt", `${provider} event stream is gone: ${gone}`, true))
          }),
        // Not offered: how 1.18.33 folds a prompt into a busy session (and which `idle` then ends
        // which prompt) is not verified, so the registry delivers the prompt after this turn.
        steer: undefined,
        outOfBand: () => undefined,
        respondToPermission: (id, allow) =>
          calls.replyPermission(id, allow).pipe(Effect.tap(() => Effect.sync(() => state.resolvePermission(id)))),
        interrupt: sessionCalls.abort,
        close: closeSession,
        canStopRuntime: stopCheck({
          provider,
          agentId: config.agentId,
          runtimeMarker: config.runtimeMarker,
          server,
          sessionId,
          trustMissingInventories: options.trustMissingInventories === true,
          events,
          state
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
