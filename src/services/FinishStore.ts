import { Context, type Effect } from "effect"
import type { FinishStoreError } from "../domain/errors.ts"
import type { FinishSubscription } from "../domain/finish.ts"

/** Durable finish subscriptions, in the same database as the agent records. */
export class FinishStore extends Context.Service<FinishStore, {
  /** Inserts or replaces by id; committed when it succeeds. */
  readonly put: (subscription: FinishSubscription) => Effect.Effect<void, FinishStoreError>
  readonly remove: (id: string) => Effect.Effect<void, FinishStoreError>
  /**
   * Saves the notification of a subscription whose target finished, only while the record exists
   * and has none: true for the one caller that saved it (it alone delivers it), false when the
   * record is gone or another watch (a cluster's other runner) saved one first. Atomic.
   */
  readonly claimNotification: (id: string, notification: string) => Effect.Effect<boolean, FinishStoreError>
  /** Every subscription, oldest first. */
  readonly list: Effect.Effect<ReadonlyArray<FinishSubscription>, FinishStoreError>
}>()("quiesce/finish/FinishStore") {}
