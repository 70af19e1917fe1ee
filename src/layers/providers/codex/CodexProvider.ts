/**
 * The Codex app-server (`codex app-server`) as a provider (P3). Each session is one app-server
 * process in a process group of its own with one thread; closing the session ends the group. The
 * wire format and its sources are described in `rpcTypes.ts`.
 *
 * The connection correlates responses to requests by id, keeps every server→client request as
 * pending until it is answered or the server reports it resolved (approvals are reported as
 * permissions), and tracks turns and subagents from notifications. The safety probe asks the
 * server only when all of that is clear.
 */
import { Deferred, Effect, Exit, type Layer } from "effect"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import { ProviderFailed, type ProviderRegistrationRefused, RuntimeProbeFailed } from "../../../domain/errors.ts"
import {
  type AgentSession,
  type SessionConfig,
  type SessionEvent,
  stopPermitted,
  stopVetoed,
  type TurnEnd
} from "../../../domain/provider.ts"
import { ProviderRegistry } from "../../../services/ProviderRegistry.ts"
import {
  approvalMethods,
  approvalResponse,
  decodeBackgroundTerminalsList,
  decodeJsonRpcLine,
  decodeThreadLoadedList,
  decodeThreadOpened,
  decodeTurnStart,
  encodeLine,
  isError,
  isItemNotification,
  isNotification,
  isRequest,
  isServerRequestResolved,
  isTurnNotification,
  type JsonRpcError,
  type JsonRpcMessage,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
  type RequestId,
  commandItemType,
  subagentItemType,
  unsupportedRequestError
} from "./rpcTypes.ts"
import { makeCliRuntimes, startCliPeer } from "../process/cliRuntimes.ts"
import { runtimeEnv } from "../../../platform/escapedProcesses.ts"
import { type StartedProcess, startThenBindClient } from "../process/startThenBind.ts"
import { loadedListComplete, type LocalState, localVeto, type ThreadTerminals, verdict } from "./safety.ts"
import type { CliProviderOptions } from "../process/cliOptions.ts"

/** Defaults: provider "codex", command "codex", args `["app-server"]`. */
export interface CodexProviderOptions extends CliProviderOptions {
  /** Method names, overridable for a server that renames them. */
  readonly methods?: Partial<typeof defaultMethods> | undefined
}

/** The JSON-RPC methods the provider sends to Codex's app-server, by role; `methods` overrides them. */
export const defaultMethods = {
  initialize: "initialize",
  initialized: "initialized",
  threadStart: "thread/start",
  threadResume: "thread/resume",
  turnStart: "turn/start",
  turnSteer: "turn/steer",
  turnInterrupt: "turn/interrupt",
  loadedList: "thread/loaded/list",
  backgroundTerminalsList: "thread/backgroundTerminals/list"
}

const textInput = (text: string) => [{ type: "text", text, text_elements: [] }]

const requestKey = (id: RequestId) => `${typeof id}:${id}`

/**
 * The line of a dying server's stderr that says why: Codex prints `Error: …` followed by a stack
 * backtrace; otherwise the last line that is not empty.
 */
export const exitReason = (stderr: string): string => {
  const lines = stderr.split("\n").map((line) => line.trim()).filter((line) => line !== "")
  return (lines.findLast((line) => line.startsWith("Error")) ?? lines.at(-1) ?? "").slice(0, 500)
}

/**
 * The Codex client, not yet registered: each session one app-server process with one thread.
 * Every server still running, and the commands it started, end when the scope closes;
 * {@link layer} registers it.
 */
export const makeCodexClient = Effect.fnUntraced(function*(options: CodexProviderOptions = {}) {
  const provider = options.provider ?? "codex"
  const methods = { ...defaultMethods, ...options.methods }
  /** Each session still running is ended with the commands it started when the scope closes. */
  const runtimes = yield* makeCliRuntimes(provider, options)
  const { closeGrace, failed } = runtimes

  const logProtocolError = (message: string) =>
    Effect.logWarning("Codex app-server protocol error").pipe(Effect.annotateLogs({ provider, message }))

  /**
   * One app-server, initialized: `bind` then starts or resumes its one thread, whose events go to
   * the registry. Started in the session's cwd, or in a neutral one when warm (a thread has its own).
   */
  const start = (runtimeMarker: string, cwd: string) =>
    Effect.gen(function*() {
      // The end of the server's stderr says why it exited, when it refuses to start (e.g. a config it rejects).
      const { peer, detached, shutdown, close } = yield* startCliPeer<number, Record<string, unknown>, JsonRpcError | JsonRpcResponse>(runtimes, {
        command: {
          command: options.command ?? "codex",
          args: options.args ?? ["app-server"],
          env: { ...options.env, ...runtimeEnv(runtimeMarker) }
        },
        cwd,
        stripCarriageReturn: true,
        requestId: (n) => n,
        encode: encodeLine,
        logProtocolError
      }, options.onSpawn)
      const server = peer.process
      const noteDetached = detached.note

      /** The server's requests awaiting our answer, by id; the value is the method. */
      const serverRequests = new Map<string, { readonly id: RequestId; readonly method: string; readonly params: unknown }>()
      /** Ids of the turns started earlier: a late completion of one of them must not end the current turn. */
      const earlierTurns = new Set<string>()
      const subagents = new Set<string>()
      let requestsInFlight = 0
      let turnStarting = false
      /** The current turn: Codex's id for it once known, and the daemon's (which a veto names). */
      let turn: {
        id: string | undefined
        readonly daemonId: string
        readonly done: Deferred.Deferred<TurnEnd, ProviderFailed>
      } | undefined
      let threadId: string | undefined
      /** The session bound to this server; nothing is reported before. */
      let config: SessionConfig | undefined
      const onEvent = (event: SessionEvent) => config?.onEvent(event)
      let lastReply = ""

      const local = (): LocalState => {
        const permissionIds = [...serverRequests].filter(([, entry]) => approvalMethods.has(entry.method)).map(([key]) => key)
        return {
          requestsInFlight,
          serverRequestsPending: serverRequests.size,
          turnStarting,
          turnActive: turn !== undefined,
          permissionsPending: permissionIds.length,
          subagentsPending: subagents.size,
          turnId: turn?.daemonId,
          permissionIds,
          subagentIds: [...subagents]
        }
      }

      const finishTurn = (exit: Exit.Exit<TurnEnd, ProviderFailed>) => {
        const current = turn
        turn = undefined
        if (current?.id !== undefined) earlierTurns.add(current.id)
        if (current !== undefined) Deferred.doneUnsafe(current.done, exit)
      }

      const settleServerRequest = (id: RequestId) => {
        const key = requestKey(id)
        const entry = serverRequests.get(key)
        if (entry === undefined) return
        serverRequests.delete(key)
        if (approvalMethods.has(entry.method)) onEvent({ _tag: "PermissionResolved", id: key })
      }

      const onServerRequest = (request: JsonRpcRequest): Effect.Effect<void> => {
        onEvent({ _tag: "Activity" })
        if (!approvalMethods.has(request.method)) {
          // Left unanswered, a request (user input, an elicitation, a dynamic tool call, …) would hold its turn for ever.
          server.write(encodeLine({ jsonrpc: "2.0", id: request.id, error: unsupportedRequestError }))
          return Effect.logWarning(`${provider} server request refused: ${request.method} is not supported`).pipe(
            Effect.annotateLogs({ provider, agentId: config?.agentId, method: request.method })
          )
        }
        const key = requestKey(request.id)
        serverRequests.set(key, { id: request.id, method: request.method, params: request.params })
        onEvent({ _tag: "PermissionRequested", id: key })
        return Effect.void
      }

      const onNotification = (notification: JsonRpcNotification): Effect.Effect<void> => {
        const params = notification.params
        switch (notification.method) {
          case "turn/started":
            if (isTurnNotification(params) && turn !== undefined && turn.id === undefined) turn.id = params.turn.id
            break
          case "turn/completed":
            if (isTurnNotification(params) && (threadId === undefined || params.threadId === threadId)) {
              // A late completion of an earlier (interrupted) turn must not end this one.
              if (turn === undefined || (turn.id === undefined ? earlierTurns.has(params.turn.id) : turn.id !== params.turn.id)) {
                return Effect.logDebug(`${provider} ignores the completion of turn ${params.turn.id}, not the current turn`).pipe(
                  Effect.annotateLogs({ provider, agentId: config?.agentId })
                )
              }
              onEvent({ _tag: "Reply", text: lastReply })
              finishTurn(
                params.turn.status === "failed"
                  ? Exit.fail(failed("turn", params.turn.error?.message ?? "the turn failed"))
                  : Exit.succeed({ reply: lastReply === "" ? null : lastReply, interrupted: params.turn.status === "interrupted" })
              )
            }
            break
          case "item/started":
            if (isItemNotification(params) && params.item.type === commandItemType) noteDetached()
            if (isItemNotification(params) && params.item.type === subagentItemType && !subagents.has(params.item.id)) {
              subagents.add(params.item.id)
              onEvent({ _tag: "SubagentStarted", id: params.item.id })
            }
            if (isItemNotification(params) && params.item.type === "agentMessage") lastReply = ""
            break
          case "item/completed":
            if (isItemNotification(params)) {
              if (params.item.type === "agentMessage" && params.item.text !== undefined) {
                lastReply = params.item.text
                onEvent({ _tag: "Reply", text: lastReply })
              }
              if (subagents.delete(params.item.id)) onEvent({ _tag: "SubagentFinished", id: params.item.id })
            }
            break
          case "serverRequest/resolved":
            if (isServerRequestResolved(params)) settleServerRequest(params.requestId)
            break
        }
        onEvent({ _tag: "Activity" })
        return Effect.void
      }

      const onMessage = (message: JsonRpcMessage): Effect.Effect<void> => {
        if (isRequest(message)) return Effect.suspend(() => onServerRequest(message))
        if (isNotification(message)) return Effect.suspend(() => onNotification(message))
        return peer.answer(message.id, message)
      }

      yield* peer.listen(runtimes.scope, {
        decode: decodeJsonRpcLine,
        onMessage,
        onOversizedLine: () => onEvent({ _tag: "Activity" }),
        exitError: (code) => {
          const reason = exitReason(server.stderrTail())
          return failed("process", `${provider} exited with code ${code}${reason === "" ? "" : `: ${reason}`}`)
        },
        onExit: (error) =>
          Effect.sync(() => finishTurn(Exit.fail(error))).pipe(
            // A server that died on its own (crash, OOM kill) left its command groups running.
            Effect.andThen(detached.end(closeGrace)),
            Effect.ensuring(Effect.sync(() => runtimes.forget(shutdown)))
          )
      })

      /** A request; its error names the operation. Not counted as conversation work. */
      const request = (method: string, params: unknown): Effect.Effect<unknown, ProviderFailed> =>
        peer.request(method, (id) => ({ jsonrpc: "2.0", id, method, params })).pipe(
          Effect.flatMap((message) =>
            isError(message)
              ? Effect.fail(failed(method, `error ${message.error.code}: ${message.error.message}`, true))
              : Effect.succeed(message.result)
          ),
          Effect.mapError((error) => failed(method, error.message, error.refused))
        )

      /** A request that changes the conversation: counted as pending work until answered. */
      const command = (method: string, params: unknown) =>
        Effect.suspend(() => {
          requestsInFlight++
          return request(method, params).pipe(Effect.ensuring(Effect.sync(() => requestsInFlight--)))
        })

      const malformed = (method: string) => (error: { readonly message: string }) =>
        failed(method, `malformed result: ${error.message}`)

      const handshake = Effect.gen(function*() {
        yield* request(methods.initialize, {
          clientInfo: { name: "quiesce", title: "Quiesce", version: "0.1.0" },
          // The background-terminal listing is served only under the experimental API.
          capabilities: { experimentalApi: true, requestAttestation: false }
        })
        server.write(encodeLine({ jsonrpc: "2.0", method: methods.initialized }))
      })
      yield* handshake.pipe(Effect.onError(() => shutdown))

      /** Starts or resumes the server's one thread; a server that cannot open it is ended. */
      const bind = (bound: SessionConfig, resume: PersistenceHandle | null) =>
        Effect.suspend(() => {
          if (config !== undefined) return Effect.fail(failed("thread", `this ${provider} server already holds a thread`, true))
          config = bound
          return openThread(bound, resume).pipe(Effect.onError(() => shutdown))
        })

      const openThread = (bound: SessionConfig, resume: PersistenceHandle | null) => Effect.gen(function*() {
        const opened = resume === null
          ? yield* request(methods.threadStart, { cwd: bound.cwd })
          : yield* request(methods.threadResume, { threadId: resume.sessionId, cwd: bound.cwd })
        const thread = (yield* decodeThreadOpened(opened).pipe(Effect.mapError(malformed(methods.threadStart)))).thread.id
        threadId = thread
        if (resume !== null && thread !== resume.sessionId) {
          return yield* failed("resume", `asked to resume ${resume.sessionId}, ${provider} opened ${thread}`)
        }

        const answer = (key: string, allow: boolean) =>
          Effect.sync(() => {
            const entry = serverRequests.get(key)
            if (entry === undefined) return false
            server.write(encodeLine({ jsonrpc: "2.0", id: entry.id, result: approvalResponse(entry.method, entry.params, allow) }))
            settleServerRequest(entry.id)
            return true
          })

        /** The server's side of the probe: loaded threads, then each one's background terminals. */
        const listServer = Effect.gen(function*() {
          const loaded = yield* request(methods.loadedList, {}).pipe(
            Effect.flatMap((result) => decodeThreadLoadedList(result).pipe(Effect.mapError(malformed(methods.loadedList))))
          )
          // A partial listing is a veto already; no thread needs asking.
          if (!loadedListComplete(loaded)) return { loaded, perThread: [] as ReadonlyArray<ThreadTerminals> }
          const perThread: Array<ThreadTerminals> = []
          for (const id of loaded.data) {
            const terminals = yield* request(methods.backgroundTerminalsList, { threadId: id }).pipe(
              Effect.flatMap((result) =>
                decodeBackgroundTerminalsList(result).pipe(Effect.mapError(malformed(methods.backgroundTerminalsList)))
              )
            )
            perThread.push({ threadId: id, terminals })
            // One terminal is enough to veto; the remaining threads need not be asked.
            if (terminals.data.length !== 0 || terminals.nextCursor !== null) break
          }
          return { loaded, perThread }
        })

        const agentSession: AgentSession = {
          pid: server.pid,
          exited: Effect.asVoid(Deferred.await(server.exited)),
          persistence: Effect.succeed({ provider, sessionId: thread }),
          startTurn: (text, turnId) =>
            Effect.gen(function*() {
              const done = Deferred.makeUnsafe<TurnEnd, ProviderFailed>()
              turn = { id: undefined, daemonId: turnId, done }
              lastReply = ""
              turnStarting = true
              const result = yield* command(methods.turnStart, { threadId: thread, input: textInput(text) }).pipe(
                Effect.flatMap((result) => decodeTurnStart(result).pipe(Effect.mapError(malformed(methods.turnStart)))),
                Effect.ensuring(Effect.sync(() => (turnStarting = false))),
                Effect.onError(() => Effect.sync(() => (turn = undefined)))
              )
              if (turn !== undefined && turn.done === done) turn.id = result.turn.id
              return Deferred.await(done)
            }),
          steer: (text) =>
            Effect.suspend(() => {
              const current = turn
              if (current === undefined || current.id === undefined) return Effect.succeed(false)
              return Effect.as(
                command(methods.turnSteer, { threadId: thread, input: textInput(text), expectedTurnId: current.id }),
                true
              )
            }),
          outOfBand: () => undefined,
          respondToPermission: (permissionId, allow) =>
            Effect.asVoid(answer(permissionId, allow)),
          interrupt: Effect.suspend(() => {
            const current = turn
            if (current === undefined || current.id === undefined) return Effect.void
            return Effect.asVoid(command(methods.turnInterrupt, { threadId: thread, turnId: current.id }))
          }),
          close: close("Codex app-server"),
          canStopRuntime: Effect.suspend(() => {
            // Work the connection knows of is an answer already; the server is not asked.
            const own = localVeto(local())
            const decided = own.permit
              ? listServer.pipe(
                // Re-read local state: a turn or a server request may have arrived meanwhile.
                Effect.map(({ loaded, perThread }) => verdict(loaded, perThread, local())),
                Effect.mapError((error) => new RuntimeProbeFailed({ agentId: bound.agentId, message: error.message }))
              )
              : Effect.succeed(own)
            return Effect.flatMap(decided, (answer) =>
              answer.permit
                ? Effect.succeed(stopPermitted)
                : Effect.logDebug(`${provider} runtime vetoes its release`).pipe(
                  Effect.annotateLogs({ provider, agentId: bound.agentId, reason: answer.reason }),
                  Effect.as(stopVetoed(answer.reason))
                ))
          })
        }
        return agentSession
      })

      const started: StartedProcess = {
        pid: server.pid,
        exited: Effect.asVoid(Deferred.await(server.exited)),
        running: () => !Deferred.isDoneUnsafe(server.exited),
        bind,
        end: shutdown
      }
      return started
    })

  return startThenBindClient(provider, start, options.warmCwd)
})

/** Adds the Codex app-server provider to the `ProviderRegistry`; its processes end with the layer. */
export const layer = (options: CodexProviderOptions = {}): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> =>
  ProviderRegistry.register(makeCodexClient(options))
