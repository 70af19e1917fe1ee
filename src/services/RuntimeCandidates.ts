import { Context, type Effect } from "effect"
import type { RuntimeCandidate } from "../domain/candidate.ts"

/**
 * The live runtimes an owner (the agent registry) offers for collection, captured as
 * `RuntimeCandidate` snapshots. The collector never holds them beyond one decision.
 */
export class RuntimeCandidates extends Context.Service<RuntimeCandidates, {
  /** Every live runtime, in a stable order. */
  readonly capture: Effect.Effect<ReadonlyArray<RuntimeCandidate>>
  /**
   * The live runtime of `agentId` followed by its managed descendants (transitively, by parent
   * label), captured fresh. Empty when the agent has no live runtime. Costs the family's size,
   * not the registry's, so revalidation stays cheap however many runtimes are live.
   */
  readonly captureFamily: (agentId: string) => Effect.Effect<ReadonlyArray<RuntimeCandidate>>
}>()("quiesce/collector/RuntimeCandidates") {}
