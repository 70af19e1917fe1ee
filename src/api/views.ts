/**
 * The API's views of domain records: pure mappers from what the registry, the collector and the
 * lifecycle hold (times epoch ms) to what the API answers (times ISO 8601). The daemon's handlers
 * and the cluster (a prompt's result carried between runners, the runtimes each runner reports)
 * use the same ones.
 */
import { Option } from "effect"
import { type AgentRecord, parentAgentIdOf } from "../domain/agent.ts"
import type { MemoryStatus } from "../domain/memory.ts"
import type { MemoryTotals } from "../domain/memoryTotals.ts"
import type { DaemonIdentity, DaemonStatus, RetirementAttempt, RetirementAttemptView } from "../domain/retirement.ts"
import type { ProbeView, RuntimeRow } from "../domain/runtimeRow.ts"
import type { CollectOutcome, ProbeObservation, Residency, SweepReport } from "../domain/sweep.ts"
import type { TurnRecord } from "../domain/turn.ts"
import type { WarmReserveView } from "../domain/warmReserve.ts"
import type { AgentSummary, PromptResult } from "./agents.ts"
import type { DaemonStatusView } from "./daemon.ts"
import type { MemoryView } from "./memory.ts"
import type { WarmReserveRow } from "./reserve.ts"
import type { CollectResult, ErrorSummary, SweepResult } from "./runtimes.ts"
import type { TurnView } from "./turns.ts"

/** An epoch-ms time as the API writes every time: ISO 8601. */
export const iso = (millis: number) => new Date(millis).toISOString()

/** An agent as the registry shows it (the registry's `AgentView`). */
export interface AgentViewInput {
  readonly record: AgentRecord
  readonly resident: boolean
  readonly pid: number | null
  readonly pendingPermissions: ReadonlyArray<string>
  readonly providerAvailable: boolean
}

/** An agent as a list or a read shows it. */
export const agentSummary = ({ pendingPermissions, pid, providerAvailable, record, resident }: AgentViewInput): AgentSummary => ({
  agentId: record.agentId,
  provider: record.provider,
  cwd: record.cwd,
  labels: record.labels,
  sessionId: record.persistence?.sessionId ?? null,
  resident,
  lifecycle: record.lifecycle,
  lastActivityAt: iso(record.lastActivityAt),
  parentAgentId: parentAgentIdOf(record.labels) ?? null,
  pendingPermissions,
  pid,
  providerAvailable,
  ...(resident || record.closedAt === null
    ? {}
    : { release: { at: iso(record.closedAt), reason: record.release?.reason ?? null, rssBytes: record.release?.rssBytes ?? null } })
})

/** A prompt's receipt as the registry gives it (its `output` absent until the turn ended). */
export type PromptReceiptInput = Omit<PromptResult, "output"> & { readonly output?: string | null | undefined }

/** A registry receipt as the API (and the cluster between runners) carries it. */
export const promptResult = (receipt: PromptReceiptInput): PromptResult => ({
  agentId: receipt.agentId,
  turnId: receipt.turnId,
  sessionId: receipt.sessionId,
  state: receipt.state,
  disposition: receipt.disposition,
  joinedTurnId: receipt.joinedTurnId,
  resumed: receipt.resumed,
  ...(receipt.output === undefined ? {} : { output: receipt.output }),
  error: receipt.error
})

/** An error flattened to its tag and message. */
export const errorSummary = (error: { readonly _tag: string; readonly message: string }): ErrorSummary => ({
  _tag: error._tag,
  message: error.message
})

/** A provider probe's observation, when there is one. */
export const probeView = (observation: ProbeObservation | null): ProbeView | null => {
  if (observation === null) return null
  const { at, since, ...rest } = observation
  return { ...rest, at: iso(at), ...(since === undefined ? {} : { since: iso(since) }) }
}

/** One turn as the journal holds it. */
export const turnView = (record: TurnRecord): TurnView => ({
  ...record,
  acceptedAt: iso(record.acceptedAt),
  dispatchedAt: record.dispatchedAt === null ? null : iso(record.dispatchedAt),
  endedAt: record.endedAt === null ? null : iso(record.endedAt)
})

/** How a collection of one runtime ended. */
export const collectResult = (outcome: CollectOutcome): CollectResult => {
  switch (outcome._tag) {
    case "Collected":
      return { outcome: "collected", blockers: [] }
    case "Retained":
      return {
        outcome: "retained",
        blockers: outcome.residency.blockers,
        state: outcome.residency.state,
        lastProbe: probeView(outcome.residency.veto)
      }
    case "Failed":
      return { outcome: "failed", blockers: [], error: errorSummary(outcome.error) }
  }
}

/** What a sweep released, and what failed. */
export const sweepResult = (report: SweepReport): SweepResult => ({
  collected: report.collected,
  failures: report.failures.map(({ agentId, error }) => ({ agentId, error: errorSummary(error) }))
})

/** The memory of a process tree, when it was measured. */
export interface MemorySampleInput {
  readonly rssBytes: number
  readonly measuredProcesses: number
}

/** A live runtime: the registry's view of it, the collector's explanation, its memory when measured. */
export const runtimeRow = (view: { readonly pid: number | null }, residency: Residency, sample: Option.Option<MemorySampleInput>): RuntimeRow => ({
  agentId: residency.agentId,
  provider: residency.provider,
  sessionId: residency.sessionId,
  pid: view.pid,
  rssBytes: Option.isSome(sample) ? sample.value.rssBytes : null,
  measuredProcesses: Option.isSome(sample) ? sample.value.measuredProcesses : null,
  family: residency.family,
  idleSince: iso(residency.idleSince),
  eligibleAt: residency.releasableAt === null ? null : iso(residency.releasableAt),
  state: residency.state,
  blockers: residency.blockers,
  lastProbe: probeView(residency.veto),
  ...(residency.memory === undefined ? {} : { evictionRank: residency.memory.evictionRank })
})

/** A warm reserve, each ready process with its memory sample (by pid) when measured. */
export const warmReserveRow = (
  view: WarmReserveView,
  sampleOf: (pid: number) => Option.Option<MemorySampleInput>
): WarmReserveRow => ({
  ...view,
  ready: view.ready.map((process) => {
    const sample = sampleOf(process.pid)
    return {
      ...process,
      rssBytes: Option.isSome(sample) ? sample.value.rssBytes : null,
      measuredProcesses: Option.isSome(sample) ? sample.value.measuredProcesses : null
    }
  })
})

/** The memory budget's status. */
export const memoryView = (status: MemoryStatus): MemoryView => ({
  ...status,
  sampledAt: status.sampledAt === null ? null : iso(status.sampledAt),
  pressure: status.pressure === null ? null : { since: iso(status.pressure.since), causes: status.pressure.causes },
  order: status.order.map((entry) => ({ ...entry, lastActiveAt: iso(entry.lastActiveAt) }))
})

/** A retirement attempt. */
export const attemptView = (attempt: RetirementAttempt): RetirementAttemptView => ({ ...attempt, at: iso(attempt.at) })

/** The daemon's identity (with the port it really listens on) and its lifecycle now. */
export const daemonStatusView = (
  identity: DaemonIdentity,
  port: number,
  status: DaemonStatus,
  memory: MemoryTotals
): DaemonStatusView => ({
  ...identity,
  port,
  phase: status.phase,
  idleSince: iso(status.idleSince),
  deadline: status.deadline === null ? null : iso(status.deadline),
  blockers: status.blockers,
  lastAttempt: status.lastAttempt === null ? null : attemptView(status.lastAttempt),
  failure: status.failure,
  memoryTotals: memory
})
