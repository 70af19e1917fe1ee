/**
 * A provider for agents that speak the Agent Client Protocol (ACP v1, stable), built on the
 * maintained `@agentclientprotocol/sdk` (P6: baseline only, no runtime safety query).
 *
 * Each session is one agent process, started in its own process group, talking ND-JSON ACP over
 * its stdio. Supported: `initialize`, `session/new`, `session/load` (when the agent advertises
 * `loadSession`), `session/prompt`, `session/cancel`, `session/update` and
 * `session/request_permission`. The client advertises no file-system or terminal capabilities,
 * and passes no MCP servers; agents that require authentication are not supported.
 *
 * A permission request stays open, holding its turn, until a person answers it
 * (`respondToPermission`, see `permissions.ts`); a cancelled turn answers it `cancelled`.
 */
import * as Acp from "@agentclientprotocol/sdk"
import { Deferred, Duration, Effect, Exit, type Layer } from "effect"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import { ProviderFailed, type ProviderRegistrationRefused } from "../../../domain/errors.ts"
import type { AgentSession, SessionConfig, SessionEvent, TurnEnd } from "../../../domain/provider.ts"
import { providerRequestSpan, providerRequestSpanName } from "../../../domain/spans.ts"
import { ProviderRegistry } from "../../../services/ProviderRegistry.ts"
import { runtimeEnv } from "../../../platform/escapedProcesses.ts"
import { type StartedProcess, startThenBindClient } from "../process/startThenBind.ts"
import { signalGroup, trackGroup } from "../../../platform/processGroups.ts"
import { spawnGroupLeader, terminateGroup } from "../plugin/PluginProcess.ts"
import type { CliProviderOptions } from "../process/cliOptions.ts"
import { makeOpenPermissions } from "./permissions.ts"

/** Any agent speaking ACP on stdio; `requestTimeout` bounds `initialize`, `session/new` and `session/load`. */
export interface AcpProviderOptions extends CliProviderOptions {
  readonly provider: string
  readonly command: string
  readonly args: ReadonlyArray<string>
}

/** How a process ended: its exit code, or the signal that ended it. */
interface ProcessExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** One agent process in a process group of its own (its pid is the group id). */
interface AgentProcess {
  readonly pid: number
  /** The agent's stdio as the byte streams ACP's ND-JSON transport reads and writes. */
  readonly stdout: ReadableStream<Uint8Array>
  readonly stdin: WritableStream<Uint8Array>
  /** Completes when the process has exited and been reaped. */
  readonly exited: Deferred.Deferred<ProcessExit>
  /** The last few kilobytes the agent wrote to stderr, for error messages. */
  readonly stderrTail: () => string
  /** Completes when stderr has ended (it may stay open while processes the agent started run). */
  readonly stderrEnded: Deferred.Deferred<void>
  /** Ends the process group: SIGTERM, then SIGKILL after `grace`; waits until the process exited. */
  readonly terminate: (grace: Duration.Input) => Effect.Effect<void>
}

const stderrTailBytes = 2048

const describeExit = (exit: ProcessExit) =>
  exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code ?? "unknown"}`

const messageOf = (error: unknown) => error instanceof Error ? error.message : String(error)

/** Starts the agent in its own process group; its output is always drained. */
const startAgentProcess = (
  options: AcpProviderOptions,
  cwd: string
): Effect.Effect<AgentProcess, Error> =>
  Effect.callback<AgentProcess, Error>((resume) => {
    const child = spawnGroupLeader(options, cwd)
    if (child instanceof Error) {
      resume(Effect.fail(child))
      return
    }
    const { stdin, stdout, stderr } = child
    if (stdin === null || stdout === null || stderr === null) {
      child.kill("SIGKILL")
      resume(Effect.fail(new Error("agent process has no piped stdio")))
      return
    }
    const exited = Deferred.makeUnsafe<ProcessExit>()
    child.on("exit", (code, signal) => Deferred.doneUnsafe(exited, Exit.succeed({ code, signal })))
    if (child.pid !== undefined) trackGroup(child.pid, (listener) => child.once("exit", listener))

    let stderrTail = ""
    const stderrEnded = Deferred.makeUnsafe<void>()
    stderr.setEncoding("utf8")
    stderr.on("data", (text: string) => {
      stderrTail = (stderrTail + text).slice(-stderrTailBytes)
    })
    stderr.on("close", () => Deferred.doneUnsafe(stderrEnded, Exit.void))
    // Writes after the agent died fail with EPIPE; the writer's callback reports them.
    stdin.on("error", () => {})

    // Read eagerly and buffered: a chatty agent never blocks on a full pipe.
    let readerOpen = true
    const readable = new ReadableStream<Uint8Array>({
      start(controller) {
        stdout.on("data", (chunk: Buffer) => {
          if (readerOpen) controller.enqueue(new Uint8Array(chunk))
        })
        stdout.on("end", () => {
          if (readerOpen) controller.close()
          readerOpen = false
        })
        stdout.on("error", (error) => {
          if (readerOpen) controller.error(error)
          readerOpen = false
        })
      },
      cancel() {
        readerOpen = false
        stdout.resume()
      }
    })
    const writable = new WritableStream<Uint8Array>({
      write: (chunk) =>
        new Promise<void>((resolve, reject) => {
          stdin.write(chunk, (error) => (error ? reject(error) : resolve()))
        }),
      close: () => new Promise<void>((resolve) => stdin.end(resolve)),
      abort: () => {
        stdin.destroy()
      }
    })

    child.once("error", (error) => {
      Deferred.doneUnsafe(exited, Exit.succeed({ code: null, signal: null }))
      resume(Effect.fail(error))
    })
    child.once("spawn", () => {
      const pid = child.pid
      if (pid === undefined) {
        resume(Effect.fail(new Error("agent process has no pid")))
        return
      }
      resume(Effect.succeed({
        pid,
        stdout: readable,
        stdin: writable,
        exited,
        stderrTail: () => stderrTail.trim(),
        stderrEnded,
        terminate: (grace) => terminateGroup(pid, exited, grace)
      }))
    })
    // Interrupted before the process was handed over: nobody else will end it.
    return Effect.sync(() => {
      if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL")
    })
  })

/**
 * Waits a macrotask. The SDK applies inbound messages through chains of promises, so a response
 * can resolve before the `session/update` notifications the agent sent ahead of it have reached
 * our handler; once every microtask has run, they have.
 */
const settled: Effect.Effect<void> = Effect.callback<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/**
 * A provider whose sessions are ACP agent processes. Every process still running when the
 * provider's scope closes is ended with its group.
 */
export const makeAcpClient = Effect.fnUntraced(function*(options: AcpProviderOptions) {
  const provider = options.provider
  const scope = yield* Effect.scope
  const closeGrace = options.closeGrace ?? "2 seconds"
  const requestTimeout = Duration.fromInputUnsafe(options.requestTimeout ?? "30 seconds")
  /** Processes not yet terminated: an agent that exited may have left processes in its group. */
  const running = new Set<AgentProcess>()
  const failed = (operation: string, message: string, refused?: boolean) =>
    new ProviderFailed({ provider, operation, message, ...(refused === true ? { refused } : {}) })

  yield* Effect.addFinalizer(() =>
    Effect.forEach([...running], (agent) => agent.terminate(closeGrace), { concurrency: "unbounded", discard: true })
  )

  /**
   * One agent process, initialized: `bind` then creates (`resumeSessionId` null) or loads its one
   * ACP session, whose events go to the registry. Started in the session's cwd, or in a neutral
   * one when warm (`session/new` and `session/load` carry the session's own).
   */
  const start = (runtimeMarker: string, cwd: string) =>
    Effect.gen(function*() {
      const marked = { ...options, env: { ...options.env, ...runtimeEnv(runtimeMarker) } }
      const agent = yield* startAgentProcess(marked, cwd).pipe(
        Effect.mapError((error) => failed("spawn", `Cannot start ACP agent: ${error.message}`))
      )
      running.add(agent)
      options.onSpawn?.(agent.pid)
      const terminate = agent.terminate(closeGrace).pipe(Effect.andThen(Effect.sync(() => running.delete(agent))))

      let sessionId: string | undefined
      /** While `session/load` runs, the agent replays the conversation: not new activity. */
      let loading = false
      let closed = false
      let exit: ProcessExit | undefined
      /** The reply text of the running turn, put together from `agent_message_chunk` updates. */
      let reply: { text: string } | undefined
      /** The session bound to this process; nothing is reported before. */
      let config: SessionConfig | undefined
      const onEvent = (event: SessionEvent) => config?.onEvent(event)
      const permissions = makeOpenPermissions(provider, onEvent)

      const onUpdate = (notification: Acp.SessionNotification) => {
        if (loading || sessionId === undefined || notification.sessionId !== sessionId) return
        const update = notification.update
        switch (update.sessionUpdate) {
          case "agent_message_chunk":
            if (reply !== undefined && update.content.type === "text") reply.text += update.content.text
            onEvent({ _tag: "Activity" })
            return
          case "agent_thought_chunk":
          case "tool_call":
          case "tool_call_update":
          case "plan":
          case "compaction_update":
          case "compaction_summary_chunk":
            onEvent({ _tag: "Activity" })
            return
          default:
            // Echoed user input and session metadata (commands, modes, usage, …) are not activity.
            return
        }
      }

      // Before a session is bound nobody could see (or answer) a request: it is refused at once.
      // After, the process works for that one session, so every request is shown, whatever
      // session id it names (an agent may ask on behalf of a subagent's session).
      const onPermission = (request: Acp.RequestPermissionRequest, withdrawn: AbortSignal) =>
        config === undefined
          ? Promise.resolve<Acp.RequestPermissionResponse>({ outcome: { outcome: "cancelled" } })
          : permissions.ask(request, withdrawn)

      const connection = Acp.client({ name: "quiesce" })
        .onNotification(Acp.methods.client.session.update, ({ params }) => onUpdate(params))
        .onRequest(Acp.methods.client.session.requestPermission, ({ params, signal }) => onPermission(params, signal))
        .connect(Acp.ndJsonStream(agent.stdin, agent.stdout))

      // When the agent dies, nothing it owed will come: closing the connection fails what waits.
      yield* Deferred.await(agent.exited).pipe(
        Effect.flatMap((ended) =>
          Effect.sync(() => {
            exit = ended
            connection.close(new Error(`ACP agent ${describeExit(ended)}`))
          })
        ),
        Effect.forkIn(scope)
      )

      /** A failure's message with how the agent process ended and its last words, when known. */
      const explain = (message: string) => {
        const stderr = agent.stderrTail()
        const ended = exit === undefined ? "" : ` (agent ${describeExit(exit)})`
        return `${message}${ended}${stderr === "" ? "" : `; stderr: ${stderr}`}`
      }
      const failure = (operation: string, error: unknown) => failed(operation, explain(messageOf(error)))

      /** A setup request, bounded by the request timeout. */
      const call = <A>(operation: string, send: (cancel: AbortSignal) => Promise<A>): Effect.Effect<A, ProviderFailed> =>
        Effect.tryPromise({ try: send, catch: (error) => failed(operation, messageOf(error)) }).pipe(
          Effect.timeoutOrElse({
            duration: requestTimeout,
            orElse: () => Effect.fail(failed(operation, `no reply within ${Duration.format(requestTimeout)}`))
          }),
          Effect.withSpan(providerRequestSpanName, providerRequestSpan("acp", "jsonrpc", operation))
        )
      const cancellable = (cancel: AbortSignal) => ({ cancellationSignal: cancel, stopWaitingOnCancel: true })

      /** Takes the process down, with what it wrote to stderr (read to its end, briefly: its children may hold it open). */
      const abandon = Effect.sync(() => connection.close()).pipe(
        Effect.andThen(terminate),
        Effect.andThen(Deferred.await(agent.stderrEnded).pipe(Effect.timeoutOption("200 millis")))
      )

      const initialize = Effect.gen(function*() {
        const initialized = yield* call("initialize", (cancel) =>
          connection.agent.request(Acp.methods.agent.initialize, {
            protocolVersion: Acp.PROTOCOL_VERSION,
            clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
            clientInfo: { name: "quiesce", version: "0.1.0" }
          }, cancellable(cancel)))
        if (initialized.protocolVersion !== Acp.PROTOCOL_VERSION) {
          return yield* failed(
            "initialize",
            `agent speaks ACP version ${initialized.protocolVersion}, not ${Acp.PROTOCOL_VERSION}`
          )
        }
        return initialized.agentCapabilities?.loadSession === true
      })
      // An agent that cannot be set up takes its process down; the error says how it ended.
      const canLoad = yield* initialize.pipe(
        Effect.onError(() => abandon),
        Effect.mapError((error) => failed(error.operation, explain(error.message)))
      )

      const openSession = (bound: SessionConfig, resumeSessionId: string | null) => Effect.gen(function*() {
        if (resumeSessionId === null) {
          const created = yield* call("session/new", (cancel) =>
            connection.agent.request(
              Acp.methods.agent.session.new,
              { cwd: bound.cwd, mcpServers: [] },
              cancellable(cancel)
            ))
          sessionId = created.sessionId
          return { sessionId: created.sessionId, canLoad }
        }
        if (!canLoad) return yield* failed("session/load", "agent cannot resume sessions")
        const id = resumeSessionId
        sessionId = id
        loading = true
        yield* call("session/load", (cancel) =>
          connection.agent.request(
            Acp.methods.agent.session.load,
            { sessionId: id, cwd: bound.cwd, mcpServers: [] },
            cancellable(cancel)
          ))
        // The replay precedes the load's answer; let it pass before updates count again.
        yield* settled
        loading = false
        return { sessionId: id, canLoad }
      })

      /** Opens the process's one session; a process that cannot open it is taken down. */
      const bind = (bound: SessionConfig, resumeSessionId: string | null) =>
        Effect.suspend(() => {
          if (config !== undefined) return Effect.fail(failed("session/new", "this ACP agent process already holds a session", true))
          config = bound
          return openSession(bound, resumeSessionId).pipe(
            Effect.onError(() => abandon),
            Effect.mapError((error) => failed(error.operation, explain(error.message))),
            Effect.map((session) => sessionOf(bound, session))
          )
        })

      const sessionOf = (bound: SessionConfig, session: { readonly sessionId: string; readonly canLoad: boolean }): AgentSession => {
        // A session the agent cannot load again is not resumable: without a handle the registry
        // never releases it (a release would lose the conversation), and a close leaves it closed.
        const handle: PersistenceHandle | null = session.canLoad ? { provider, sessionId: session.sessionId } : null

        /** Completes when the most recently started turn has ended: turns run one at a time. */
        let lastTurn: Deferred.Deferred<void> | undefined

        /** Sends one prompt; the effect waits for its response (the end of the turn). */
        const sendPrompt = (text: string): Effect.Effect<TurnEnd, ProviderFailed> => {
          const cancel = new AbortController()
          reply = { text: "" }
          const response = connection.agent.request(Acp.methods.agent.session.prompt, {
            sessionId: session.sessionId,
            prompt: [{ type: "text", text }]
          }, cancellable(cancel.signal))
          // Observed here so that a turn nobody waits for never rejects unhandled.
          response.catch(() => {})
          return Effect.tryPromise({ try: () => response, catch: (error) => failure("session/prompt", error) }).pipe(
            Effect.onInterrupt(() => Effect.sync(() => cancel.abort())),
            // The prompt's request lasts its whole turn: its reply is the turn's end.
            Effect.withSpan(providerRequestSpanName, providerRequestSpan("acp", "jsonrpc", "session/prompt")),
            Effect.tap(() => settled),
            Effect.map((response): TurnEnd => {
              // Every stop reason (end_turn, cancelled, refusal, limits) ends the turn; `cancelled`
              // is an interruption.
              const text = reply?.text ?? ""
              if (text !== "") bound.onEvent({ _tag: "Reply", text })
              return { reply: text === "" ? null : text, interrupted: response.stopReason === "cancelled" }
            }),
            Effect.ensuring(Effect.sync(() => {
              reply = undefined
              // A request still open when its turn has ended has no turn left to hold: an agent
              // that asked while a cancel crossed its path would otherwise keep the runtime for ever.
              permissions.cancelAll()
            }))
          )
        }

        const agentSession: AgentSession = {
          pid: agent.pid,
          // An agent that dies on its own is released, so the next prompt loads its session again.
          exited: Effect.asVoid(Deferred.await(agent.exited)),
          persistence: Effect.succeed(handle),
          startTurn: (text) =>
            Effect.suspend(() => {
              if (closed) return Effect.fail(failed("session/prompt", "the session is closed", true))
              if (exit !== undefined) return Effect.fail(failed("session/prompt", `ACP agent ${describeExit(exit)}`, true))
              const previous = lastTurn
              const done = Deferred.makeUnsafe<void>()
              lastTurn = done
              // The first turn is sent now, so that an interrupt that follows finds it at the agent;
              // a turn started while another runs is sent once that one has ended.
              const turn = previous === undefined || Deferred.isDoneUnsafe(previous)
                ? sendPrompt(text)
                : Deferred.await(previous).pipe(Effect.andThen(Effect.suspend(() => sendPrompt(text))))
              return Effect.succeed(turn.pipe(Effect.ensuring(Deferred.done(done, Exit.void))))
            }),
          // ACP has no way to add input to a running turn.
          steer: undefined,
          outOfBand: () => undefined,
          respondToPermission: permissions.answer,
          interrupt: Effect.suspend(() => {
            if (closed || exit !== undefined) return Effect.void
            return Effect.tryPromise({
              try: () => connection.agent.notify(Acp.methods.agent.session.cancel, { sessionId: session.sessionId }),
              catch: (error) => failure("session/cancel", error)
            }).pipe(
              Effect.withSpan(providerRequestSpanName, providerRequestSpan("acp", "jsonrpc", "session/cancel")),
              // ACP: once the client cancels, it answers every open permission request `cancelled`.
              Effect.ensuring(Effect.sync(permissions.cancelAll))
            )
          }),
          close: Effect.suspend(() => {
            closed = true
            return terminate.pipe(Effect.andThen(Effect.sync(() => connection.close())))
          })
        }
        return agentSession
      }

      const started: StartedProcess = {
        pid: agent.pid,
        exited: Effect.asVoid(Deferred.await(agent.exited)),
        running: () => !Deferred.isDoneUnsafe(agent.exited),
        bind: (bound, handle) => bind(bound, handle?.sessionId ?? null),
        end: terminate
      }
      return started
    })

  return startThenBindClient(provider, start, options.warmCwd)
})

/** Adds an ACP provider to the `ProviderRegistry`; its agent processes end with the layer. */
export const layer = (options: AcpProviderOptions): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> =>
  ProviderRegistry.register(makeAcpClient(options))
