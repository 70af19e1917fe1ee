import { Context, type Effect } from "effect"
import type { FinishStoreError, FinishSubscriptionsClosed } from "../domain/errors.ts"
import type { RetirementBlocker } from "../domain/retirement.ts"

/** Who wants to be told (the caller) when which agent (the target) finishes, and where the target lives. */
export interface FinishRegistrationInput {
  readonly callerAgentId: string
  readonly targetAgentId: string
  /** The server hosting the target; omitted or null for this server. */
  readonly serverId?: string | null | undefined
}

/** A committed finish subscription: its id, and how to accept or reject it when it was registered held. */
export interface FinishRegistration {
  readonly id: string
  /** Starts watching a held registration; a no-op once accepted. */
  readonly accept: Effect.Effect<void, FinishStoreError>
  /** Removes the durable record, then stops the watch. */
  readonly reject: Effect.Effect<void, FinishStoreError>
}

/**
 * Durable intents of caller agents to be told when a target finishes (D2), and the protection
 * they give their callers: from the start of registration, through recovery, while watching and
 * until the notification's dispatch is acknowledged.
 */
export class FinishSubscriptions extends Context.Service<FinishSubscriptions, {
  /**
   * Commits the intent durably, then returns it. With `held`, the watch starts only when the
   * registration is accepted.
   */
  readonly register: (
    input: FinishRegistrationInput,
    options?: { readonly held?: boolean }
  ) => Effect.Effect<FinishRegistration, FinishSubscriptionsClosed | FinishStoreError>
  readonly hasPendingForCaller: (agentId: string) => Effect.Effect<boolean>
  /** Waits until the stored subscriptions have been recovered and re-attached. */
  readonly recovered: Effect.Effect<void>
  /**
   * What of this service keeps the daemon from retiring: recovery under way, registrations under
   * way or held, notifications not yet acknowledged, and watches of remote targets (they need this
   * process). A watch of a local target does not: it is durable and comes back with the daemon.
   */
  readonly retirementBlockers: Effect.Effect<ReadonlyArray<RetirementBlocker>>
  /** Stops admission and the watches; the durable records stay for the next start. */
  readonly close: Effect.Effect<void>
}>()("quiesce/finish/FinishSubscriptions") {}
