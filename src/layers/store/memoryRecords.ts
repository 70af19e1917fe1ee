/**
 * What the in-memory stores share: their records in a plain `Map` by key, put, removed and listed
 * in the SQLite stores' order (oldest `createdAt` first, then key).
 */
import { Effect, Order } from "effect"

/**
 * An empty map of records keyed by `keyOf`, with the store operations every in-memory store has;
 * `name` prefixes their spans (`AgentStoreMemory.put`).
 */
export const memoryRecords = <A extends { readonly createdAt: number }>(name: string, keyOf: (record: A) => string) => {
  const records = new Map<string, A>()
  const byCreatedThenKey: Order.Order<A> = Order.combine(
    Order.mapInput(Order.Number, (record: A) => record.createdAt),
    Order.mapInput(Order.String, keyOf)
  )
  return {
    records,
    put: Effect.fn(`${name}.put`)(function*(record: A) {
      records.set(keyOf(record), record)
    }),
    remove: Effect.fn(`${name}.remove`)(function*(key: string) {
      records.delete(key)
    }),
    list: Effect.sync(() => Array.from(records.values()).sort(byCreatedThenKey))
  }
}
