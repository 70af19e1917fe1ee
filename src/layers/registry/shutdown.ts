/**
 * The residency's part of a shutdown: every live runtime is closed in its lane and saved as
 * resumable, all at once, with the warm reserve alongside; what each close interrupted is said by
 * name, and the shutdown ends with one summary line.
 */
import { Duration, Effect, Fiber, Option } from "effect"
import { type StopAnswer, stopWorkUnknown } from "../../domain/provider.ts"
import type { WarmReserveService } from "../../services/WarmReserve.ts"
import type { Lanes } from "./lanes.ts"
import type { LiveAgent } from "./LiveAgent.ts"
import type { Residency } from "./residency.ts"

/**
 * What stopping this runtime now ends, in words (H3): `work` is what a stop cuts off — its
 * running turn, a pending permission, subagents, background work its provider names — and
 * `unpermitted` the provider's refusal that names no work: a veto that cannot rule work out
 * (an OMP before 18.3 never permits), or no answer (asked once, briefly). An unknown is never
 * taken as idle, nor reported as work the stop interrupted.
 */
const whatStopEnds = (agent: LiveAgent, shutdownProbeTimeout: Duration.Duration) =>
  Effect.gen(function*() {
    const work: Array<string> = []
    let unpermitted: string | undefined
    if (agent.slot.turn !== undefined) work.push(`turn ${agent.slot.turn.turnId} was running`)
    if (agent.permissions !== undefined && agent.permissions.size > 0) work.push("a permission was pending")
    if (agent.subagents !== undefined && agent.subagents.size > 0) work.push(`${agent.subagents.size} subagent(s) were running`)
    if (agent.session.canStopRuntime !== undefined && Duration.isGreaterThan(shutdownProbeTimeout, Duration.zero)) {
      const unknown = (reason: string): StopAnswer => stopWorkUnknown(`background work unknown (${reason})`)
      const answer = yield* agent.session.canStopRuntime.pipe(
        Effect.timeoutOption(shutdownProbeTimeout),
        Effect.map(Option.getOrElse(() => unknown("the provider did not answer in time"))),
        // Whatever went wrong asking (a defect too), this runtime's close and the others' go on.
        Effect.catch((error) => Effect.succeed(unknown(error.message))),
        Effect.catchCause(() => Effect.succeed(unknown("the provider failed asking")))
      )
      if (!answer.canStop && answer.workUnknown === true) unpermitted = answer.reason
      else if (!answer.canStop) work.push(answer.reason)
    }
    // Work seen: the refusal that named none adds nothing to it.
    return { work, unpermitted: work.length === 0 ? unpermitted : undefined }
  })

/**
 * Closes every live runtime in its lane and saves it as resumable, all at once (so the host's
 * deadline is one close grace, not one per runtime), and the warm reserve alongside. What each
 * close interrupted is said by name, and a close its provider did not permit without naming work,
 * apart; it ends with one summary line. Failures are logged.
 */
export const closeEveryRuntime = (
  residency: Residency,
  lanes: Lanes,
  reserve: WarmReserveService,
  shutdownProbeTimeout: Duration.Duration
) =>
  Effect.gen(function*() {
    let released = 0
    const interrupted: Array<string> = []
    const unpermitted: Array<string> = []
    // Idle warm processes close alongside the runtimes, within the same shutdown deadline.
    const closingReserve = yield* Effect.forkChild(reserve.close)
    yield* Effect.forEach(residency.liveAgents().map((agent) => agent.agentId), (agentId) =>
      lanes.inLane(
        agentId,
        Effect.suspend(() => {
          const agent = residency.liveOf(agentId)
          if (agent === undefined) return Effect.void
          const annotated = Effect.annotateLogs({ agentId, provider: agent.provider })
          return whatStopEnds(agent, shutdownProbeTimeout).pipe(
            Effect.tap(({ unpermitted: reason, work }) =>
              work.length > 0
                ? Effect.logWarning(`Stopping agent ${agentId} interrupts: ${work.join("; ")}`).pipe(annotated)
                : reason !== undefined
                ? Effect.logWarning(`Stopping agent ${agentId} without its provider's permission: ${reason}`).pipe(annotated)
                : Effect.void
            ),
            Effect.flatMap(({ unpermitted: reason, work }) =>
              residency.takeDown(agent, "shutdown").pipe(Effect.tap(() =>
                Effect.sync(() => {
                  released++
                  if (work.length > 0) interrupted.push(`${agentId} (${work.join("; ")})`)
                  else if (reason !== undefined) unpermitted.push(`${agentId} (${reason})`)
                })
              ))
            )
          )
        })
      ).pipe(
        Effect.catch((error) =>
          Effect.logWarning("Closing agent runtime at shutdown failed").pipe(
            Effect.annotateLogs({ agentId, error: error.message })
          )
        )
      ), { concurrency: "unbounded", discard: true })
    yield* Fiber.join(closingReserve)
    // A daemon that had nothing resident has nothing to summarize.
    if (released > 0 || interrupted.length > 0) {
      yield* Effect.logInfo(
        `Shutdown released ${released} runtime${released === 1 ? "" : "s"} resumable; ` +
          (interrupted.length === 0 ? "no work was interrupted" : `interrupted: ${interrupted.join(", ")}`) +
          (unpermitted.length === 0 ? "" : `; closed without the provider's permission: ${unpermitted.join(", ")}`)
      ).pipe(Effect.annotateLogs({ released, interrupted: interrupted.length, unpermitted: unpermitted.length }))
    }
  })
