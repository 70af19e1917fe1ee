/**
 * Claude Code in headless stream-json mode as a provider (P2). Each session is one `claude -p`
 * process in a process group of its own; closing the session ends the group and the groups of the
 * background shells it started (the CLI starts each in a session of its own). The wire format and
 * what was verified of it are in `streamTypes.ts`; the safety decision is `safety.ts`.
 *
 * The adapter tracks turns (a prompt until its `result`, and turns the CLI starts on its own),
 * prompts not yet taken up, permission prompts (`can_use_tool`) and the background roster. The
 * probe asks the CLI only when none of that says busy: a repeated `initialize` is answered with
 * the CLI's session state and followed by its live roster, which is the authoritative read.
 */
import { Deferred, Duration, Effect, Exit, type Layer } from "effect"
import { randomUUID } from "node:crypto"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import { ProviderFailed, type ProviderRegistrationRefused, RuntimeProbeFailed } from "../../../domain/errors.ts"
import {
  type AgentSession,
  type SessionConfig,
  type StopAnswer,
  stopPermitted,
  stopVetoed,
  type TurnEnd
} from "../../../domain/provider.ts"
import { ProviderRegistry } from "../../../services/ProviderRegistry.ts"
import { makeCliRuntimes, startCliPeer } from "../process/cliRuntimes.ts"
import { processPerSessionClient } from "../process/sessionClient.ts"
import { runtimeEnv } from "../../../platform/escapedProcesses.ts"
import { type BackgroundWork, decide, freshWork, type LocalState, localVeto, type Observation, observe, rosterSupport } from "./safety.ts"
import {
  type ControlRequest,
  type ControlResponse,
  decodeInitializeResponse,
  decodeLine,
  encodeLine,
  isAssistantMessage,
  isBackgroundTasksChanged,
  isControlCancelRequest,
  isControlRequest,
  isControlResponse,
  isEnvelope,
  isResultMessage,
  isSessionStateChanged,
  isSystemInit,
  isTaskNotification,
  isTaskStarted,
  isTextBlock,
  taskDescription,
  userMessage
} from "./streamTypes.ts"
import type { CliProviderOptions } from "../process/cliOptions.ts"

/**
 * Defaults: provider "claude", command "claude", args `defaultArgs` (headless stream-json both
 * ways), env merged after `defaultEnv`.
 */
export interface ClaudeProviderOptions extends CliProviderOptions {
  /** How long the probe waits for the roster that follows a repeated `initialize`. Default 2 s. */
  readonly rosterTimeout?: Duration.Input | undefined
}

/** Headless, stream-json both ways, permission prompts answered by the host over stdio. */
export const defaultArgs: ReadonlyArray<string> = [
  "-p",
  "--input-format",
  "stream-json",
  "--output-format",
  "stream-json",
  "--verbose",
  "--permission-prompt-tool",
  "stdio"
]

/** `session_state_changed` is the CLI's own authoritative turn-over signal; it is off unless asked for. */
export const defaultEnv: Readonly<Record<string, string>> = { CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS: "1" }

/** A control request of ours, and for a probe's `initialize` the roster that follows its answer. */
interface OutgoingControlRequest {
  readonly line: Record<string, unknown>
  readonly rosterAfter?: Deferred.Deferred<void, ProviderFailed> | undefined
}

const sameRoster = (live: ReadonlySet<string>, tasks: ReadonlyArray<{ readonly task_id: string }>): boolean =>
  live.size === tasks.length && tasks.every((task) => live.has(task.task_id))

/**
 * The Claude Code client, not yet registered: each session one `claude -p` process. Every process
 * still running is ended with its group when the scope closes; {@link layer} registers it.
 */
export const makeClaudeClient = Effect.fnUntraced(function*(options: ClaudeProviderOptions = {}) {
  const provider = options.provider ?? "claude"
  const runtimes = yield* makeCliRuntimes(provider, options)
  const { closeGrace, failed } = runtimes
  const rosterTimeout = Duration.fromInputUnsafe(options.rosterTimeout ?? "2 seconds")

  /** A veto, logged with its reason for whoever explains residency. */
  const logBusy = (reason: string): Effect.Effect<StopAnswer> =>
    Effect.logDebug("Claude runtime is busy", reason).pipe(Effect.annotateLogs({ provider }), Effect.as(stopVetoed(reason)))

  const logProtocolError = (message: string) =>
    Effect.logWarning("Claude stream-json protocol error").pipe(Effect.annotateLogs({ provider, message }))

  const open = (config: SessionConfig, resume: PersistenceHandle | null) =>
    Effect.gen(function*() {
      // A new conversation gets an id we choose, so it is known before the first turn.
      const requestedId = resume === null ? randomUUID() : resume.sessionId
      const args = [
        ...(options.args ?? defaultArgs),
        ...(resume === null ? ["--session-id", requestedId] : ["--resume", requestedId])
      ]
      // Process groups of the CLI's background shells are noted while they are still its descendants.
      const { peer, detached, shutdown, close } = yield* startCliPeer<string, OutgoingControlRequest, ControlResponse>(runtimes, {
        command: {
          command: options.command ?? "claude",
          args,
          env: { ...defaultEnv, ...options.env, ...runtimeEnv(config.runtimeMarker) }
        },
        cwd: config.cwd,
        // A CLI that refuses to start says why on stderr (e.g. bypassPermissions as root): see `exitError`.
        stripCarriageReturn: true,
        requestId: (n) => `quiesce-${n}`,
        encode: (request) => encodeLine(request.line),
        logProtocolError,
        wording: { timeout: "answer" }
      }, options.onSpawn)
      const cli = peer.process
      const noteDetached = detached.note

      let rosterWaiters: Array<Deferred.Deferred<void, ProviderFailed>> = []
      const permissions = new Map<string, ControlRequest>()
      let turn: Deferred.Deferred<TurnEnd, ProviderFailed> | undefined
      /** The daemon's id of the turn in flight, which a veto names. */
      let turnId: string | undefined
      let autonomousTurn = false
      /** An interrupt was asked for since the current turn started: its error result is expected. */
      let interruptRequested = false
      let unstartedMessages = 0
      let sessionState: string | undefined
      let work: BackgroundWork = freshWork
      let sessionId: string | undefined = resume === null ? undefined : resume.sessionId
      let lastReply = ""

      const local = (): LocalState => ({
        turnInFlight: turn !== undefined,
        autonomousTurn,
        unstartedMessages,
        permissionsPending: permissions.size,
        turnId: turn === undefined ? undefined : turnId,
        permissionIds: [...permissions.keys()],
        // A probe's own `initialize` is not work; any other control request of ours (an interrupt) is.
        processing: cli.unreadLines() + peer.pending().filter(([, request]) => request.rosterAfter === undefined).length,
        sessionState
      })

      const note = (observation: Observation) => {
        work = observe(work, observation)
      }

      const finishTurn = (exit: Exit.Exit<TurnEnd, ProviderFailed>) => {
        const current = turn
        turn = undefined
        if (current !== undefined) Deferred.doneUnsafe(current, exit)
      }

      const write = (operation: string, line: string): Effect.Effect<void, ProviderFailed> =>
        Effect.suspend(() => {
          if (Deferred.isDoneUnsafe(cli.exited)) return Effect.fail(failed(operation, `${provider} process has exited`, true))
          cli.write(line)
          return Effect.void
        })

      const answerPermission = (requestId: string, response: Record<string, unknown>) =>
        encodeLine({ type: "control_response", response: { subtype: "success", request_id: requestId, response } })

      const onControlRequest = (request: ControlRequest): Effect.Effect<void> => {
        if (request.request.subtype === "can_use_tool") {
          permissions.set(request.request_id, request)
          config.onEvent({ _tag: "PermissionRequested", id: request.request_id })
          return Effect.void
        }
        // Nothing else was enabled (no hooks, no SDK MCP servers); an answer keeps the CLI from waiting.
        cli.write(encodeLine({
          type: "control_response",
          response: { subtype: "error", request_id: request.request_id, error: `Quiesce does not handle ${request.request.subtype}` }
        }))
        return logProtocolError(`unhandled control request ${request.request.subtype}`)
      }

      const onControlResponse = (message: ControlResponse): Effect.Effect<void> =>
        peer.answer(message.response.request_id, message, (request) => {
          // The roster the CLI sends after this answer is the next line; wait for it from here on.
          if (request.rosterAfter !== undefined) rosterWaiters.push(request.rosterAfter)
        })

      const onTurnOutput = () => {
        if (turn === undefined) autonomousTurn = true
      }

      const onMessage = (message: unknown): Effect.Effect<void> => {
        if (isControlResponse(message)) return onControlResponse(message)
        if (isControlRequest(message)) return onControlRequest(message)
        if (isEnvelope(message) && message.type === "keep_alive") return Effect.void
        // The roster a probe asks for is a passive read: only a changed roster is activity.
        if (!(isBackgroundTasksChanged(message) && sameRoster(work.live, message.tasks))) {
          config.onEvent({ _tag: "Activity" })
        }
        if (isControlCancelRequest(message)) {
          if (permissions.delete(message.request_id)) config.onEvent({ _tag: "PermissionResolved", id: message.request_id })
        } else if (isSystemInit(message)) {
          note({ _tag: "TurnStarted", version: message.claude_code_version })
          unstartedMessages = Math.max(0, unstartedMessages - 1)
          onTurnOutput()
          const expected = sessionId
          // The CLI's word is what a later resume needs, even when it is not the id asked for.
          sessionId = message.session_id
          if (expected !== undefined && expected !== message.session_id) {
            return logProtocolError(`expected session ${expected}, the CLI runs ${message.session_id}`)
          }
        } else if (isBackgroundTasksChanged(message)) {
          const descriptions = new Map(message.tasks.flatMap((task): ReadonlyArray<readonly [string, string]> => {
            const description = taskDescription(task)
            return description === undefined ? [] : [[task.task_id, description]]
          }))
          note({ _tag: "Roster", taskIds: message.tasks.map((task) => task.task_id), descriptions })
          if (message.tasks.length !== 0) noteDetached()
          const waiters = rosterWaiters
          rosterWaiters = []
          for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
        } else if (isTaskStarted(message)) {
          note({ _tag: "TaskStarted", taskId: message.task_id, description: taskDescription(message) })
          noteDetached()
        } else if (isTaskNotification(message)) {
          note({ _tag: "TaskReported", taskId: message.task_id })
        } else if (isSessionStateChanged(message)) {
          sessionState = message.state
          if (message.state === "idle") {
            // Idle comes after the queue of prompts has drained and every turn has ended.
            unstartedMessages = 0
            autonomousTurn = false
          } else onTurnOutput()
        } else if (isAssistantMessage(message)) {
          if (message.parent_tool_use_id === undefined || message.parent_tool_use_id === null) {
            const text = message.message.content.filter(isTextBlock).map((block) => block.text).join("")
            if (text !== "") lastReply = text
          }
          onTurnOutput()
        } else if (isResultMessage(message)) {
          note({ _tag: "TurnEnded" })
          const reply = message.result ?? lastReply
          lastReply = ""
          // A turn the CLI started on its own (woken by a completion report) replies too.
          config.onEvent({ _tag: "Reply", text: reply })
          if (turn === undefined) autonomousTurn = false
          else if (message.is_error === true && !interruptRequested) {
            // e.g. the model endpoint refused; an interrupted turn ends in an error result too, but that is no failure.
            const detail = message.result ?? message.errors?.join("; ") ?? "no detail"
            finishTurn(Exit.fail(failed("turn", `${message.subtype}: ${detail}`)))
          } else finishTurn(Exit.succeed({ reply: reply === "" ? null : reply, interrupted: message.is_error === true }))
        } else if (!isEnvelope(message)) {
          return logProtocolError("a line without a type")
        }
        return Effect.void
      }

      yield* peer.listen(runtimes.scope, {
        // Each line is handled synchronously once taken (and no longer counted as unread), so a
        // probe never sees one half-applied.
        decode: decodeLine,
        onMessage,
        onOversizedLine: () => config.onEvent({ _tag: "Activity" }),
        exitError: (code) => {
          const said = cli.stderrTail().split("\n").at(-1) ?? ""
          return failed("process", `${provider} exited with code ${code}${said === "" ? "" : `: ${said}`}`)
        },
        onExit: (error) =>
          Effect.sync(() => {
            runtimes.forget(shutdown)
            for (const waiter of rosterWaiters) Deferred.doneUnsafe(waiter, Exit.fail(error))
            rosterWaiters = []
            finishTurn(Exit.fail(error))
          }).pipe(
            // A CLI that crashed or was killed leaves its background shells running: they end with it.
            Effect.andThen(detached.end(closeGrace))
          )
      })

      /** One control request; fails on an error answer or none in time. */
      const controlRequest = (
        subtype: string,
        rosterAfter?: Deferred.Deferred<void, ProviderFailed>
      ): Effect.Effect<unknown, ProviderFailed> =>
        peer.request(subtype, (id) => ({ line: { type: "control_request", request_id: id, request: { subtype } }, rosterAfter })).pipe(
          Effect.flatMap((message) =>
            message.response.subtype === "success"
              ? Effect.succeed(message.response.response)
              : Effect.fail(failed(subtype, message.response.error ?? "the CLI refused"))
          )
        )

      /** Asks the CLI itself: its session state, then the live roster that follows the answer. */
      const askCli = Effect.gen(function*() {
        const rosterAfter = Deferred.makeUnsafe<void, ProviderFailed>()
        const answer = yield* controlRequest("initialize", rosterAfter).pipe(
          Effect.flatMap((response) =>
            decodeInitializeResponse(response).pipe(
              Effect.mapError((error) => failed("initialize", `malformed answer: ${error.message}`))
            )
          )
        )
        if (answer.claude_code_version !== undefined) note({ _tag: "Version", version: answer.claude_code_version })
        const roster = yield* Deferred.await(rosterAfter).pipe(Effect.timeoutOption(rosterTimeout))
        if (roster._tag === "None") {
          rosterWaiters = rosterWaiters.filter((waiter) => waiter !== rosterAfter)
          // The roster is the authoritative read: without it the cached one (empty in a fresh CLI) proves nothing.
          const support = rosterSupport(work)
          return yield* failed(
            "initialize",
            support.supported ? `no roster within ${Duration.format(rosterTimeout)} after initialize` : support.reason
          )
        }
        return answer.session_state
      })

      // The first `initialize` sets the session up; every later one (the probe's) is a repeat.
      const opened = yield* controlRequest("initialize").pipe(
        Effect.flatMap((response) =>
          decodeInitializeResponse(response).pipe(
            Effect.mapError((error) => failed("initialize", `malformed answer: ${error.message}`))
          )
        ),
        Effect.onError(() => shutdown)
      )
      if (opened.claude_code_version !== undefined) note({ _tag: "Version", version: opened.claude_code_version })

      const send = (operation: string, text: string) =>
        Effect.suspend(() => {
          unstartedMessages++
          return write(operation, userMessage(text)).pipe(
            Effect.onError(() => Effect.sync(() => (unstartedMessages = Math.max(0, unstartedMessages - 1))))
          )
        })

      const agentSession: AgentSession = {
        pid: cli.pid,
        exited: Effect.asVoid(Deferred.await(cli.exited)),
        // A new conversation is saved once the CLI has opened its first turn.
        persistence: Effect.sync(() =>
          sessionId === undefined || (resume === null && work.turnsStarted === 0) ? null : { provider, sessionId }
        ),
        startTurn: (text, daemonTurnId) =>
          Effect.gen(function*() {
            const done = Deferred.makeUnsafe<TurnEnd, ProviderFailed>()
            turn = done
            turnId = daemonTurnId
            interruptRequested = false
            lastReply = ""
            yield* send("prompt", text).pipe(Effect.onError(() => Effect.sync(() => (turn = undefined))))
            return Deferred.await(done)
          }),
        steer: (text) => turn === undefined ? Effect.succeed(false) : Effect.as(send("steer", text), true),
        outOfBand: () => undefined,
        respondToPermission: (permissionId, allow) =>
          Effect.suspend(() => {
            const request = permissions.get(permissionId)
            if (request === undefined) return Effect.void
            permissions.delete(permissionId)
            config.onEvent({ _tag: "PermissionResolved", id: permissionId })
            return write(
              "permission",
              answerPermission(
                permissionId,
                allow
                  ? { behavior: "allow", updatedInput: request.request.input ?? {} }
                  : { behavior: "deny", message: "Denied through Quiesce" }
              )
            )
          }),
        interrupt: Effect.suspend(() => {
          if (turn === undefined && !autonomousTurn) return Effect.void
          interruptRequested = true
          return Effect.asVoid(controlRequest("interrupt"))
        }),
        close: close("Claude"),
        canStopRuntime: Effect.suspend(() => {
          // Work the adapter knows of is an answer already; the CLI is not asked.
          const busy = localVeto(local())
          if (busy !== undefined) return logBusy(busy.reason)
          return askCli.pipe(
            Effect.mapError((error) => new RuntimeProbeFailed({ agentId: config.agentId, message: error.message })),
            Effect.flatMap((state) => {
              // Re-read local state: a turn or a prompt may have arrived while the CLI answered.
              const decision = decide({ ...local(), sessionState: state ?? sessionState }, work)
              switch (decision._tag) {
                case "Permit":
                  return Effect.succeed(stopPermitted)
                case "Veto":
                  return logBusy(decision.reason)
                case "Unknown":
                  return Effect.fail(new RuntimeProbeFailed({ agentId: config.agentId, message: decision.reason }))
              }
            })
          )
        })
      }
      return agentSession
    })

  return processPerSessionClient(provider, open)
})

/** Adds the Claude Code provider to the `ProviderRegistry`; its processes end with the layer. */
export const layer = (options: ClaudeProviderOptions = {}): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> =>
  ProviderRegistry.register(makeClaudeClient(options))
