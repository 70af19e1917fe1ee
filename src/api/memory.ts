/** The memory budget, usage against it and the eviction order (`GET /v1/memory`, in the runtimes group). */
import { Schema } from "effect"
import { HttpApiEndpoint } from "effect/http-api"
import { EvictionEntry, MemoryBudget, MemoryHolder, PressureCause } from "../domain/memory.ts"
import { StartsDaemon } from "./annotations.ts"

/** The memory budget and the resident runtimes against it, as of the last sample (times ISO 8601). */
export const MemoryView = Schema.Struct({
  budget: MemoryBudget,
  sampledAt: Schema.NullOr(Schema.String),
  residentBytes: Schema.Number,
  residentRuntimes: Schema.Number,
  unmeasuredRuntimes: Schema.Number,
  availableBytes: Schema.NullOr(Schema.Number),
  pressure: Schema.NullOr(Schema.Struct({ since: Schema.String, causes: Schema.Array(PressureCause) })),
  episodes: Schema.Number,
  order: Schema.Array(Schema.Struct({ ...EvictionEntry.fields, lastActiveAt: Schema.String })),
  held: Schema.Array(MemoryHolder)
})
export type MemoryView = typeof MemoryView.Type

/** The memory budget, usage against it and the eviction order; null when no budget is configured. */
export const memoryEndpoint = HttpApiEndpoint.get("memory", "/v1/memory", { success: Schema.NullOr(MemoryView) })
  .annotate(StartsDaemon, false)
