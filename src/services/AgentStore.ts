import { Context, type Effect, type Option } from "effect"
import type { AgentRecord } from "../domain/agent.ts"
import type { AgentStoreError } from "../domain/errors.ts"

/**
 * Durable agent records and their persistence handles. Records are never deleted by a release;
 * the registry resumes released agents from here, also after a restart.
 */
export class AgentStore extends Context.Service<AgentStore, {
  /** Inserts or replaces the record with the same agent id. */
  readonly put: (record: AgentRecord) => Effect.Effect<void, AgentStoreError>
  readonly get: (agentId: string) => Effect.Effect<Option.Option<AgentRecord>, AgentStoreError>
  /** Deletes the record of a deleted agent; a record that is not there is no error. */
  readonly remove: (agentId: string) => Effect.Effect<void, AgentStoreError>
  /** Every record, oldest first. */
  readonly list: Effect.Effect<ReadonlyArray<AgentRecord>, AgentStoreError>
}>()("quiesce/store/AgentStore") {}
