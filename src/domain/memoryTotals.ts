/**
 * Memory resident against memory released, for a home, per provider and per label: what the
 * live runtimes hold now (their process trees, measured), and what the releases of the agents
 * now released gave back (each one's size measured just before its release, kept in its record).
 */
import { Schema } from "effect"
import { type Labels, reservedLabelPrefix } from "./agent.ts"

/** Resident and released memory of a set of agents, in bytes; an unmeasured one is counted apart, never as zero. */
export const MemoryFigures = Schema.Struct({
  /** What the live runtimes' process trees hold now (the measured ones). */
  residentBytes: Schema.Number,
  /** Live runtimes, measured or not. */
  residentRuntimes: Schema.Number,
  /** Live runtimes whose memory could not be measured now (not in `residentBytes`). */
  unmeasuredResident: Schema.Number,
  /** What the releases of the agents released now gave back: each one's size just before its release. */
  releasedBytes: Schema.Number,
  /** Agents released now (not resident), measured at their release or not. */
  releasedAgents: Schema.Number,
  /** Released agents whose size at release is unknown (it exited on its own, or released before it was recorded). */
  unmeasuredReleased: Schema.Number
})
export type MemoryFigures = typeof MemoryFigures.Type

/** The figures of every agent with one provider. */
export const ProviderMemory = Schema.Struct({ provider: Schema.String, ...MemoryFigures.fields })
export type ProviderMemory = typeof ProviderMemory.Type

/** The figures of every agent with one label (`key=value`; the daemon's own `quiesce.*` labels are left out). */
export const LabelMemory = Schema.Struct({ label: Schema.String, ...MemoryFigures.fields })
export type LabelMemory = typeof LabelMemory.Type

/** A home's (or the hub's homes') memory, resident and released: in all, per provider, per label. */
export const MemoryTotals = Schema.Struct({
  ...MemoryFigures.fields,
  byProvider: Schema.Array(ProviderMemory),
  byLabel: Schema.Array(LabelMemory)
})
export type MemoryTotals = typeof MemoryTotals.Type

/** One agent as the totals count it: resident with its memory now, or released with what its release gave back. */
export interface AgentMemory {
  readonly provider: string
  readonly labels: Labels
  readonly resident: boolean
  /** Resident: its process tree now; released: its size just before its release; null when unmeasured. */
  readonly bytes: number | null
}

const noFigures: MemoryFigures = {
  residentBytes: 0,
  residentRuntimes: 0,
  unmeasuredResident: 0,
  releasedBytes: 0,
  releasedAgents: 0,
  unmeasuredReleased: 0
}

const plus = (a: MemoryFigures, b: MemoryFigures): MemoryFigures => ({
  residentBytes: a.residentBytes + b.residentBytes,
  residentRuntimes: a.residentRuntimes + b.residentRuntimes,
  unmeasuredResident: a.unmeasuredResident + b.unmeasuredResident,
  releasedBytes: a.releasedBytes + b.releasedBytes,
  releasedAgents: a.releasedAgents + b.releasedAgents,
  unmeasuredReleased: a.unmeasuredReleased + b.unmeasuredReleased
})

const figuresOf = (agent: AgentMemory): MemoryFigures =>
  agent.resident
    ? { ...noFigures, residentRuntimes: 1, residentBytes: agent.bytes ?? 0, unmeasuredResident: agent.bytes === null ? 1 : 0 }
    : { ...noFigures, releasedAgents: 1, releasedBytes: agent.bytes ?? 0, unmeasuredReleased: agent.bytes === null ? 1 : 0 }

const add = (into: Map<string, MemoryFigures>, key: string, figures: MemoryFigures) =>
  into.set(key, plus(into.get(key) ?? noFigures, figures))

const sorted = (groups: Map<string, MemoryFigures>) => [...groups].sort(([a], [b]) => a.localeCompare(b))

/** Builds totals from the groups of figures they sum. */
const totalsOf = (
  all: MemoryFigures,
  providers: Map<string, MemoryFigures>,
  labels: Map<string, MemoryFigures>
): MemoryTotals => ({
  ...all,
  byProvider: sorted(providers).map(([provider, figures]) => ({ provider, ...figures })),
  byLabel: sorted(labels).map(([label, figures]) => ({ label, ...figures }))
})

/** The totals of a home's agents: each counted once in all, once under its provider, once under each of its own labels. */
export const memoryTotals = (agents: Iterable<AgentMemory>): MemoryTotals => {
  let all = noFigures
  const providers = new Map<string, MemoryFigures>()
  const labels = new Map<string, MemoryFigures>()
  for (const agent of agents) {
    const figures = figuresOf(agent)
    all = plus(all, figures)
    add(providers, agent.provider, figures)
    for (const [key, value] of Object.entries(agent.labels)) {
      if (!key.startsWith(reservedLabelPrefix)) add(labels, `${key}=${value}`, figures)
    }
  }
  return totalsOf(all, providers, labels)
}

/** The totals of several homes together (the hub's): the sums of their figures, provider by provider and label by label. */
export const sumMemoryTotals = (homes: Iterable<MemoryTotals>): MemoryTotals => {
  let all = noFigures
  const providers = new Map<string, MemoryFigures>()
  const labels = new Map<string, MemoryFigures>()
  for (const { byLabel, byProvider, ...figures } of homes) {
    all = plus(all, figures)
    for (const { provider, ...each } of byProvider) add(providers, provider, each)
    for (const { label, ...each } of byLabel) add(labels, label, each)
  }
  return totalsOf(all, providers, labels)
}
