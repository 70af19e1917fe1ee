import { Cause, Clock, Effect, Exit, Fiber, Option } from "effect"
import type { RuntimeCandidate } from "../../domain/candidate.ts"
import { RuntimeProbeFailed, RuntimeProbeTimedOut } from "../../domain/errors.ts"
import type { StopAnswer } from "../../domain/provider.ts"
import { agentAttributes } from "../../domain/spans.ts"
import type { ProbeObservation } from "../../domain/sweep.ts"
import { recordProbeDuration } from "../metrics/Metrics.ts"

export type ProbeVerdict =
  | { readonly _tag: "Permitted" }
  | { readonly _tag: "Vetoed"; readonly reason: string }
  | { readonly _tag: "Failed"; readonly error: RuntimeProbeFailed | RuntimeProbeTimedOut }

const permitted: ProbeVerdict = { _tag: "Permitted" }

/**
 * Asks a provider whether its runtime may stop (C6). Only `canStop: true` permits; a veto keeps the provider's reason. A failure, a defect, an
 * interruption of the probe itself, or no answer within the timeout is a typed failure.
 *
 * The probe runs in a fiber of its own so that the timeout never waits for a probe that is slow
 * to give up: a timed-out probe is interrupted in the background and its late answer is never
 * seen. If the caller is interrupted (the collector's scope closes), the probe is interrupted and
 * awaited for up to the probe timeout; one that ignores its interruption is abandoned and logged.
 */
export const runProbe = (
  candidate: RuntimeCandidate,
  check: Effect.Effect<StopAnswer, RuntimeProbeFailed>,
  timeoutMillis: number
): Effect.Effect<{ readonly verdict: ProbeVerdict; readonly observation: ProbeObservation }> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.monotonicTimeNanos
    const probe = yield* Effect.forkDetach(Effect.exit(check))
    const answer = yield* Fiber.join(probe).pipe(
      Effect.timeoutOption(timeoutMillis),
      // A probe that ignores its interruption is abandoned after the probe timeout, not awaited
      // forever: closing the collector must not hang on a provider.
      Effect.onInterrupt(() =>
        Fiber.interrupt(probe).pipe(
          Effect.timeoutOption(timeoutMillis),
          Effect.flatMap((ended) =>
            Option.isSome(ended)
              ? Effect.void
              : Effect.logWarning("A runtime's safety probe ignored its interruption; abandoned").pipe(
                Effect.annotateLogs({ agentId: candidate.agentId })
              )
          )
        )
      )
    )
    let verdict: ProbeVerdict
    if (Option.isNone(answer)) {
      probe.interruptUnsafe()
      verdict = { _tag: "Failed", error: RuntimeProbeTimedOut.of(candidate.agentId, timeoutMillis) }
    } else {
      const exit = answer.value
      if (Exit.isSuccess(exit)) verdict = exit.value.canStop ? permitted : { _tag: "Vetoed", reason: exit.value.reason }
      else {
        const cause = exit.cause
        verdict = {
          _tag: "Failed",
          error: Option.getOrElse(
            Cause.findErrorOption(cause),
            () =>
              new RuntimeProbeFailed({
                agentId: candidate.agentId,
                message: Cause.hasInterruptsOnly(cause) ? "the probe was interrupted" : describeDefect(Cause.squash(cause))
              })
          )
        }
      }
    }
    // Timed by the Clock service, so TestClock runs see virtual durations.
    yield* recordProbeDuration(Number((yield* Clock.monotonicTimeNanos) - startedAt) / 1e9)
    const at = yield* Clock.currentTimeMillis
    const observation = observe(candidate.agentId, at, verdict)
    yield* Effect.annotateCurrentSpan(
      observation.message === undefined
        ? { "quiesce.probe.outcome": observation.outcome }
        : { "quiesce.probe.outcome": observation.outcome, "quiesce.probe.reason": observation.message }
    )
    return { verdict, observation }
  }).pipe(Effect.withSpan("RuntimeCollector.probe", { attributes: agentAttributes(candidate.agentId, candidate.provider) }))

const observe = (agentId: string, at: number, verdict: ProbeVerdict): ProbeObservation => {
  switch (verdict._tag) {
    case "Permitted":
      return { agentId, at, outcome: "permitted" }
    case "Vetoed":
      return { agentId, at, outcome: "vetoed", message: verdict.reason }
    case "Failed":
      return {
        agentId,
        at,
        outcome: verdict.error._tag === "RuntimeProbeTimedOut" ? "timed-out" : "failed",
        message: verdict.error.message
      }
  }
}

export const describeDefect = (defect: unknown): string =>
  defect instanceof Error ? `${defect.name}: ${defect.message}` : String(defect)
