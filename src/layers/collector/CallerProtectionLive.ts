/**
 * The live `CallerProtection` (C4): it keeps an agent, and so its family, resident while finish
 * subscriptions or message delivery still owe it something.
 *
 * @module
 */
import { Effect, Layer } from "effect"
import { CallerProtection } from "../../services/CallerProtection.ts"
import { FinishSubscriptions } from "../../services/FinishSubscriptions.ts"
import { MessageDelivery } from "../../services/MessageDelivery.ts"

/**
 * An agent is protected while a finish notification is owed to it or a message to it is not yet
 * acknowledged. The collector sees only this answer, never the records or queues behind it.
 */
export const layer: Layer.Layer<CallerProtection, never, FinishSubscriptions | MessageDelivery> = Layer.effect(
  CallerProtection,
  Effect.gen(function*() {
    const finish = yield* FinishSubscriptions
    const delivery = yield* MessageDelivery
    return CallerProtection.of({
      isProtected: (agentId) =>
        Effect.flatMap(finish.hasPendingForCaller(agentId), (owed) => owed ? Effect.succeed(true) : delivery.hasPending(agentId))
    })
  })
)
