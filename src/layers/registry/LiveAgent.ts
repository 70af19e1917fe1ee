import type { Deferred, Semaphore } from "effect"
import { blocker, type Blocker, noBlockers } from "../../domain/blocker.ts"
import type { AgentSession } from "../../domain/provider.ts"

/**
 * One live runtime of one agent and everything the daemon knows that keeps it busy. A resumed
 * or reloaded runtime is a new `LiveAgent` with a new identity.
 */
export interface LiveAgent {
  readonly agentId: string
  readonly identity: object
  readonly session: AgentSession
  readonly parentAgentId: string | undefined
  readonly internal: boolean
  readonly provider: string
  /** Null until the provider reports a session; refreshed until it does. */
  sessionId: string | null
  /** Serializes prompt dispatch so that prompts reach the provider in the order admitted. */
  readonly dispatch: Semaphore.Semaphore
  lastActivityAt: number
  /** Counts every activity, so that two in the same millisecond are still told apart. */
  activityCount: number
  /** Turns started and not yet ended (a new turn can start before an old one's end is processed). */
  activeTurns: number
  /** Prompts and out-of-band commands admitted and not yet handed to the provider. */
  foregroundMutations: number
  /** True while the collector holds this runtime's lane to release it. */
  releasing: boolean
  /** True while a release, close or reload is taking this runtime down: admission is barred. */
  barred: boolean
  pendingReplacement: boolean
  pendingEvents: number
  drainWaiters: Array<Deferred.Deferred<void>> | undefined
  permissions: Set<string> | undefined
  permissionResponses: number
  subagents: Set<string> | undefined
  turnWaiters: Array<Deferred.Deferred<void>> | undefined
  /** The turn running now, if any: prompts steered into it share its id and its reply. */
  currentTurn: { readonly id: string; readonly done: Deferred.Deferred<string | null> } | undefined
}

/**
 * The daemon baseline of one live runtime (C4), each blocker named. `laneBusy` is whether a
 * lifecycle operation other than this runtime's own release holds or awaits its lane.
 */
export const baselineBlockers = (agent: LiveAgent, isLive: boolean, laneBusy: boolean): ReadonlyArray<Blocker> => {
  if (!isLive) return releasedBlockers
  let out: Array<Blocker> | undefined
  const add = (found: Blocker) => (out ??= []).push(found)
  if (agent.internal) add(internalBlocker)
  if (agent.activeTurns > 0) add(turnBlocker)
  if (agent.pendingReplacement) add(replacementBlocker)
  if (agent.permissions !== undefined && agent.permissions.size > 0) add(permissionBlocker)
  if (agent.permissionResponses > 0) add(permissionResponseBlocker)
  if (laneBusy && !agent.releasing) add(laneBlocker)
  if (agent.foregroundMutations > 0) add(mutationBlocker)
  if (agent.pendingEvents > 0) add(eventsBlocker)
  if (agent.subagents !== undefined && agent.subagents.size > 0) add(subagentBlocker)
  return out ?? noBlockers
}

const releasedBlockers = [blocker("lifecycle-not-idle", "released")]
const internalBlocker = blocker("internal-agent")
const turnBlocker = blocker("foreground-turn")
const replacementBlocker = blocker("pending-replacement")
const permissionBlocker = blocker("pending-permission")
const permissionResponseBlocker = blocker("permission-response-in-flight")
const laneBlocker = blocker("lifecycle-operation")
const mutationBlocker = blocker("foreground-mutation")
const eventsBlocker = blocker("undrained-events")
const subagentBlocker = blocker("running-subagents")
