import { Context, type Effect, type Option } from "effect"
import type { AgentStoreError } from "../domain/errors.ts"
import type { FinishOutcome } from "../domain/finish.ts"
import type { TurnRecord } from "../domain/turn.ts"

/**
 * An agent's newest finish as journaled: `position` counts its finishes (1 for the first), and
 * `outcome` is how it finished. A finish watch waits for a position after the one it saw.
 */
export interface JournaledFinish {
  readonly position: number
  readonly outcome: FinishOutcome
}

/** A prompt to accept: its record as it starts, plus the delivered messages it carries. */
export interface AcceptTurn {
  readonly record: TurnRecord
  /**
   * Ids of the delivered messages this prompt carries (message delivery): each names one turn per
   * recipient (the newest that carried it), so a message delivered again after a crash finds it.
   */
  readonly messageIds?: ReadonlyArray<string> | undefined
}

/** What `accept` did: wrote the new record, or found the one a client's message id already has. */
export type Acceptance =
  | { readonly _tag: "Accepted"; readonly record: TurnRecord }
  | { readonly _tag: "Existing"; readonly record: TurnRecord }

/**
 * The durable turn journal: one record per accepted prompt, written before it is dispatched.
 * `(agentId, clientMessageId)` is unique; `accept` checks and writes in one transaction, so two
 * acceptances of one client id can never both succeed, in one process or across a restart.
 * Writes are applied in the order they were submitted, and each succeeds only once it is durable.
 */
export class TurnJournal extends Context.Service<TurnJournal, {
  readonly accept: (input: AcceptTurn) => Effect.Effect<Acceptance, AgentStoreError>
  /** Writes the record's state, disposition, reply, error and times (by turn id). */
  readonly update: (record: TurnRecord) => Effect.Effect<void, AgentStoreError>
  /**
   * `update` for the step that hands a turn to its provider: written only while the stored turn
   * is still `accepted`. False when it is not: another process (a cluster's runner, or a second
   * path in this one) took the turn first, so it must not run here.
   */
  readonly claim: (record: TurnRecord) => Effect.Effect<boolean, AgentStoreError>
  readonly get: (agentId: string, turnId: string) => Effect.Effect<Option.Option<TurnRecord>, AgentStoreError>
  /** The agent's newest records, newest accepted first, at most `limit`. */
  readonly recent: (agentId: string, limit: number) => Effect.Effect<ReadonlyArray<TurnRecord>, AgentStoreError>
  readonly byClientMessageId: (
    agentId: string,
    clientMessageId: string
  ) => Effect.Effect<Option.Option<TurnRecord>, AgentStoreError>
  /** The turn that carried a delivered message, if one did. */
  readonly byMessageId: (recipientId: string, messageId: string) => Effect.Effect<Option.Option<TurnRecord>, AgentStoreError>
  /** Every record not yet final (`accepted`, `running`), oldest first: what a start-up recovers. */
  readonly unfinished: Effect.Effect<ReadonlyArray<TurnRecord>, AgentStoreError>
  /**
   * One agent's records not yet final, oldest first: what a cluster's runner takes over when it
   * starts hosting the agent (indexed by agent, so it never reads the other agents' turns).
   */
  readonly unfinishedOf: (agentId: string) => Effect.Effect<ReadonlyArray<TurnRecord>, AgentStoreError>
  /**
   * Forgets final records that ended before `endedBefore`, and beyond the newest `keepPerAgent` of
   * each agent. Returns how many were removed.
   */
  readonly prune: (endedBefore: number, keepPerAgent: number) => Effect.Effect<number, AgentStoreError>
  /**
   * Journals the agent's next finish, replacing the previous one, and returns its position (one
   * past the previous one's; 1 for the first). Positions only grow, also across a delete.
   */
  readonly recordFinish: (agentId: string, outcome: FinishOutcome) => Effect.Effect<number, AgentStoreError>
  /** The agent's newest journaled finish; none before its first. */
  readonly lastFinish: (agentId: string) => Effect.Effect<Option.Option<JournaledFinish>, AgentStoreError>
  /** Forgets every record of a deleted agent, final or not. Returns how many were removed. */
  readonly removeAgent: (agentId: string) => Effect.Effect<number, AgentStoreError>
}>()("quiesce/store/TurnJournal") {}
