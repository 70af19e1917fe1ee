/**
 * The registry's live runtimes as the collector's candidates: each with its baseline blockers,
 * its resident memory when the host can read it, and its release (`closeIfEligible`), which the
 * residency carries out in the agent's lane.
 */
import { Effect, Option } from "effect"
import type { RuntimeCandidate } from "../../domain/candidate.ts"
import type { ProcessInspection } from "../../services/ProcessInspection.ts"
import { RuntimeCandidates } from "../../services/RuntimeCandidates.ts"
import type { LiveAgent } from "./LiveAgent.ts"
import type { Residency } from "./residency.ts"

/**
 * The resident memory of a live agent's process tree now, when the host can read it (undefined:
 * it cannot, no inspection or no pid): the candidates' `residentBytes`, and what a release records.
 */
export const residentBytesOf = (
  inspection: Option.Option<ProcessInspection["Service"]>,
  agent: LiveAgent
): Effect.Effect<number | undefined> | undefined =>
  agent.session.pid === undefined || Option.isNone(inspection)
    ? undefined
    : Effect.map(inspection.value.sample(agent.session.pid), (sample) => Option.getOrUndefined(sample)?.rssBytes)

/** The candidates over the residency; `inspection` samples their memory when the host has it. */
export const makeCandidates = (
  residency: Residency,
  inspection: Option.Option<ProcessInspection["Service"]>
): RuntimeCandidates["Service"] => {
  const candidateOf = (agent: LiveAgent, activityCount = agent.activityCount): RuntimeCandidate => ({
    identity: agent.identity,
    agentId: agent.agentId,
    parentAgentId: agent.parentAgentId,
    provider: agent.provider,
    sessionId: agent.sessionId,
    lastActivityAt: agent.lastActivityAt,
    blockers: Effect.sync(() => residency.blockersOf(agent)),
    residentBytes: residentBytesOf(inspection, agent),
    process: agent.session.pid === undefined ? undefined : { pid: agent.session.pid },
    canStopRuntime: agent.session.canStopRuntime,
    closeIfEligible: (revalidate, reason) => residency.releaseIfIdle(agent, activityCount, revalidate, reason)
  })

  return RuntimeCandidates.of({
    capture: Effect.gen(function*() {
      const out: Array<RuntimeCandidate> = []
      for (const agent of residency.liveAgents()) {
        if (agent.sessionId === null) yield* residency.refreshPersistence(agent)
        out.push(candidateOf(agent))
      }
      return out
    }),
    captureFamily: (agentId) =>
      Effect.sync(() => {
        const root = residency.liveOf(agentId)
        if (root === undefined) return []
        const out = [candidateOf(root)]
        const seen = new Set([agentId])
        for (let i = 0; i < out.length; i++) {
          for (const childId of residency.liveChildrenOf(out[i]!.agentId)) {
            const child = residency.liveOf(childId)
            if (child === undefined || seen.has(childId)) continue
            seen.add(childId)
            out.push(candidateOf(child))
          }
        }
        return out
      }),
    turnEnds: residency.turnEnds
  })
}
