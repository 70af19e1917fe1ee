import { Context, type Effect } from "effect"
import type { DeliveryClosed, DeliveryFailed } from "../domain/errors.ts"
import type { PromptReceipt } from "./AgentRegistry.ts"

export interface AgentMessage {
  readonly recipientId: string
  readonly text: string
  /** The sending agent, if an agent sent it; its id heads the message in the recipient's prompt. */
  readonly senderId?: string | undefined
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
  /** Stops admission, dispatches what is queued without waiting for the window, awaits every acknowledgement. */
  readonly close: Effect.Effect<void>
}>()("quiesce/delivery/MessageDelivery") {}
