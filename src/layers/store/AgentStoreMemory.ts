/**
 * An in-memory `AgentStore` for tests and throwaway runs: a plain `Map`, with the same
 * ordering as the SQLite store (oldest `createdAt` first, then `agentId`). Each build of
 * {@link layer} starts empty.
 */
import { Effect, Layer, Option } from "effect"
import type { AgentRecord } from "../../domain/agent.ts"
import { AgentStore } from "../../services/AgentStore.ts"
import { memoryRecords } from "./memoryRecords.ts"

/** A fresh, empty in-memory `AgentStore`; each run of this effect gets its own map. */
export const make: Effect.Effect<AgentStore["Service"]> = Effect.sync(() => {
  const { list, put, records, remove } = memoryRecords("AgentStoreMemory", (record: AgentRecord) => record.agentId)
  return AgentStore.of({
    put,
    get: Effect.fn("AgentStoreMemory.get")(function*(agentId: string) {
      return Option.fromNullishOr(records.get(agentId))
    }),
    remove,
    list
  })
})

/** The in-memory `AgentStore` as a layer; its records live only as long as the layer. */
export const layer: Layer.Layer<AgentStore> = Layer.effect(AgentStore, make)
