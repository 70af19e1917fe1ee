/**
 * A child process that speaks one message per stdout line (the plugin protocol, Pi RPC, Codex
 * JSON-RPC, Claude stream-json), with the reader every such adapter needs: output and the exit are
 * queued as they happen and handled by one fiber, strictly in arrival order, so a reply written
 * just before the process died is handled before the exit fails whatever was still pending.
 */
import { Deferred, Effect, Queue, type Scope } from "effect"
import { maxLineBytes } from "../../../domain/pluginProtocol.ts"
import { type PluginCommand, type PluginProcess, readUntilDone, startPluginProcess } from "../plugin/PluginProcess.ts"

export interface LineProcessOptions {
  /** Removes a trailing "\r" from each line before it is handled (a CLI that may write CRLF). */
  readonly stripCarriageReturn?: boolean | undefined
}

/** How the reader handles what the process wrote; each item is handled to completion before the next. */
export interface LineHandlers<M, E> {
  /** Decodes one complete stdout line that is not blank and not oversized. */
  readonly decode: (line: string) => Effect.Effect<M, E>
  readonly onMessage: (message: M) => Effect.Effect<void>
  /** A line `decode` refused: reported, never fatal to the reader. */
  readonly onUndecodable: (error: E) => Effect.Effect<void>
  /** A line longer than `maxLineBytes`; its content was dropped (see `oversizedLine`). */
  readonly onOversizedLine: (bytes: number) => Effect.Effect<void>
  /** The process exited: handled after every line read before the exit, and last — the reader then ends. */
  readonly onExit: (code: number | null) => Effect.Effect<void>
}

export interface LineProcess extends PluginProcess {
  /** Lines read from stdout that the reader has not taken yet (a line being handled is not counted). */
  readonly unreadLines: () => number
  /**
   * Starts the reader, and the watcher that queues the exit, as fibers of `scope`. Call once, when
   * the handlers are ready: what the process writes before that waits in the queue.
   */
  readonly readLines: <M, E>(scope: Scope.Scope, handlers: LineHandlers<M, E>) => Effect.Effect<void>
}

/** What to report about an oversized line. */
export const oversizedLine = (bytes: number): string => `line of ${bytes} bytes exceeds ${maxLineBytes}`

type Item = { readonly line: string } | { readonly oversized: number } | { readonly exited: number | null }

/** Starts `command` in its own process group (see `startPluginProcess`) with its line reader ready to start. */
export const startLineProcess = Effect.fnUntraced(function*(
  command: PluginCommand,
  cwd: string,
  options: LineProcessOptions = {}
) {
  const inbox = yield* Queue.unbounded<Item>()
  let unread = 0
  const child = yield* startPluginProcess(command, cwd, {
    onLine: (line) => {
      unread++
      Queue.offerUnsafe(inbox, { line })
    },
    onOversizedLine: (bytes) => Queue.offerUnsafe(inbox, { oversized: bytes })
  })

  const readLines = <M, E>(scope: Scope.Scope, handlers: LineHandlers<M, E>): Effect.Effect<void> =>
    Effect.gen(function*() {
      const next: Effect.Effect<boolean> = Effect.flatMap(Queue.take(inbox), (item) => {
        if ("exited" in item) return Effect.as(handlers.onExit(item.exited), false)
        if ("oversized" in item) return Effect.as(handlers.onOversizedLine(item.oversized), true)
        unread--
        const line = options.stripCarriageReturn === true && item.line.endsWith("\r") ? item.line.slice(0, -1) : item.line
        return handlers.decode(line).pipe(
          Effect.matchEffect({ onFailure: handlers.onUndecodable, onSuccess: handlers.onMessage }),
          Effect.as(true)
        )
      })
      yield* readUntilDone(next).pipe(Effect.forkIn(scope))
      yield* Deferred.await(child.exited).pipe(
        Effect.flatMap((code) => Effect.sync(() => Queue.offerUnsafe(inbox, { exited: code }))),
        Effect.forkIn(scope)
      )
    })

  const lineProcess: LineProcess = { ...child, unreadLines: () => unread, readLines }
  return lineProcess
})
