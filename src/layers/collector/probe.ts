import { Clock, Effect, Option } from "effect"
import type { RuntimeCandidate } from "../../domain/candidate.ts"
import { RuntimeProbeFailed, RuntimeProbeTimedOut } from "../../domain/errors.ts"
import type { ProbeObservation } from "../../domain/sweep.ts"

export type ProbeVerdict =
  | { readonly _tag: "Permitted" }
  | { readonly _tag: "Vetoed" }
  | { readonly _tag: "Failed"; readonly error: RuntimeProbeFailed | RuntimeProbeTimedOut }

const permitted: ProbeVerdict = { _tag: "Permitted" }
const vetoed: ProbeVerdict = { _tag: "Vetoed" }

/**
 * Asks a provider whether its runtime may stop (C6). Only `true` permits. A failure, a defect or
 * no answer within the timeout is a typed failure; a timed-out probe is interrupted, so a late
 * `true` is never seen.
 */
export const runProbe = (
  candidate: RuntimeCandidate,
  check: Effect.Effect<boolean, RuntimeProbeFailed>,
  timeoutMillis: number
): Effect.Effect<{ readonly verdict: ProbeVerdict; readonly observation: ProbeObservation }> =>
  check.pipe(
    Effect.timeoutOption(timeoutMillis),
    Effect.map((answer): ProbeVerdict =>
      Option.isNone(answer)
        ? { _tag: "Failed", error: RuntimeProbeTimedOut.of(candidate.agentId, timeoutMillis) }
        : answer.value === true
        ? permitted
        : vetoed
    ),
    Effect.catch((error) => Effect.succeed<ProbeVerdict>({ _tag: "Failed", error })),
    Effect.catchDefect((defect) =>
      Effect.succeed<ProbeVerdict>({
        _tag: "Failed",
        error: new RuntimeProbeFailed({ agentId: candidate.agentId, message: describeDefect(defect) })
      })
    ),
    Effect.flatMap((verdict) =>
      Effect.map(Clock.currentTimeMillis, (at) => ({ verdict, observation: observe(candidate.agentId, at, verdict) }))
    )
  )

const observe = (agentId: string, at: number, verdict: ProbeVerdict): ProbeObservation => {
  switch (verdict._tag) {
    case "Permitted":
      return { agentId, at, outcome: "permitted" }
    case "Vetoed":
      return { agentId, at, outcome: "vetoed" }
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
