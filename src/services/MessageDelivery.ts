import { Context, type Effect } from "effect"
import type { DeliveryClosed, DeliveryFailed } from "../domain/errors.ts"
import type { PromptReceipt } from "./AgentRegistry.ts"

/** A message to one agent, delivered to it as (part of) a prompt. */
export interface AgentMessage {
  readonly recipientId: string
  readonly text: string
  /** The sending agent, if an agent sent it; its id heads the message in the recipient's prompt. */
  readonly senderId?: string | undefined
  /**
   * An id unique for this recipient. Recorded in the turn journal with the turn that carries the
   * message, so the same message enqueued again (after a restart) is acknowledged with that turn
   * instead of being sent twice.
   */
  readonly id?: string | undefined
}

/**
 * Per-recipient message queues (D1). Messages to one recipient that arrive within the batching
 * window are dispatched together through the registry's prompt path, each sender's messages in
 * the order sent.
 */
export class MessageDelivery extends Context.Service<MessageDelivery, {
  /**
   * Admits a message; succeeds with an effect that waits until the provider acknowledged its
   * dispatch. Fails with `DeliveryClosed` once closing has begun.
   */
  readonly enqueue: (
    message: AgentMessage
  ) => Effect.Effect<Effect.Effect<PromptReceipt, DeliveryFailed>, DeliveryClosed>
  /** True from enqueue until the provider acknowledged the dispatch of every message to the agent. */
  readonly hasPending: (recipientId: string) => Effect.Effect<boolean>
  /** Every recipient with messages queued or being dispatched (what keeps a daemon from retiring). */
  readonly pendingRecipients: Effect.Effect<ReadonlyArray<string>>
  /** Stops admission, dispatches what is queued without waiting for the window, awaits every acknowledgement. */
  readonly close: Effect.Effect<void>
}>()("quiesce/delivery/MessageDelivery") {}
