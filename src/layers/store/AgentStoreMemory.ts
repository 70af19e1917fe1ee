/**
 * An in-memory `AgentStore` for tests and throwaway runs: a plain `Map`, with the same
 * ordering as the SQLite store (oldest `createdAt` first, then `agentId`). Each build of
 * {@link layer} starts empty.
 */
import { Effect, Layer, Option, Order } from "effect"
import type { AgentRecord } from "../../domain/agent.ts"
import { AgentStore } from "../../services/AgentStore.ts"

const byCreatedThenId: Order.Order<AgentRecord> = Order.combine(
  Order.mapInput(Order.Number, (record: AgentRecord) => record.createdAt),
  Order.mapInput(Order.String, (record: AgentRecord) => record.agentId)
)

/** A fresh, empty in-memory `AgentStore`; each run of this effect gets its own map. */
export const make: Effect.Effect<AgentStore["Service"]> = Effect.sync(() => {
  const records = new Map<string, AgentRecord>()
  return AgentStore.of({
    put: Effect.fn("AgentStoreMemory.put")(function*(record: AgentRecord) {
      records.set(record.agentId, record)
    }),
    get: Effect.fn("AgentStoreMemory.get")(function*(agentId: string) {
      return Option.fromNullishOr(records.get(agentId))
    }),
    remove: Effect.fn("AgentStoreMemory.remove")(function*(agentId: string) {
      records.delete(agentId)
    }),
    list: Effect.sync(() => Array.from(records.values()).sort(byCreatedThenId))
  })
})

/** The in-memory `AgentStore` as a layer; its records live only as long as the layer. */
export const layer: Layer.Layer<AgentStore> = Layer.effect(AgentStore, make)
