import { Context } from "effect"
import type { CheckedClose, CheckedDelete } from "../domain/close.ts"
import type { Routed } from "./AgentOperations.ts"

/**
 * An explicit close of one agent's runtime, or a delete of the agent, that asks first: refused
 * with what it would end (the blockers, the provider's veto, a session that cannot be resumed)
 * unless forced. Apart from `AgentOperations` because it needs the
 * collector, which message delivery and finish subscriptions (users of `AgentOperations`) come
 * before. On a lone daemon it is checked by this daemon's collector; on a cluster's runner it goes
 * to the runner that hosts the agent and is checked there (X6).
 */
export class AgentClose extends Context.Service<AgentClose, {
  readonly close: Routed<CheckedClose>
  readonly delete: Routed<CheckedDelete>
}>()("quiesce/AgentClose") {}
