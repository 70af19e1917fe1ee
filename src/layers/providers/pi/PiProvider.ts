/**
 * The Pi coding agent (and its OMP fork) in RPC mode as a provider (P5). Each session is one
 * `pi --mode rpc` process in a process group of its own; closing the session ends the group and
 * the groups of the bash commands still running (Pi starts each detached). A job a command leaves
 * behind with `&` escapes the CLI's tree; it is found by the runtime's environment marker and vetoes
 * the release while it runs (`escapedProcesses.ts`), but is never ended.
 * The wire format is described in `rpcTypes.ts`.
 */
import { Deferred, Effect, Exit, type Layer, Schema } from "effect"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import { ProviderFailed, type ProviderRegistrationRefused, RuntimeProbeFailed } from "../../../domain/errors.ts"
import {
  type AgentSession,
  type SessionConfig,
  type StopAnswer,
  stopPermitted,
  stopVetoed,
  stopWorkUnknown,
  type TurnEnd
} from "../../../domain/provider.ts"
import { ProviderRegistry } from "../../../services/ProviderRegistry.ts"
import { makeCliRuntimes, startCliPeer } from "../process/cliRuntimes.ts"
import { processPerSessionClient } from "../process/sessionClient.ts"
import { escapedProcesses, escapedReason, runtimeEnv } from "../../../platform/escapedProcesses.ts"
import {
  AgentEndEvent,
  decodeRpcLine,
  decodeSessionState,
  dialogMethods,
  encodeRpcCommand,
  ExtensionUiRequest,
  type RpcCommand,
  type RpcResponse,
  replyText,
  type SessionState
} from "./rpcTypes.ts"
import { type LocalState, localVeto, missingSettlement, type PiVariant, type Verdict, verdict } from "./safety.ts"
import type { CliProviderOptions } from "../process/cliOptions.ts"

/** Defaults: command "pi", args `["--mode", "rpc"]` (they must select RPC mode). */
export interface PiProviderOptions extends CliProviderOptions {
  /** The provider id agents name, e.g. "pi" or "omp". */
  readonly provider: string
  readonly variant: PiVariant
  /**
   * Arguments appended to resume a saved session. Default `["--session", <sessionFile or id>]`
   * (Pi 0.73 `--session <path|id>`; OMP accepts `--session` too).
   */
  readonly resumeArgs?: ((handle: PersistenceHandle) => ReadonlyArray<string>) | undefined
}

const isAgentEnd = Schema.is(AgentEndEvent)
const isExtensionUiRequest = Schema.is(ExtensionUiRequest)

/** An extension UI request that waits for an answer (a dialog); fire-and-forget ones are only activity. */
const extensionDialog = (line: unknown): ExtensionUiRequest | undefined =>
  isExtensionUiRequest(line) && dialogMethods.has(line.method) ? line : undefined

/** What a dying CLI last said on stderr, shortened for an error message. */
export const exitReason = (stderr: string): string => {
  const lines = stderr.split("\n").map((line) => line.trim()).filter((line) => line !== "")
  return lines.slice(-3).join(" | ").slice(-500)
}

const defaultResumeArgs = (handle: PersistenceHandle): ReadonlyArray<string> => {
  const file = handle.data?.["sessionFile"]
  return ["--session", typeof file === "string" ? file : handle.sessionId]
}

/** A conversation can be resumed only from a session the CLI saved to a file. */
const handleFor = (provider: string, state: SessionState | undefined): PersistenceHandle | null =>
  state?.sessionId !== undefined && state.sessionFile !== undefined
    ? { provider, sessionId: state.sessionId, data: { sessionFile: state.sessionFile } }
    : null

/**
 * The Pi (or OMP) client, not yet registered: each session one `pi --mode rpc` process. Every
 * process still running is ended with its group when the scope closes; {@link layer} registers it.
 */
export const makePiClient = Effect.fnUntraced(function*(options: PiProviderOptions) {
  const provider = options.provider
  const runtimes = yield* makeCliRuntimes(provider, options)
  const { failed } = runtimes

  const logProtocolError = (message: string) =>
    Effect.logWarning("Pi RPC protocol error").pipe(Effect.annotateLogs({ provider, message }))

  const open = (config: SessionConfig, resume: PersistenceHandle | null) =>
    Effect.gen(function*() {
      const args = [
        ...(options.args ?? ["--mode", "rpc"]),
        ...(resume === null ? [] : (options.resumeArgs ?? defaultResumeArgs)(resume))
      ]
      // Marks every process the runtime starts, so jobs that leave its tree are still seen (below).
      const env = { ...options.env, ...runtimeEnv(config.runtimeMarker) }
      /**
       * Pi runs each bash command detached, in a process group of its own, so ending the CLI's
       * group leaves a running command behind: its group is noted (while it is still the CLI's
       * descendant) and ended after the CLI. A job backgrounded with `&` inside a command is
       * reparented to init when its shell exits and cannot be found this way: it is found by the
       * runtime's marker, vetoes the release while it runs, and is never ended by the adapter (it
       * may be a server the user meant to keep).
       */
      const { peer, shutdown, close } = yield* startCliPeer<string, RpcCommand, RpcResponse>(runtimes, {
        command: { command: options.command ?? "pi", args, env },
        cwd: config.cwd,
        stripCarriageReturn: true,
        requestId: (n) => `quiesce-${n}`,
        encode: encodeRpcCommand,
        logProtocolError
      }, options.onSpawn)
      const cli = peer.process

      let turn: Deferred.Deferred<TurnEnd, ProviderFailed> | undefined
      /** The daemon's id of the turn in flight, which a veto names. */
      let turnId: string | undefined
      /** The id of the `prompt` that started the turn: OMP may answer it twice, success then failure. */
      let turnPromptId: string | undefined
      /** OMP ended a run non-terminally: it will continue on its own (see `LocalState`). */
      let continuationPending = false
      /** A run the CLI started on its own is streaming. */
      let autonomousRun = false
      let warnedMissingSettlement = false
      /** Conversation-changing commands sent and not answered; `get_state` probes are not counted. */
      let commandsInFlight = 0
      let lastReply = ""
      let state: SessionState | undefined

      const local = (): LocalState => ({
        variant: options.variant,
        turnInFlight: turn !== undefined,
        commandsInFlight,
        unsentMessages: 0,
        continuationPending,
        autonomousRun,
        turnId: turn === undefined ? undefined : turnId
      })

      const finishTurn = (exit: Exit.Exit<TurnEnd, ProviderFailed>) => {
        const current = turn
        turn = undefined
        turnPromptId = undefined
        if (current !== undefined) Deferred.doneUnsafe(current, exit)
      }

      const onResponse = (response: RpcResponse): Effect.Effect<void> => {
        if (response.id === undefined) {
          // Pi answers an unknown command without its id: fail the one request it can be for.
          const candidates = peer.pending().filter(([, command]) => command.type === response.command)
          if (!response.success && candidates.length === 1) return peer.answer(candidates[0]![0], response)
          return logProtocolError(`response without id to ${response.command}: ${response.error ?? "success"}`)
        }
        // OMP accepts a prompt, then reports that it failed to run with a second response.
        if (!peer.isPending(response.id) && response.id === turnPromptId && !response.success) {
          finishTurn(Exit.fail(failed("prompt", response.error ?? "the prompt failed")))
          return Effect.void
        }
        return peer.answer(response.id, response)
      }

      const onAgentEnd = (event: AgentEndEvent) => {
        const text = replyText(event)
        if (text !== undefined) lastReply = text
        autonomousRun = false
        // OMP ends a run with `isTerminal: false` when it has scheduled a continuation of its own
        // (an async job's result, a queued message). The foreground turn is over — its reply is
        // final — but the runtime is not settled until a terminal `agent_end` arrives.
        continuationPending = event.isTerminal === false
        config.onEvent({ _tag: "Activity" })
        config.onEvent({ _tag: "Reply", text: lastReply })
        finishTurn(Exit.succeed({ reply: lastReply === "" ? null : lastReply }))
      }

      yield* peer.listen(runtimes.scope, {
        decode: decodeRpcLine,
        onMessage: (line): Effect.Effect<void> => {
          if ("success" in line) return onResponse(line)
          if (line.type === "response") return logProtocolError("malformed response")
          if (isAgentEnd(line)) {
            onAgentEnd(line)
            return Effect.void
          }
          const dialog = extensionDialog(line)
          if (dialog !== undefined) {
            config.onEvent({ _tag: "Activity" })
            // A dialog blocks the run until answered, and nobody is there to answer it: dismiss it.
            cli.write(encodeRpcCommand({ type: "extension_ui_response", id: dialog.id, cancelled: true }))
            return Effect.logWarning(`${provider} extension dialog cancelled: Quiesce has no one to answer ${dialog.method}`).pipe(
              Effect.annotateLogs({ provider, agentId: config.agentId, method: dialog.method })
            )
          }
          if ("assistantMessageEvent" in line && line.assistantMessageEvent?.type === "text_start") lastReply = ""
          if (line.type === "agent_start") {
            lastReply = ""
            if (turn === undefined) autonomousRun = true
          }
          config.onEvent({ _tag: "Activity" })
          return Effect.void
        },
        // A huge event (an `agent_end` with a long transcript) is still activity.
        onOversizedLine: () => config.onEvent({ _tag: "Activity" }),
        exitError: (code) => {
          const reason = exitReason(cli.stderrTail())
          return failed("process", `${provider} exited with code ${code}${reason === "" ? "" : `: ${reason}`}`)
        },
        onExit: (error) =>
          Effect.sync(() => {
            runtimes.forget(shutdown)
            finishTurn(Exit.fail(error))
          })
      })

      /** Sends the command built for a fresh id and waits for its response. */
      const request = (
        operation: string,
        build: (id: string) => RpcCommand
      ): Effect.Effect<RpcResponse, ProviderFailed> =>
        peer.request(operation, build).pipe(
          Effect.flatMap((response) =>
            response.success ? Effect.succeed(response) : Effect.fail(failed(operation, response.error ?? "failed", true))
          )
        )

      /** A command that changes the conversation: counted as adapter-owned work until answered. */
      const command = (operation: string, build: (id: string) => RpcCommand) =>
        Effect.suspend(() => {
          commandsInFlight++
          return request(operation, build).pipe(Effect.ensuring(Effect.sync(() => commandsInFlight--)))
        })

      const getState = request("get_state", (id) => ({ type: "get_state", id })).pipe(
        Effect.flatMap((response) =>
          decodeSessionState(response.data).pipe(
            Effect.mapError((error) => failed("get_state", `malformed state: ${error.message}`))
          )
        ),
        Effect.tap((answer) => Effect.sync(() => (state = answer)))
      )

      // The session the CLI opened: its id and file are the persistence handle.
      const opened = yield* getState.pipe(Effect.onError(() => shutdown))
      if (resume !== null && opened.sessionId !== resume.sessionId) {
        yield* shutdown
        return yield* failed("resume", `asked to resume ${resume.sessionId}, ${provider} opened ${opened.sessionId ?? "none"}`)
      }

      const agentSession: AgentSession = {
        pid: cli.pid,
        exited: Effect.asVoid(Deferred.await(cli.exited)),
        // Read from the last state seen, so it is known without the process (null: never released).
        persistence: Effect.sync(() => handleFor(provider, state)),
        startTurn: (text, daemonTurnId) =>
          Effect.gen(function*() {
            const done = Deferred.makeUnsafe<TurnEnd, ProviderFailed>()
            turn = done
            turnId = daemonTurnId
            // While the CLI runs a continuation of its own it rejects a plain prompt; queued as a
            // follow-up, the prompt runs next, and this turn ends with the run now streaming.
            const busy = autonomousRun
            yield* command("prompt", (id) => {
              turnPromptId = id
              return busy
                ? { type: "prompt", id, message: text, streamingBehavior: "followUp" }
                : { type: "prompt", id, message: text }
            }).pipe(Effect.onError(() => Effect.sync(() => (turn = undefined))))
            return Deferred.await(done)
          }),
        steer: (text) =>
          turn === undefined
            ? Effect.succeed(false)
            : Effect.as(command("steer", (id) => ({ type: "steer", id, message: text })), true),
        outOfBand: () => undefined,
        respondToPermission: () => Effect.void,
        interrupt: Effect.asVoid(command("abort", (id) => ({ type: "abort", id }))),
        close: close("Pi"),
        canStopRuntime: Effect.suspend(() => {
          // Work the adapter owns is an answer already; the CLI is not asked.
          const own = localVeto(local())
          const decided = own.permit
            ? getState.pipe(
              // Re-read local state: a turn may have started while the CLI answered.
              Effect.map((answer) => verdict(answer, local())),
              Effect.mapError((error) => new RuntimeProbeFailed({ agentId: config.agentId, message: error.message }))
            )
            : Effect.succeed(own)
          // Last: a job that left the runtime's tree (`&` in a bash command) still holds work.
          const checked = Effect.flatMap(decided, (answer): Effect.Effect<Verdict, RuntimeProbeFailed> =>
            answer.permit
              ? escapedProcesses(cli.pid, config.runtimeMarker).pipe(
                Effect.map((escaped): Verdict => escaped.length === 0 ? answer : { permit: false, reason: escapedReason(escaped) }),
                Effect.mapError((error) => new RuntimeProbeFailed({ agentId: config.agentId, message: `${provider}: ${error.message}` }))
              )
              : Effect.succeed(answer)
          )
          return Effect.flatMap(checked, (answer): Effect.Effect<StopAnswer> => {
            if (answer.permit) return Effect.succeed(stopPermitted)
            const log = answer.reason === missingSettlement && !warnedMissingSettlement
              ? Effect.logWarning(`${provider} runtime stays resident`)
              : Effect.logDebug(`${provider} runtime vetoes its release`)
            if (answer.reason === missingSettlement) warnedMissingSettlement = true
            return log.pipe(
              Effect.annotateLogs({ provider, agentId: config.agentId, reason: answer.reason }),
              // Before 18.3 OMP cannot say whether async work runs: a veto that names none.
              Effect.as(answer.reason === missingSettlement ? stopWorkUnknown(answer.reason) : stopVetoed(answer.reason))
            )
          })
        })
      }
      return agentSession
    })

  return processPerSessionClient(provider, open)
})

/** Adds a Pi (or OMP) provider to the `ProviderRegistry`; its processes end with the layer. */
export const layer = (options: PiProviderOptions): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> =>
  ProviderRegistry.register(makePiClient(options))
