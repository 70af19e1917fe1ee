import { Context, type Effect } from "effect"
import type { AgentStoreError } from "../domain/errors.ts"
import type { RuntimeProcess } from "../domain/runtimeProcess.ts"

/**
 * The durable ledger of live runtime processes: each runtime's process group leader, its start
 * time and its environment marker, recorded while the runtime runs and removed when it has
 * ended. Kept in the daemon's database, so a daemon that starts on a home whose previous daemon
 * died can end the groups that daemon left (see `layers/host/leftoverRuntimes.ts`).
 *
 * Failures are `AgentStoreError`s with operations `"ledger.record"`, `"ledger.remove"`,
 * `"ledger.list"` (and `"ledger.open"` when a durable ledger cannot be opened).
 */
export class RuntimeLedger extends Context.Service<RuntimeLedger, {
  /** Inserts the entry, or replaces the one with the same agent id and pid; committed when it succeeds. */
  readonly record: (entry: RuntimeProcess) => Effect.Effect<void, AgentStoreError>
  /** Removes the entry of this agent and pid; removing one that is not there is not an error. */
  readonly remove: (agentId: string, pid: number) => Effect.Effect<void, AgentStoreError>
  /** Every entry, oldest `recordedAt` first, then by agent id and pid. */
  readonly list: Effect.Effect<ReadonlyArray<RuntimeProcess>, AgentStoreError>
}>()("quiesce/store/RuntimeLedger") {}
