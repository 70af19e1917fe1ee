import { Deferred } from "effect"
import { blocker, type Blocker, noBlockers } from "../../domain/blocker.ts"
import type { AgentSession } from "../../domain/provider.ts"
import { makeTurnSlot, type TurnSlot } from "./turnSlot.ts"

/**
 * One live runtime of one agent and everything the daemon knows that keeps it busy. A resumed
 * or reloaded runtime is a new `LiveAgent` with a new identity. Its mutable fields are the
 * residency's to write; its turn slot (`slot`) is the turn owner's (see `turnSlot.ts`).
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
  lastActivityAt: number
  /** Counts every activity, so that two in the same millisecond are still told apart. */
  activityCount: number
  /** The turn owner's part: the turn slot, the queue behind it and its idle waiters. */
  readonly slot: TurnSlot
  /** Completed when the runtime is no longer the agent's live runtime. */
  readonly gone: Deferred.Deferred<void>
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
}

/** What names a new runtime; everything else starts idle, with nothing pending. */
export type NewLiveAgent = Pick<
  LiveAgent,
  "agentId" | "session" | "parentAgentId" | "internal" | "provider" | "marker" | "sessionId" | "lastActivityAt"
>

/** A new live runtime, with a fresh identity and turn slot, and nothing pending. */
export const makeLiveAgent = (fields: NewLiveAgent): LiveAgent => ({
  ...fields,
  identity: {},
  slot: makeTurnSlot(),
  activityCount: 0,
  gone: Deferred.makeUnsafe(),
  releasing: false,
  barred: false,
  takingDown: false,
  closedByDaemon: false,
  pendingReplacement: false,
  pendingEvents: 0,
  drainWaiters: undefined,
  permissions: undefined,
  permissionResponses: 0,
  subagents: undefined
})

/**
 * The daemon baseline of one live runtime (C4), each blocker named. `laneBusy` is whether a
 * lifecycle operation other than this runtime's own release holds or awaits its lane.
 */
export const baselineBlockers = (agent: LiveAgent, isLive: boolean, laneBusy: boolean): ReadonlyArray<Blocker> => {
  if (!isLive) return releasedBlockers
  let out: Array<Blocker> | undefined
  const add = (found: Blocker) => (out ??= []).push(found)
  if (agent.internal) add(internalBlocker)
  if (agent.slot.turn !== undefined) add(turnBlocker)
  if (agent.slot.queued > 0) add(queuedBlocker)
  if (agent.pendingReplacement) add(replacementBlocker)
  if (agent.permissions !== undefined && agent.permissions.size > 0) add(permissionBlocker)
  if (agent.permissionResponses > 0) add(permissionResponseBlocker)
  if (laneBusy && !agent.releasing) add(laneBlocker)
  if (agent.slot.foregroundMutations > 0) add(mutationBlocker)
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
