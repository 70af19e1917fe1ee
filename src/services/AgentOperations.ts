import { Context, type Effect } from "effect"
import type { ClusterUnavailable } from "../domain/errors.ts"
import type { AgentActions } from "./AgentRegistry.ts"

/** The registry operations that act on one agent, wherever it is hosted. */
export type AgentOperationName =
  | "create"
  | "prompt"
  | "interrupt"
  | "respondToPermission"
  | "get"
  | "turn"
  | "turns"
  | "awaitFinish"

/** A registry operation that may also fail because the agent's host could not be reached. */
export type Routed<F> = F extends (...args: infer A) => Effect.Effect<infer S, infer E, infer R>
  ? (...args: A) => Effect.Effect<S, E | ClusterUnavailable, R>
  : never

/**
 * The operations the HTTP API, message delivery and finish subscriptions perform on one agent. On
 * a lone daemon they are its registry's; on a cluster's runner each goes to the runner that hosts
 * the agent (X6), which may fail with `ClusterUnavailable`. A close and a delete are not among
 * them: they ask the collector first (`AgentClose`).
 */
export class AgentOperations extends Context.Service<AgentOperations, {
  readonly [K in AgentOperationName]: Routed<AgentActions[K]>
}>()("quiesce/cluster/AgentOperations") {}
