/**
 * What every line-protocol adapter (Claude, Codex, Pi, plugin) holds for its provider as a whole:
 * the request timeout and close grace it was given, its `ProviderFailed` builder, and how every
 * runtime still running is ended when the provider's scope closes. `startCliPeer` starts one
 * runtime of a CLI whose commands may leave process groups of their own behind.
 */
import { Cause, Deferred, Duration, Effect, type Scope } from "effect"
import { ProviderFailed } from "../../../domain/errors.ts"
import type { CliProviderOptions } from "./cliOptions.ts"
import { type DetachedGroups, trackDetachedGroups } from "../../../platform/detachedGroups.ts"
import { type Failed, type JsonLinePeer, type JsonLinePeerOptions, startJsonLinePeer } from "./jsonLinePeer.ts"

/** The provider-wide settings and running runtimes of one line-protocol adapter. */
export interface CliRuntimes {
  readonly provider: string
  /** The provider's scope: the runtimes' readers run in it. */
  readonly scope: Scope.Scope
  readonly requestTimeout: Duration.Duration
  readonly closeGrace: Duration.Input
  readonly failed: Failed
  /** Runs `shutdown` if the provider's scope closes while the runtime still runs; `forget` it once the runtime is gone. */
  readonly track: (shutdown: Effect.Effect<void>) => void
  readonly forget: (shutdown: Effect.Effect<void>) => void
}

/** The adapter's provider-wide part; every runtime still tracked is ended when the scope closes. */
export const makeCliRuntimes = Effect.fnUntraced(function*(
  provider: string,
  options: Pick<CliProviderOptions, "requestTimeout" | "closeGrace">
) {
  const scope = yield* Effect.scope
  /** How each live runtime is ended; run for every one still live when the layer closes. */
  const running = new Set<Effect.Effect<void>>()
  yield* Effect.addFinalizer(() => Effect.forEach([...running], (shutdown) => shutdown, { concurrency: "unbounded", discard: true }))
  const runtimes: CliRuntimes = {
    provider,
    scope,
    requestTimeout: Duration.fromInputUnsafe(options.requestTimeout ?? "30 seconds"),
    closeGrace: options.closeGrace ?? "2 seconds",
    failed: (operation, message, refused) =>
      new ProviderFailed({ provider, operation, message, ...(refused === true ? { refused } : {}) }),
    track: (shutdown) => {
      running.add(shutdown)
    },
    forget: (shutdown) => {
      running.delete(shutdown)
    }
  }
  return runtimes
})

/** One CLI runtime: its peer, and how to end it with the process groups its commands started. */
export interface CliPeer<Id extends string | number, Out, Reply> {
  readonly peer: JsonLinePeer<Id, Out, Reply>
  /** The groups the CLI's commands started in groups of their own (see `detachedGroups.ts`). */
  readonly detached: DetachedGroups
  /** Ends the CLI's group, then every detached group it left: a SIGKILLed CLI leaves them running. */
  readonly shutdown: Effect.Effect<void>
  /** The session's close: `shutdown`, no longer tracked, a failure logged as "<cli> did not close cleanly". */
  readonly close: (cli: string) => Effect.Effect<void>
}

/**
 * Starts a CLI runtime as a peer named after the provider, tells `onSpawn` its group and every
 * detached group noted later, and tracks its shutdown until the provider forgets it.
 */
export const startCliPeer = <Id extends string | number, Out, Reply>(
  runtimes: CliRuntimes,
  options: Omit<JsonLinePeerOptions<Id, Out>, "name" | "failed" | "requestTimeout">,
  onSpawn: ((pid: number) => void) | undefined
): Effect.Effect<CliPeer<Id, Out, Reply>, ProviderFailed> =>
  Effect.map(
    startJsonLinePeer<Id, Out, Reply>({
      ...options,
      name: runtimes.provider,
      failed: runtimes.failed,
      requestTimeout: runtimes.requestTimeout
    }),
    (peer) => {
      const cli = peer.process
      onSpawn?.(cli.pid)
      const detached = trackDetachedGroups(cli.pid, () => Deferred.isDoneUnsafe(cli.exited), (pgid) => onSpawn?.(pgid))
      const shutdown = Effect.suspend(() => {
        // Noted while they are still the CLI's descendants; once it is gone they cannot be told apart.
        detached.note()
        return cli.terminate(runtimes.closeGrace).pipe(Effect.andThen(detached.end(runtimes.closeGrace)))
      })
      runtimes.track(shutdown)
      const close = (name: string) =>
        shutdown.pipe(
          Effect.ensuring(Effect.sync(() => runtimes.forget(shutdown))),
          Effect.catchCause((cause) =>
            Effect.logWarning(`${name} did not close cleanly`).pipe(
              Effect.annotateLogs({ provider: runtimes.provider, cause: Cause.pretty(cause) })
            )
          )
        )
      return { peer, detached, shutdown, close }
    }
  )
