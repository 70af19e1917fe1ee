/**
 * The client side of a line protocol (Claude stream-json control requests, Codex JSON-RPC, Pi RPC,
 * the plugin protocol): a child process started with its line reader (`lineProcess.ts`), requests
 * sent with an id of their own and kept pending until the reply that names that id, and every
 * request still pending failed when the process exits. A line that cannot be decoded, is too long
 * or answers no pending request is logged and skipped, never fatal. What a message means beyond
 * answering a request is the adapter's.
 */
import { Deferred, Duration, Effect, Exit, type Scope } from "effect"
import type { ProviderFailed } from "../../../domain/errors.ts"
import { providerRequestSpan, providerRequestSpanName } from "../../../domain/spans.ts"
import type { PluginCommand } from "../plugin/PluginProcess.ts"
import { type LineProcess, oversizedLine, startLineProcess } from "./lineProcess.ts"

/** Builds a `ProviderFailed` for one operation of the adapter's provider. */
export type Failed = (operation: string, message: string, refused?: boolean) => ProviderFailed

/** The words a protocol's errors and warnings use; they differ between protocols, and are kept as each one has them. */
export interface PeerWording {
  /** What a request that waited too long lacks: "no <timeout> within 30s". Default "response". */
  readonly timeout?: string | undefined
  /** What a message that answers no pending request is: "<reply> to unknown request r7". Default "response". */
  readonly reply?: string | undefined
  /** What a line that cannot be decoded is: "undecodable <line>: …". Default "line". */
  readonly line?: string | undefined
}

/** How to start a peer and talk to it; `Out` is a request as the adapter builds it, before encoding. */
export interface JsonLinePeerOptions<Id extends string | number, Out> {
  /** How the process is named in errors: "Cannot start <name>", "<name> process has exited". */
  readonly name: string
  readonly command: PluginCommand
  readonly cwd: string
  /** Removes a trailing "\r" from each line (a CLI that may write CRLF). */
  readonly stripCarriageReturn?: boolean | undefined
  readonly failed: Failed
  /** How long a request waits for its reply. */
  readonly requestTimeout: Duration.Duration
  /** The id of the n-th request (n counts from 1). */
  readonly requestId: (n: number) => Id
  readonly encode: (request: Out) => string
  readonly logProtocolError: (message: string) => Effect.Effect<void>
  readonly wording?: PeerWording | undefined
}

/** How the peer's reader hands over what the process wrote; each message is handled to completion before the next. */
export interface PeerHandlers<M, E> {
  /** Decodes one complete stdout line that is not blank and not oversized. */
  readonly decode: (line: string) => Effect.Effect<M, E>
  /** Every decoded message; one that answers a request is passed to `answer` by the adapter. */
  readonly onMessage: (message: M) => Effect.Effect<void>
  /** A line too long to read was dropped (it is logged after this): e.g. still activity. */
  readonly onOversizedLine?: (() => void) | undefined
  /** The error every request still pending fails with once the process has exited. */
  readonly exitError: (code: number | null) => ProviderFailed
  /** Runs after the pending requests have failed with `error`; the reader then ends. */
  readonly onExit: (error: ProviderFailed) => Effect.Effect<void>
}

/** One started process speaking a line protocol, with its requests by id. */
export interface JsonLinePeer<Id extends string | number, Out, Reply> {
  readonly process: LineProcess
  /**
   * Sends the request `build` makes for a fresh id and waits for its reply. Fails, naming
   * `operation`, at once (refused) if the process has exited, or when no reply comes in time
   * or the process exits first.
   */
  readonly request: (operation: string, build: (id: Id) => Out) => Effect.Effect<Reply, ProviderFailed>
  /**
   * Settles the request `id` names with `reply` (`onAnswered` first sees what was asked); an id
   * that names no pending request is logged as a protocol error.
   */
  readonly answer: (id: unknown, reply: Reply, onAnswered?: (request: Out) => void) => Effect.Effect<void>
  /** Whether `id` names a request still waiting for its reply. */
  readonly isPending: (id: unknown) => boolean
  /** The requests still waiting for their reply, with their ids. */
  readonly pending: () => ReadonlyArray<readonly [Id, Out]>
  /** Starts the reader as fibers of `scope`. Call once, when the handlers are ready: output waits until then. */
  readonly listen: <M, E extends { readonly message: string }>(scope: Scope.Scope, handlers: PeerHandlers<M, E>) => Effect.Effect<void>
}

/** Starts the process of a line-protocol peer (see the module comment); its reader starts with `listen`. */
export const startJsonLinePeer = <Id extends string | number, Out, Reply>(
  options: JsonLinePeerOptions<Id, Out>
): Effect.Effect<JsonLinePeer<Id, Out, Reply>, ProviderFailed> =>
  Effect.gen(function*() {
    const { failed, name, requestTimeout } = options
    const wording = { timeout: "response", reply: "response", line: "line", ...options.wording }
    const child = yield* startLineProcess(options.command, options.cwd, { stripCarriageReturn: options.stripCarriageReturn }).pipe(
      Effect.mapError((error) => failed("spawn", `Cannot start ${name}: ${error.message}`))
    )
    const waiting = new Map<string | number, {
      readonly id: Id
      readonly request: Out
      readonly reply: Deferred.Deferred<Reply, ProviderFailed>
    }>()
    let nextRequest = 0
    const entryOf = (id: unknown) => typeof id === "string" || typeof id === "number" ? waiting.get(id) : undefined

    const request = (operation: string, build: (id: Id) => Out): Effect.Effect<Reply, ProviderFailed> =>
      Effect.suspend(() => {
        // A dead process answers nothing: fail now rather than after the request timeout.
        if (Deferred.isDoneUnsafe(child.exited)) return Effect.fail(failed(operation, `${name} process has exited`, true))
        const id = options.requestId(++nextRequest)
        const reply = Deferred.makeUnsafe<Reply, ProviderFailed>()
        const built = build(id)
        waiting.set(id, { id, request: built, reply })
        child.write(options.encode(built))
        return Deferred.await(reply).pipe(
          Effect.timeoutOrElse({
            duration: requestTimeout,
            orElse: () => Effect.fail(failed(operation, `no ${wording.timeout} within ${Duration.format(requestTimeout)}`))
          }),
          Effect.ensuring(Effect.sync(() => waiting.delete(id)))
        )
      }).pipe(
        // Under the span of what asked (a turn, a probe, an open), which names the agent.
        Effect.withSpan(providerRequestSpanName, providerRequestSpan(name, "json-lines", operation))
      )

    const answer = (id: unknown, reply: Reply, onAnswered?: (request: Out) => void): Effect.Effect<void> => {
      const entry = entryOf(id)
      if (entry === undefined) return options.logProtocolError(`${wording.reply} to unknown request ${String(id)}`)
      waiting.delete(entry.id)
      onAnswered?.(entry.request)
      Deferred.doneUnsafe(entry.reply, Exit.succeed(reply))
      return Effect.void
    }

    const listen = <M, E extends { readonly message: string }>(scope: Scope.Scope, handlers: PeerHandlers<M, E>) =>
      child.readLines(scope, {
        decode: handlers.decode,
        onMessage: handlers.onMessage,
        onUndecodable: (error) => options.logProtocolError(`undecodable ${wording.line}: ${error.message}`),
        onOversizedLine: (bytes) => {
          handlers.onOversizedLine?.()
          return options.logProtocolError(oversizedLine(bytes))
        },
        // When the process dies, nothing it owed will come.
        onExit: (code) =>
          Effect.suspend(() => {
            const error = handlers.exitError(code)
            for (const entry of waiting.values()) Deferred.doneUnsafe(entry.reply, Exit.fail(error))
            waiting.clear()
            return handlers.onExit(error)
          })
      })

    const peer: JsonLinePeer<Id, Out, Reply> = {
      process: child,
      request,
      answer,
      isPending: (id) => entryOf(id) !== undefined,
      pending: () => [...waiting.values()].map((entry): readonly [Id, Out] => [entry.id, entry.request]),
      listen
    }
    return peer
  })
