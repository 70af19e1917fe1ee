import { Context, type Effect, type Scope, type Stream } from "effect"
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
  /**
   * Subscribes (for the scope) to the agent id of each runtime whose turn ends from now on (its
   * end recorded, its turn slot free). The collector asks the runtime's provider then, so that a
   * veto (a background job the turn left running) shows at once. Optional.
   */
  readonly turnEnds?: Effect.Effect<Stream.Stream<string>, never, Scope.Scope> | undefined
}>()("quiesce/collector/RuntimeCandidates") {}
