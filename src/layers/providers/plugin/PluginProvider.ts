import { Cause, Deferred, type Duration, Effect, Exit, type Layer, Schema } from "effect"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import { PluginProtocolError, ProviderFailed, type ProviderRegistrationRefused, RuntimeProbeFailed } from "../../../domain/errors.ts"
import {
  CanStopResult,
  type DaemonMessage,
  decodePluginLine,
  encodeDaemonMessage,
  type PluginMessage,
  PromptAccepted,
  protocolVersions
} from "../../../domain/pluginProtocol.ts"
import {
  type AgentSession,
  type SessionConfig,
  type SessionEvent,
  stopPermitted,
  stopVetoed,
  type TurnEnd
} from "../../../domain/provider.ts"
import { ProviderRegistry } from "../../../services/ProviderRegistry.ts"
import { makeCliRuntimes } from "../process/cliRuntimes.ts"
import { runtimeEnv } from "../../../platform/escapedProcesses.ts"
import { startJsonLinePeer } from "../process/jsonLinePeer.ts"
import { type StartedProcess, startThenBindClient } from "../process/startThenBind.ts"
import type { PluginCommand } from "./PluginProcess.ts"

/** How to run one plugin provider: its id, the plugin command, its home, and its timeouts. */
export interface PluginProviderOptions {
  /** The provider id agents name. */
  readonly provider: string
  readonly plugin: PluginCommand
  /** Directory handed to the plugin for its own state. */
  readonly home: string
  /** How long a request may wait for its reply. Default 30 s. */
  readonly requestTimeout?: Duration.Input | undefined
  /** How long a closing plugin gets before its process group is killed. Default 2 s. */
  readonly closeGrace?: Duration.Input | undefined
  /** Where a warm process (started before its session) runs until bound. Default the OS temp folder. */
  readonly warmCwd?: string | undefined
  /** Told the pid (and process group id) of every plugin process started, for inspection. */
  readonly onSpawn?: ((pid: number) => void) | undefined
}

type Reply = Extract<PluginMessage, { readonly requestId: string }>
type Request = DistributiveOmit<Extract<DaemonMessage, { readonly requestId: string }>, "requestId">
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

const decodePromptAccepted = Schema.decodeUnknownEffect(PromptAccepted)
const decodeCanStop = Schema.decodeUnknownEffect(CanStopResult)

/**
 * A provider whose sessions are plugin processes speaking the plugin protocol (P7). Each session
 * is one plugin process in its own process group; closing the session ends the group.
 */
export const makePluginClient = Effect.fnUntraced(function*(options: PluginProviderOptions) {
  const provider = options.provider
  // Every process still running when the provider's scope closes is ended with its group.
  const runtimes = yield* makeCliRuntimes(provider, options)
  const { closeGrace, failed } = runtimes

  const logProtocolError = (message: string) =>
    Effect.logWarning("Plugin protocol error").pipe(
      Effect.annotateLogs({ provider, error: new PluginProtocolError({ provider, message }).message })
    )

  /**
   * One plugin process, connected: requests by id, and `bind` to open its one session, whose
   * events go to the registry. Started in the session's cwd, or in a neutral one when warm.
   */
  const start = (runtimeMarker: string, cwd: string) =>
    Effect.gen(function*() {
      const command = { ...options.plugin, env: { ...options.plugin.env, ...runtimeEnv(runtimeMarker) } }
      const peer = yield* startJsonLinePeer<string, DaemonMessage, Reply>({
        name: "plugin",
        command,
        cwd,
        failed,
        requestTimeout: runtimes.requestTimeout,
        requestId: (n) => `r${n}`,
        encode: encodeDaemonMessage,
        logProtocolError,
        wording: { timeout: "reply", reply: "reply", line: "message" }
      })
      const plugin = peer.process
      const end = plugin.terminate(closeGrace)
      runtimes.track(end)
      options.onSpawn?.(plugin.pid)

      let sessionId: string | undefined
      /** The session bound to this process; nothing is reported before. */
      let config: SessionConfig | undefined
      const onEvent = (event: SessionEvent) => config?.onEvent(event)
      /** The negotiated protocol version; until then, the oldest. */
      let version = 1
      /** Turns started and not ended, by the daemon's turn id (the registry runs one at a time). */
      const turns = new Map<string, Deferred.Deferred<TurnEnd, ProviderFailed>>()
      let promptsInFlight = 0

      const finishTurn = (turnId: string, exit: Exit.Exit<TurnEnd, ProviderFailed>) => {
        const turn = turns.get(turnId)
        turns.delete(turnId)
        if (turn !== undefined) Deferred.doneUnsafe(turn, exit)
      }

      /**
       * The turn a turn event ends. Version 2 names it and anything else is refused; version 1 names
       * none, and ends the one turn running.
       */
      const turnOf = (event: { readonly type: string; readonly turnId?: string | undefined }): string | string[] => {
        if (version >= 2) {
          if (event.turnId === undefined) return [`${event.type} without a turnId (protocol ${version} requires one)`]
          return turns.has(event.turnId) ? event.turnId : [`${event.type} for turn ${event.turnId}, which is not running`]
        }
        const running = [...turns.keys()]
        return running.length === 1 ? running[0]! : [`${event.type} while ${running.length} turns run`]
      }

      const handle = (message: PluginMessage): Effect.Effect<void> => {
        if ("requestId" in message) return peer.answer(message.requestId, message)
        if (message.sessionId !== sessionId) {
          return logProtocolError(`event for session ${message.sessionId}, expected ${sessionId ?? "none yet"}`)
        }
        switch (message.type) {
          case "timeline":
            // Version 2: output must belong to the running turn; a chunk for any other is refused.
            if (version >= 2 && (message.turnId === undefined || !turns.has(message.turnId))) {
              return logProtocolError(`timeline for turn ${message.turnId ?? "(none)"}, which is not running`)
            }
            onEvent({ _tag: "Output", text: message.text })
            return Effect.void
          case "turn.completed": {
            const turnId = turnOf(message)
            if (typeof turnId !== "string") return logProtocolError(turnId[0]!)
            onEvent({ _tag: "Reply", text: message.reply })
            finishTurn(turnId, Exit.succeed({ reply: message.reply === "" ? null : message.reply }))
            return Effect.void
          }
          case "turn.failed": {
            const turnId = turnOf(message)
            if (typeof turnId !== "string") return logProtocolError(turnId[0]!)
            finishTurn(turnId, Exit.fail(failed("turn", message.message)))
            return Effect.void
          }
          case "notification":
            // Handed to the registry, which counts it as the agent's own activity.
            onEvent({ _tag: "Reply", text: message.text })
            onEvent({ _tag: "Activity" })
            plugin.write(encodeDaemonMessage({
              type: "notification.ack",
              sessionId: message.sessionId,
              notificationId: message.notificationId
            }))
            return Effect.void
        }
      }

      // The reader lives as long as the process: a bad line is logged and skipped, never fatal.
      yield* peer.listen(runtimes.scope, {
        decode: decodePluginLine,
        onMessage: handle,
        exitError: (code) => failed("process", `plugin exited with code ${code}`),
        onExit: (error) =>
          Effect.sync(() => {
            runtimes.forget(end)
            for (const turnId of [...turns.keys()]) finishTurn(turnId, Exit.fail(error))
          })
      })

      const request = (operation: string, message: Request): Effect.Effect<Reply, ProviderFailed> =>
        peer.request(operation, (requestId): DaemonMessage => ({ ...message, requestId })).pipe(
          Effect.flatMap((answer) =>
            answer.type === "request.failed" ? Effect.fail(failed(operation, answer.message, true)) : Effect.succeed(answer)
          )
        )

      const resultOf = <A>(decode: (u: unknown) => Effect.Effect<A, Schema.SchemaError>, operation: string) =>
      (reply: Reply): Effect.Effect<A, ProviderFailed> =>
        decode(reply.type === "request.completed" ? reply.result : undefined).pipe(
          Effect.mapError((error) => failed(operation, `malformed result: ${error.message}`))
        )

      const connect = Effect.gen(function*() {
        const connected = yield* request("connect", {
          type: "connect",
          protocolVersion: 1,
          protocolVersions,
          home: options.home
        })
        if (connected.type !== "connected") return yield* failed("connect", `expected connected, got ${connected.type}`)
        if (!protocolVersions.includes(connected.protocolVersion)) {
          return yield* failed(
            "connect",
            `plugin speaks protocol ${connected.protocolVersion}; this daemon speaks ${protocolVersions.join(", ")}`
          )
        }
        version = connected.protocolVersion
        return connected
      })
      const connected = yield* connect.pipe(Effect.onError(() => plugin.terminate(closeGrace)))

      const openSession = (bound: SessionConfig, resumeSessionId: string | null) => Effect.gen(function*() {
        const opened = yield* request("session.open", {
          type: "session.open",
          agentId: bound.agentId,
          cwd: bound.cwd,
          resumeSessionId
        })
        if (opened.type !== "session.opened") return yield* failed("session.open", `expected session.opened, got ${opened.type}`)
        if (resumeSessionId !== null && opened.sessionId !== resumeSessionId) {
          return yield* failed("session.open", `asked to resume ${resumeSessionId}, plugin opened ${opened.sessionId}`)
        }
        sessionId = opened.sessionId
        // The safety query is negotiated twice: on the connection and for this session.
        const canStop = connected.capabilities.includes("session.can_stop_runtime") &&
          opened.capabilities.includes("session.can_stop_runtime")
        const canSteer = opened.capabilities.includes("session.steer")
        const canResume = connected.capabilities.includes("session.resume") &&
          opened.capabilities.includes("session.resume")
        return { sessionId: opened.sessionId, canStop, canSteer, canResume }
      })

      const sessionOf = (
        bound: SessionConfig,
        session: { readonly sessionId: string; readonly canStop: boolean; readonly canSteer: boolean; readonly canResume: boolean }
      ): AgentSession => {
        // A session the plugin cannot reopen has no handle, so it is never released (C5).
        const handleValue: PersistenceHandle | null = session.canResume ? { provider, sessionId: session.sessionId } : null

        const prompt = (text: string, mode: "turn" | "steer", turnId: string) =>
          Effect.suspend(() => {
            promptsInFlight++
            return request("session.prompt", { type: "session.prompt", sessionId: session.sessionId, prompt: text, mode, turnId })
              .pipe(
                Effect.flatMap(resultOf(decodePromptAccepted, "session.prompt")),
                Effect.ensuring(Effect.sync(() => promptsInFlight--))
              )
          })

        const agentSession: AgentSession = {
          pid: plugin.pid,
          exited: Effect.asVoid(Deferred.await(plugin.exited)),
          persistence: Effect.succeed(handleValue),
          startTurn: (text, turnId) =>
            Effect.gen(function*() {
              const done = Deferred.makeUnsafe<TurnEnd, ProviderFailed>()
              turns.set(turnId, done)
              const { accepted } = yield* prompt(text, "turn", turnId).pipe(
                Effect.onError(() => Effect.sync(() => turns.delete(turnId)))
              )
              if (!accepted) {
                turns.delete(turnId)
                return yield* failed("session.prompt", "plugin did not accept the turn", true)
              }
              return Deferred.await(done)
            }),
          steer: session.canSteer
            ? (text, turnId) => Effect.map(prompt(text, "steer", turnId), ({ accepted }) => accepted)
            : undefined,
          outOfBand: () => undefined,
          respondToPermission: () => Effect.void,
          interrupt: Effect.asVoid(request("session.interrupt", { type: "session.interrupt", sessionId: session.sessionId })),
          close: Effect.gen(function*() {
            // A plugin that cannot say goodbye is ended anyway: releasing must not leak processes.
            yield* request("session.close", { type: "session.close", sessionId: session.sessionId }).pipe(
              Effect.timeoutOption(closeGrace),
              Effect.catchCause((cause) =>
                Effect.logDebug("Plugin did not close cleanly").pipe(Effect.annotateLogs({ provider, cause: Cause.pretty(cause) }))
              )
            )
            yield* plugin.terminate(closeGrace)
          }),
          canStopRuntime: session.canStop
            ? Effect.suspend(() => {
              // A turn or prompt in flight is an answer already; the plugin is not asked.
              if (turns.size > 0) return Effect.succeed(stopVetoed(`turn ${turns.keys().next().value} is running`))
              if (promptsInFlight > 0) return Effect.succeed(stopVetoed("a prompt is being accepted"))
              return request("session.can_stop_runtime", {
                type: "session.can_stop_runtime",
                sessionId: session.sessionId
              }).pipe(
                Effect.flatMap(resultOf(decodeCanStop, "session.can_stop_runtime")),
                Effect.flatMap((answer) =>
                  answer.sessionId === session.sessionId
                    ? Effect.succeed(
                      answer.canStop
                        ? stopPermitted
                        : stopVetoed(answer.reason?.trim() || `${provider} reports work a release would lose`)
                    )
                    : Effect.fail(failed("session.can_stop_runtime", `reply names session ${answer.sessionId}`))
                ),
                Effect.mapError((error) => new RuntimeProbeFailed({ agentId: bound.agentId, message: error.message }))
              )
            })
            : undefined
        }
        return agentSession
      }

      /** Opens the process's one session; a process that cannot open it is ended. */
      const bind = (bound: SessionConfig, resumeSessionId: string | null) =>
        Effect.suspend(() => {
          if (config !== undefined) return Effect.fail(failed("session.open", "this plugin process already holds a session", true))
          config = bound
          return openSession(bound, resumeSessionId).pipe(
            Effect.map((session) => sessionOf(bound, session)),
            Effect.onError(() => plugin.terminate(closeGrace))
          )
        })
      const started: StartedProcess = {
        pid: plugin.pid,
        exited: Effect.asVoid(Deferred.await(plugin.exited)),
        running: () => !Deferred.isDoneUnsafe(plugin.exited),
        bind: (bound, handle) => bind(bound, handle?.sessionId ?? null),
        end: plugin.terminate(closeGrace)
      }
      return started
    })

  return startThenBindClient(provider, start, options.warmCwd)
})

/** Adds a plugin provider to the `ProviderRegistry`; its processes end with the layer. */
export const layer = (options: PluginProviderOptions): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> =>
  ProviderRegistry.register(makePluginClient(options))
