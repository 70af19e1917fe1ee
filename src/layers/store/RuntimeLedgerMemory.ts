/**
 * An in-memory `RuntimeLedger` for tests and throwaway runs: a plain `Map` keyed by agent id and
 * pid, with the same ordering as the SQLite ledger (oldest `recordedAt` first, then agent id, then
 * pid). Each build of {@link layer} starts empty.
 */
import { Effect, Layer, Order } from "effect"
import type { RuntimeProcess } from "../../domain/runtimeProcess.ts"
import { RuntimeLedger } from "../../services/RuntimeLedger.ts"

const byRecordedThenAgentThenPid: Order.Order<RuntimeProcess> = Order.combineAll([
  Order.mapInput(Order.Number, (entry: RuntimeProcess) => entry.recordedAt),
  Order.mapInput(Order.String, (entry: RuntimeProcess) => entry.agentId),
  Order.mapInput(Order.Number, (entry: RuntimeProcess) => entry.pid)
])

/** `<pid>:<agentId>`: a pid is only digits, so the first `:` ends it and no two entries share a key. */
const keyOf = (agentId: string, pid: number) => `${pid}:${agentId}`

/** A fresh, empty in-memory `RuntimeLedger`; each run of this effect gets its own map. */
export const make: Effect.Effect<RuntimeLedger["Service"]> = Effect.sync(() => {
  const entries = new Map<string, RuntimeProcess>()
  return RuntimeLedger.of({
    record: Effect.fn("RuntimeLedgerMemory.record")(function*(entry: RuntimeProcess) {
      entries.set(keyOf(entry.agentId, entry.pid), entry)
    }),
    remove: Effect.fn("RuntimeLedgerMemory.remove")(function*(agentId: string, pid: number) {
      entries.delete(keyOf(agentId, pid))
    }),
    list: Effect.sync(() => Array.from(entries.values()).sort(byRecordedThenAgentThenPid))
  })
})

/**
 * The in-memory `RuntimeLedger` as a layer. Its entries vanish with the process, so it cannot
 * clean up after a crashed predecessor the way the SQLite ledger does.
 */
export const layer: Layer.Layer<RuntimeLedger> = Layer.effect(RuntimeLedger, make)
