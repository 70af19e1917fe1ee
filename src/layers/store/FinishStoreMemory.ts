/**
 * An in-memory `FinishStore` for tests and throwaway runs: a plain `Map`, with the same
 * ordering as the SQLite store (oldest `createdAt` first, then `id`). Each build of
 * {@link layer} starts empty.
 */
import { Effect, Layer, Order } from "effect"
import type { FinishSubscription } from "../../domain/finish.ts"
import { FinishStore } from "../../services/FinishStore.ts"

const byCreatedThenId: Order.Order<FinishSubscription> = Order.combine(
  Order.mapInput(Order.Number, (subscription: FinishSubscription) => subscription.createdAt),
  Order.mapInput(Order.String, (subscription: FinishSubscription) => subscription.id)
)

/** A fresh, empty in-memory `FinishStore`; each run of this effect gets its own map. */
export const make: Effect.Effect<FinishStore["Service"]> = Effect.sync(() => {
  const subscriptions = new Map<string, FinishSubscription>()
  return FinishStore.of({
    put: Effect.fn("FinishStoreMemory.put")(function*(subscription: FinishSubscription) {
      subscriptions.set(subscription.id, subscription)
    }),
    remove: Effect.fn("FinishStoreMemory.remove")(function*(id: string) {
      subscriptions.delete(id)
    }),
    claimNotification: Effect.fn("FinishStoreMemory.claimNotification")(function*(id: string, notification: string) {
      const stored = subscriptions.get(id)
      if (stored === undefined || stored.notification !== null) return false
      subscriptions.set(id, { ...stored, notification })
      return true
    }),
    list: Effect.sync(() => Array.from(subscriptions.values()).sort(byCreatedThenId))
  })
})

/** The in-memory `FinishStore` as a layer; its subscriptions live only as long as the layer. */
export const layer: Layer.Layer<FinishStore> = Layer.effect(FinishStore, make)
