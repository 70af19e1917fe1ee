import type { Deferred, Semaphore } from "effect"
import { blocker, type Blocker, noBlockers } from "../../domain/blocker.ts"
import type { AgentSession } from "../../domain/provider.ts"
import type { TurnHandle, TurnOutcome } from "./turnHandle.ts"

/** The one turn a runtime runs at a time, and the prompts steered into it. */
export interface ActiveTurn {
  readonly turnId: string
  readonly handle: TurnHandle
  /** Prompts the provider took into this turn: they share its outcome. */
  readonly joined: Array<TurnHandle>
  /** An interrupt was asked for while it ran: a failure it ends with is an interruption. */
  interruptRequested: boolean
  /** Set once it ended, for a steer the provider accepted as the turn was ending. */
  outcome: TurnOutcome | undefined
}

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
  /** The `QUIESCE_RUNTIME` value its processes carry. */
  readonly marker: string
  /** Null until the provider reports a session; refreshed until it does. */
  sessionId: string | null
  /** Serializes prompt dispatch so that prompts reach the provider in the order admitted. */
  readonly dispatch: Semaphore.Semaphore
  lastActivityAt: number
  /** Counts every activity, so that two in the same millisecond are still told apart. */
  activityCount: number
  /** The running turn: from the moment it is handed to the provider until its end is processed. */
  turn: ActiveTurn | undefined
  /** Accepted prompts waiting for the running turn to end (the provider cannot steer them in). */
  queued: number
  /** Completed (and replaced) when the turn slot frees up or the runtime is being taken down. */
  wake: Deferred.Deferred<void>
  /** Completed when the runtime is no longer the agent's live runtime. */
  readonly gone: Deferred.Deferred<void>
  /** Prompts and out-of-band commands admitted and not yet handed to the provider. */
  foregroundMutations: number
  /** True while the collector holds this runtime's lane to release it. */
  releasing: boolean
  /** True while a release, close or reload is taking this runtime down: admission is barred. */
  barred: boolean
  /** True while a close, reload or shutdown takes it down: queued prompts let go and resume it later. */
  takingDown: boolean
  /** Set when the daemon began closing it (sticky once closed): a turn it cut short was interrupted. */
  closedByDaemon: boolean
  pendingReplacement: boolean
  pendingEvents: number
  drainWaiters: Array<Deferred.Deferred<void>> | undefined
  permissions: Set<string> | undefined
  permissionResponses: number
  subagents: Set<string> | undefined
  /** Waiting until no turn runs and nothing is queued (`awaitIdle`). */
  turnWaiters: Array<Deferred.Deferred<void>> | undefined
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
  if (agent.turn !== undefined) add(turnBlocker)
  if (agent.queued > 0) add(queuedBlocker)
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
const queuedBlocker = blocker("queued-prompt")
const replacementBlocker = blocker("pending-replacement")
const permissionBlocker = blocker("pending-permission")
const permissionResponseBlocker = blocker("permission-response-in-flight")
const laneBlocker = blocker("lifecycle-operation")
const mutationBlocker = blocker("foreground-mutation")
const eventsBlocker = blocker("undrained-events")
const subagentBlocker = blocker("running-subagents")
