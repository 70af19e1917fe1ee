/**
 * Every durable store in memory, for tests and throwaway hosts: agents, finish subscriptions, the
 * turn journal and the runtime ledger, each starting empty.
 */
import { Layer } from "effect"
import * as AgentStoreMemory from "./AgentStoreMemory.ts"
import * as FinishStoreMemory from "./FinishStoreMemory.ts"
import * as RuntimeLedgerMemory from "./RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "./TurnJournalMemory.ts"

/** `AgentStore`, `FinishStore`, `TurnJournal` and `RuntimeLedger`, all in memory and empty. */
export const layer = Layer.mergeAll(
  AgentStoreMemory.layer,
  FinishStoreMemory.layer,
  TurnJournalMemory.layer,
  RuntimeLedgerMemory.layer
)
