/**
 * An in-memory `FinishStore` for tests and throwaway runs: a plain `Map`, with the same
 * ordering as the SQLite store (oldest `createdAt` first, then `id`). Each build of
 * {@link layer} starts empty.
 */
import { Effect, Layer } from "effect"
import type { FinishSubscription } from "../../domain/finish.ts"
import { FinishStore } from "../../services/FinishStore.ts"
import { memoryRecords } from "./memoryRecords.ts"

/** A fresh, empty in-memory `FinishStore`; each run of this effect gets its own map. */
export const make: Effect.Effect<FinishStore["Service"]> = Effect.sync(() => {
  const { list, put, records: subscriptions, remove } = memoryRecords(
    "FinishStoreMemory",
    (subscription: FinishSubscription) => subscription.id
  )
  return FinishStore.of({
    put,
    remove,
    claimNotification: Effect.fn("FinishStoreMemory.claimNotification")(function*(id: string, notification: string) {
      const stored = subscriptions.get(id)
      if (stored === undefined || stored.notification !== null) return false
      subscriptions.set(id, { ...stored, notification })
      return true
    }),
    list
  })
})

/** The in-memory `FinishStore` as a layer; its subscriptions live only as long as the layer. */
export const layer: Layer.Layer<FinishStore> = Layer.effect(FinishStore, make)
