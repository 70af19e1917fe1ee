/**
 * Whether one OpenCode runtime may be released (`canStopRuntime`, C6), asked in this order:
 *
 * 1. without the event stream the adapter cannot see turns, permissions or notices: the probe fails;
 * 2. work the adapter sees (a turn, a pending permission, a completion notice not yet run) vetoes
 *    at once, and the server is not asked; a notice past its bound fails the probe;
 * 3. the P4 probe reads this server's inventories for the session (`probe.ts`);
 * 4. last, a process the server started that runs outside its tree (a job the `bash` tool
 *    backgrounded with `&`, found by the runtime's environment marker, see `escapedProcesses.ts`)
 *    vetoes while it runs. Such processes are never ended.
 *
 * Every veto says what holds the runtime.
 */
import { Effect } from "effect"
import { RuntimeProbeFailed } from "../../../domain/errors.ts"
import { type StopAnswer, stopPermitted, stopVetoed } from "../../../domain/provider.ts"
import { escapedProcesses, escapedReason } from "../../../platform/escapedProcesses.ts"
import type { EventSubscription } from "./eventSubscription.ts"
import { canStopRuntime } from "./probe.ts"
import type { OpenCodeServer } from "./serverProcess.ts"
import type { SessionState } from "./sessionState.ts"

/** The runtime asked about, and what its adapter sees. */
export interface StopCheckOptions {
  readonly provider: string
  readonly agentId: string
  /** The runtime's marker, which every process it starts carries in its environment. */
  readonly runtimeMarker: string
  readonly server: OpenCodeServer
  /** OpenCode's id of the root session. */
  readonly sessionId: string
  /** Reads inventories a release does not serve as empty (see `OpenCodeProviderOptions`). */
  readonly trustMissingInventories: boolean
  readonly events: Pick<EventSubscription, "gone">
  readonly state: Pick<SessionState, "adapterWork" | "pendingNotice">
}

/** The runtime's veto, asked afresh each time it runs; see the module comment. */
export const stopCheck = (options: StopCheckOptions): Effect.Effect<StopAnswer, RuntimeProbeFailed> => {
  const { agentId, events, provider, server, state } = options
  const probeFailed = (message: string) => new RuntimeProbeFailed({ agentId, message: `${provider}: ${message}` })
  const vetoLogged = (reason: string) =>
    Effect.logDebug("OpenCode release vetoed").pipe(
      Effect.annotateLogs({ provider, reason }),
      Effect.as(stopVetoed(reason))
    )

  /** A job the bash tool left behind (`&`): no inventory lists it, and it is never ended here. */
  const escapedVeto = escapedProcesses(server.process.pid, options.runtimeMarker).pipe(
    Effect.mapError((error) => probeFailed(error.message)),
    Effect.flatMap((escaped) => escaped.length === 0 ? Effect.succeed(stopPermitted) : vetoLogged(escapedReason(escaped)))
  )

  return Effect.suspend(() => {
    const gone = events.gone()
    if (gone !== undefined) return Effect.fail(probeFailed(`event stream is gone: ${gone}`))
    // Work the adapter sees is an answer already; the server is not asked.
    const own = state.adapterWork()
    if (own !== undefined) return Effect.succeed(stopVetoed(own))
    const waiting = state.pendingNotice()
    if (waiting !== undefined) {
      return waiting.overdue ? Effect.fail(probeFailed(waiting.reason)) : vetoLogged(waiting.reason)
    }
    return canStopRuntime({
      agentId,
      baseUrl: server.endpoint.baseUrl,
      headers: server.endpoint.headers,
      sessionId: options.sessionId,
      trustMissingInventories: options.trustMissingInventories ? { serverVersion: server.version } : undefined
    }).pipe(
      // A turn, a permission or a notice may have appeared while the server answered.
      Effect.map((answer): StopAnswer => {
        if (!answer.canStop) return answer
        const since = state.adapterWork() ?? state.pendingNotice()?.reason
        return since === undefined ? answer : stopVetoed(since)
      }),
      Effect.flatMap((answer) => answer.canStop ? escapedVeto : Effect.succeed(answer))
    )
  })
}
