/**
 * One runtime's subscription to its server's event stream: connects before the session is
 * created or resumed (so no event of it is missed), reads and decodes the events, and hands each
 * to the session's state (`sessionState.ts`).
 *
 * A stream that ends while the server lives is reopened (a bounded number of times, restored
 * after a stream that stayed healthy), and the statuses read again, since events sent while no
 * stream was open are lost. Failing that, or once the server exits or the runtime closes, the
 * stream is gone for good: the turn in flight fails, and later turns and probes fail too.
 */
import { Deferred, Effect, Exit, Schedule, type Duration, type Scope } from "effect"
import type { ProviderFailed } from "../../../domain/errors.ts"
import { readUntilDone } from "../plugin/PluginProcess.ts"
import type { EventEnvelope } from "./apiTypes.ts"
import { providerFailure, type ServerCalls } from "./serverCalls.ts"
import { readServerEvent } from "./serverEvents.ts"
import type { OpenCodeServer } from "./serverProcess.ts"
import type { SessionState } from "./sessionState.ts"

/** How often a lost event stream is reopened before the runtime is declared broken. */
const reconnectAttempts = 3
const reconnectDelay = "250 millis"
/** A stream that lived this long before it ended was healthy: the reconnect budget is restored. */
const healthyStream = 10_000

/** Where the events come from. */
export interface EventSubscriptionOptions {
  readonly provider: string
  readonly server: OpenCodeServer
  readonly calls: ServerCalls
  /** How long the first connection may take to send its first event. */
  readonly requestTimeout: Duration.Duration
}

/** What the subscription hands the events to. */
export type EventSink = Pick<SessionState, "apply" | "resync" | "failTurn">

/** A connected subscription; see the module comment. */
export interface EventSubscription {
  /**
   * Reads the stream into `sink`, in fibers of `scope`, and waits until the server has said it
   * is connected; fails when it says nothing within the request timeout.
   */
  readonly start: (sink: EventSink, scope: Scope.Scope) => Effect.Effect<void, ProviderFailed>
  /** Why the stream is gone for good, once it is. */
  readonly gone: () => string | undefined
  /** The runtime is closing: a stream that ends from now on is not reopened. */
  readonly closing: () => void
  /** Ends the current connection. */
  readonly abort: () => void
}

/** Connects to the server's event stream; its first event is awaited by `start`. */
export const connectEvents = Effect.fnUntraced(function*(options: EventSubscriptionOptions) {
  const { calls, provider, server } = options
  const failed = providerFailure(provider)
  let stream = yield* calls.openEvents.pipe(
    Effect.mapError((error) => failed(error.operation, `${error.message}; server stderr: ${server.process.stderrTail()}`))
  )
  const connected = Deferred.makeUnsafe<void, ProviderFailed>()
  /** Set once the event stream is gone for good. */
  let broken: string | undefined
  let closing = false
  const abort = () => stream.abort()

  const start = (sink: EventSink, scope: Scope.Scope): Effect.Effect<void, ProviderFailed> => {
    const logMalformed = (payloads: ReadonlyArray<string>) =>
      Effect.forEach(payloads, (payload) =>
        Effect.logWarning("OpenCode event did not decode").pipe(Effect.annotateLogs({ provider, payload })), {
        discard: true
      })

    const deliver = (envelope: EventEnvelope): Effect.Effect<void> => {
      const event = readServerEvent(envelope)
      if (event === undefined) return Effect.void
      if (event._tag === "Connected") Deferred.doneUnsafe(connected, Exit.void)
      return sink.apply(event)
    }

    /** The stream is gone for good: the turn fails, later turns and probes fail too. */
    const streamLost = (why: string) =>
      Effect.sync(() => {
        broken ??= why
        abort()
        Deferred.doneUnsafe(connected, Exit.fail(failed("events", why)))
        sink.failTurn(failed("events", `${provider} event stream ended: ${why}`))
      })

    /** Reads one stream until it ends; then reconnects (bounded) while the server lives. */
    const pump = (attemptsLeft: number): Effect.Effect<void> => {
      const opened = Date.now()
      return readUntilDone(
        stream.next.pipe(
          Effect.flatMap((batch) =>
            batch === undefined
              ? Effect.succeed(false)
              : logMalformed(batch.malformed).pipe(
                Effect.andThen(Effect.forEach(batch.events, deliver, { discard: true })),
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
          abort()
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
      return calls.openEvents.pipe(
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
              yield* calls.statuses.pipe(
                Effect.flatMap(sink.resync),
                Effect.catch((error) => streamLost(`${why}; ${error.message}`))
              )
              return yield* pump(attemptsLeft - tries)
            })
        })
      )
    }

    return Effect.gen(function*() {
      yield* pump(reconnectAttempts).pipe(Effect.ensuring(Effect.sync(abort)), Effect.forkIn(scope))
      yield* Deferred.await(server.process.exited).pipe(
        Effect.flatMap((code) => streamLost(`${provider} exited with code ${code}`)),
        Effect.forkIn(scope)
      )
      yield* Deferred.await(connected).pipe(
        Effect.timeoutOrElse({
          duration: options.requestTimeout,
          orElse: () => Effect.fail(failed("events", "the event stream sent nothing"))
        })
      )
    })
  }

  const subscription: EventSubscription = {
    start,
    gone: () => broken,
    closing: () => {
      closing = true
    },
    abort
  }
  return subscription
})
