/**
 * The durable `TurnJournal`: a `turns` table (one row per accepted prompt) and a `turn_messages`
 * table (the delivered messages each turn carried), normally in the daemon's one SQLite file
 * (see `SqliteDatabase.layerStores`).
 *
 * `(agent_id, client_message_id)` and `(recipient_id, message_id)` are unique indexes, and
 * `accept` reads and writes in one transaction (`BEGIN IMMEDIATE` on SQLite), and its insert
 * gives way to a row that took the client id first, so a client id is accepted once even by two
 * daemons racing on one SQLite file or by a cluster's runners on one PostgreSQL database.
 */
import { Effect, Layer, Option, Predicate, Result, Schema, SchemaTransformation, type Scope } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql"
import { AgentStoreError } from "../../domain/errors.ts"
import { FinishKind, type FinishOutcome } from "../../domain/finish.ts"
import { Disposition, TurnError, TurnRecord, TurnState } from "../../domain/turn.ts"
import { type Acceptance, type AcceptTurn, type JournaledFinish, TurnJournal } from "../../services/TurnJournal.ts"
import * as GroupCommit from "./groupCommit.ts"
import { changedRows, columnTypes, failureText, Int64, retryLostConflicts } from "./sqlDialect.ts"
import { withoutStatementSpans } from "./statementSpans.ts"

// --- schema -----------------------------------------------------------------------

/** One row of `turns` as SQLite returns it: times are epoch ms, booleans 0/1, the error JSON. */
export const TurnRow = Schema.Struct({
  turn_id: Schema.String,
  agent_id: Schema.String,
  client_message_id: Schema.NullOr(Schema.String),
  text: Schema.String,
  state: TurnState,
  disposition: Schema.NullOr(Disposition),
  joined_turn_id: Schema.NullOr(Schema.String),
  resumed: Schema.Literals([0, 1]),
  reply: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.fromJsonString(TurnError)),
  accepted_at: Int64,
  dispatched_at: Schema.NullOr(Int64),
  ended_at: Schema.NullOr(Int64)
})

export const TurnRecordFromRow = TurnRow.pipe(Schema.decodeTo(
  TurnRecord,
  SchemaTransformation.transform({
    decode: (row) => ({
      turnId: row.turn_id,
      agentId: row.agent_id,
      clientMessageId: row.client_message_id,
      text: row.text,
      state: row.state,
      disposition: row.disposition,
      joinedTurnId: row.joined_turn_id,
      resumed: row.resumed === 1,
      reply: row.reply,
      error: row.error,
      acceptedAt: row.accepted_at,
      dispatchedAt: row.dispatched_at,
      endedAt: row.ended_at
    }),
    encode: (record) => ({
      turn_id: record.turnId,
      agent_id: record.agentId,
      client_message_id: record.clientMessageId,
      text: record.text,
      state: record.state,
      disposition: record.disposition,
      joined_turn_id: record.joinedTurnId,
      resumed: record.resumed ? 1 : 0,
      reply: record.reply,
      error: record.error,
      accepted_at: record.acceptedAt,
      dispatched_at: record.dispatchedAt,
      ended_at: record.endedAt
    })
  })
))

const decodeRow = Schema.decodeUnknownResult(TurnRecordFromRow)
const encodeRecord = Schema.encodeEffect(TurnRecordFromRow)

/** One row of `agent_finishes`: an agent's newest finish and its position. */
export const FinishRow = Schema.Struct({ position: Int64, kind: FinishKind, last_reply: Schema.NullOr(Schema.String) })
const decodeFinishRow = Schema.decodeUnknownEffect(FinishRow)
const decodeFinishPosition = Schema.decodeUnknownEffect(Int64)

// --- migrations -------------------------------------------------------------------

/** One statement per `sql` call: node:sqlite prepares only the first of a multi-statement string. */
export const migrations = {
  "1_create_turns": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { millis, serialKey } = columnTypes(sql)
    // `seq` is acceptance order: what a recovery dispatches first.
    yield* sql`CREATE TABLE turns (
      seq ${serialKey},
      turn_id TEXT NOT NULL UNIQUE,
      agent_id TEXT NOT NULL,
      client_message_id TEXT,
      text TEXT NOT NULL,
      state TEXT NOT NULL,
      disposition TEXT,
      joined_turn_id TEXT,
      resumed INTEGER NOT NULL,
      reply TEXT,
      error TEXT,
      accepted_at ${millis} NOT NULL,
      dispatched_at ${millis},
      ended_at ${millis}
    )`
    yield* sql`CREATE UNIQUE INDEX turns_client_message ON turns (agent_id, client_message_id)
      WHERE client_message_id IS NOT NULL`
    yield* sql`CREATE INDEX turns_unfinished ON turns (seq) WHERE state IN ('accepted', 'running')`
    yield* sql`CREATE INDEX turns_agent_seq ON turns (agent_id, seq)`
    yield* sql`CREATE TABLE turn_messages (
      recipient_id TEXT NOT NULL,
      message_id TEXT NOT NULL,
      turn_id TEXT NOT NULL REFERENCES turns (turn_id) ON DELETE CASCADE,
      PRIMARY KEY (recipient_id, message_id)
    )`
    yield* sql`CREATE INDEX turn_messages_turn ON turn_messages (turn_id)`
  }),
  // A runner that starts hosting an agent reads that agent's unfinished turns only.
  "2_index_unfinished_by_agent": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE INDEX turns_agent_unfinished ON turns (agent_id, seq) WHERE state IN ('accepted', 'running')`
  }),
  // Each agent's newest finish and how many it has had: a finish watch answers at once when the
  // target finished after the position it saw (its subscription's registration).
  "3_create_agent_finishes": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE agent_finishes (
      agent_id TEXT PRIMARY KEY NOT NULL,
      position INTEGER NOT NULL,
      kind TEXT NOT NULL,
      last_reply TEXT
    )`
  })
}

export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "turn_journal_migrations"
})

// --- journal ----------------------------------------------------------------------

const columns =
  "turn_id, agent_id, client_message_id, text, state, disposition, joined_turn_id, resumed, reply, error, accepted_at, dispatched_at, ended_at"

const failure = (operation: string, agentId: string | undefined) => (error: SqlError.SqlError | Schema.SchemaError) =>
  new AgentStoreError({
    operation: `journal.${operation}`,
    ...(agentId === undefined ? {} : { agentId }),
    message: `Turn journal ${operation}${agentId === undefined ? "" : ` for ${agentId}`} failed: ${failureText(error)}`
  })

/** An update or a claim of a turn the journal no longer has (pruned, or never there). */
const notInJournal = (operation: "update" | "claim", record: TurnRecord) =>
  new AgentStoreError({
    operation: `journal.${operation}`,
    agentId: record.agentId,
    message: `Turn ${record.turnId} is not in the journal (pruned?)`
  })

const decodeStored = (operation: string, row: unknown): Result.Result<TurnRecord, AgentStoreError> =>
  Result.mapError(decodeRow(row), (error) => {
    const turnId = Predicate.hasProperty(row, "turn_id") && typeof row.turn_id === "string" ? row.turn_id : "<unknown id>"
    return new AgentStoreError({
      operation: `journal.${operation}`,
      message: `Stored turn ${turnId} cannot be decoded: ${error.message}`
    })
  })

/** Every row decoded, or the first that does not decode. */
const decodeAll = (operation: string, rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<TurnRecord>, AgentStoreError> =>
  Effect.forEach(rows, (row) => Effect.fromResult(decodeStored(operation, row)))

const first = (operation: string, rows: ReadonlyArray<unknown>): Effect.Effect<Option.Option<TurnRecord>, AgentStoreError> => {
  const row = rows[0]
  if (row === undefined) return Effect.succeedNone
  const decoded = decodeStored(operation, row)
  return Result.isFailure(decoded) ? Effect.fail(decoded.failure) : Effect.succeed(Option.some(decoded.success))
}

/**
 * The journal's reads of one agent's turns (`get`, `recent`) over `sql`, without migrating: the
 * journal's own, and what a read-only look at a saved store (`savedStore.ts`) uses.
 */
export const reads = (sql: SqlClient.SqlClient): Pick<TurnJournal["Service"], "get" | "recent"> => {
  const get = (agentId: string, turnId: string) =>
    sql`SELECT ${sql.literal(columns)} FROM turns WHERE turn_id = ${turnId} AND agent_id = ${agentId}`.pipe(
      Effect.mapError(failure("get", agentId)),
      Effect.flatMap((rows) => first("get", rows))
    )

  // `seq` breaks ties of one millisecond: the later accepted comes first.
  const recent = (agentId: string, limit: number) =>
    sql`SELECT ${sql.literal(columns)} FROM turns WHERE agent_id = ${agentId}
        ORDER BY accepted_at DESC, seq DESC LIMIT ${Math.max(0, Math.trunc(limit))}`.pipe(
      Effect.mapError(failure("recent", agentId)),
      Effect.flatMap((rows) => decodeAll("recent", rows))
    )
  return { get, recent }
}

export const make: Effect.Effect<
  TurnJournal["Service"],
  SqlError.SqlError | Migrator.MigrationError,
  SqlClient.SqlClient | Scope.Scope
> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* migrate
  // Prompts accepted and turns recorded at about the same time share one commit.
  const group = yield* GroupCommit.make(
    (effect) => sql.withTransaction(effect),
    sql.onDialectOrElse({ pg: () => (write) => sql.withTransaction(write), orElse: () => (write) => write })
  )

  const byClientMessageId = (agentId: string, clientMessageId: string) =>
    sql`SELECT ${sql.literal(columns)} FROM turns WHERE agent_id = ${agentId} AND client_message_id = ${clientMessageId}`
      .pipe(Effect.mapError(failure("lookup", agentId)), Effect.flatMap((rows) => first("lookup", rows)))

  const accept = Effect.fn("SqlTurnJournal.accept")(function*({ messageIds = [], record }: AcceptTurn) {
    const row = yield* encodeRecord(record).pipe(Effect.mapError(failure("accept", record.agentId)))
    return yield* Effect.gen(function*() {
      if (record.clientMessageId !== null) {
        const existing = yield* byClientMessageId(record.agentId, record.clientMessageId)
        if (Option.isSome(existing)) return { _tag: "Existing", record: existing.value } satisfies Acceptance
      }
      // Another daemon (a cluster's runner) may accept the same id at the same moment: its row
      // wins, and the one that finds it taken answers with it.
      const inserted = yield* sql`INSERT INTO turns ${sql.insert(row)}
        ON CONFLICT (agent_id, client_message_id) WHERE client_message_id IS NOT NULL DO NOTHING`.raw
      if (changedRows(inserted) === 0) {
        const winner = record.clientMessageId === null
          ? Option.none()
          : yield* byClientMessageId(record.agentId, record.clientMessageId)
        if (Option.isSome(winner)) return { _tag: "Existing", record: winner.value } satisfies Acceptance
        return yield* new AgentStoreError({
          operation: "journal.accept",
          agentId: record.agentId,
          message: `Turn ${record.turnId} was not written, and no turn holds its client message id`
        })
      }
      // A message sent again (its earlier turn was cut by a stop) belongs to its newest turn.
      for (const messageId of messageIds) {
        yield* sql`INSERT INTO turn_messages ${
          sql.insert({ recipient_id: record.agentId, message_id: messageId, turn_id: record.turnId })
        } ON CONFLICT (recipient_id, message_id) DO UPDATE SET turn_id = excluded.turn_id`
      }
      return { _tag: "Accepted", record } satisfies Acceptance
    }).pipe(
      // Its own savepoint: a failed insert undoes the whole acceptance, and nothing else.
      sql.withTransaction,
      group.submit,
      Effect.mapError((error) => error._tag === "AgentStoreError" ? error : failure("accept", record.agentId)(error))
    )
  }, withoutStatementSpans)

  const update = Effect.fn("SqlTurnJournal.update")(function*(record: TurnRecord) {
    const row = yield* encodeRecord(record).pipe(Effect.mapError(failure("update", record.agentId)))
    yield* sql`UPDATE turns SET
        state = ${row.state},
        disposition = ${row.disposition},
        joined_turn_id = ${row.joined_turn_id},
        resumed = ${row.resumed},
        reply = ${row.reply},
        error = ${row.error},
        dispatched_at = ${row.dispatched_at},
        ended_at = ${row.ended_at}
      WHERE turn_id = ${row.turn_id}`.raw.pipe(
      Effect.flatMap((result) =>
        changedRows(result) === 1
          ? Effect.void
          : Effect.fail(notInJournal("update", record))
      ),
      group.submit,
      Effect.mapError((error) => error._tag === "AgentStoreError" ? error : failure("update", record.agentId)(error))
    )
  }, withoutStatementSpans)

  const claim = Effect.fn("SqlTurnJournal.claim")(function*(record: TurnRecord) {
    const row = yield* encodeRecord(record).pipe(Effect.mapError(failure("claim", record.agentId)))
    return yield* sql`UPDATE turns SET
        state = ${row.state},
        disposition = ${row.disposition},
        joined_turn_id = ${row.joined_turn_id},
        resumed = ${row.resumed},
        dispatched_at = ${row.dispatched_at}
      WHERE turn_id = ${row.turn_id} AND state = 'accepted'`.raw.pipe(
      Effect.flatMap((result) =>
        changedRows(result) === 1
          ? Effect.succeed(true)
          : Effect.flatMap(sql`SELECT 1 FROM turns WHERE turn_id = ${row.turn_id}`, (rows) =>
            rows.length === 1
              ? Effect.succeed(false)
              : Effect.fail(notInJournal("claim", record)))
      ),
      group.submit,
      Effect.mapError((error) => error._tag === "AgentStoreError" ? error : failure("claim", record.agentId)(error))
    )
  }, withoutStatementSpans)

  const byMessageId = (recipientId: string, messageId: string) =>
    sql`SELECT ${sql.literal(columns.split(", ").map((column) => `turns.${column}`).join(", "))}
      FROM turn_messages JOIN turns ON turns.turn_id = turn_messages.turn_id
      WHERE turn_messages.recipient_id = ${recipientId} AND turn_messages.message_id = ${messageId}`.pipe(
      Effect.mapError(failure("lookup", recipientId)),
      Effect.flatMap((rows) => first("lookup", rows))
    )

  const unfinished = sql`SELECT ${sql.literal(columns)} FROM turns
      WHERE state IN ('accepted', 'running') ORDER BY seq`.pipe(
    Effect.mapError(failure("recover", undefined)),
    Effect.flatMap((rows) => decodeAll("recover", rows))
  )

  const unfinishedOf = (agentId: string) =>
    sql`SELECT ${sql.literal(columns)} FROM turns
      WHERE agent_id = ${agentId} AND state IN ('accepted', 'running') ORDER BY seq`.pipe(
      Effect.mapError(failure("recover", agentId)),
      Effect.flatMap((rows) => decodeAll("recover", rows))
    )

  const prune = Effect.fn("SqlTurnJournal.prune")(function*(endedBefore: number, keepPerAgent: number) {
    return yield* group.submit(pruneNow(endedBefore, keepPerAgent))
  }, withoutStatementSpans, Effect.mapError(failure("prune", undefined)))

  const pruneNow = Effect.fnUntraced(function*(endedBefore: number, keepPerAgent: number) {
    const byAge = yield* sql`DELETE FROM turns WHERE ended_at IS NOT NULL AND ended_at < ${endedBefore}`.raw
    // The newest `keepPerAgent` final turns of each agent stay; older final ones go.
    const byCount = yield* sql`DELETE FROM turns WHERE seq IN (
        SELECT seq FROM (
          SELECT seq, ROW_NUMBER() OVER (PARTITION BY agent_id ORDER BY seq DESC) AS rank
          FROM turns WHERE ended_at IS NOT NULL
        ) AS ranked WHERE rank > ${keepPerAgent}
      )`.raw
    return changedRows(byAge) + changedRows(byCount)
  })

  const removeAgent = Effect.fn("SqlTurnJournal.removeAgent")(function*(agentId: string) {
    return yield* group.submit(Effect.map(sql`DELETE FROM turns WHERE agent_id = ${agentId}`.raw, changedRows)).pipe(
      Effect.mapError(failure("removeAgent", agentId))
    )
  }, withoutStatementSpans)

  // One statement: two runners recording a finish of one agent at once get two positions.
  const recordFinish = Effect.fn("SqlTurnJournal.recordFinish")(function*(agentId: string, outcome: FinishOutcome) {
    const rows = yield* sql`INSERT INTO agent_finishes (agent_id, position, kind, last_reply)
      VALUES (${agentId}, 1, ${outcome.kind}, ${outcome.lastReply})
      ON CONFLICT (agent_id) DO UPDATE SET
        position = agent_finishes.position + 1, kind = excluded.kind, last_reply = excluded.last_reply
      RETURNING position`.pipe(retryLostConflicts)
    const row = rows[0]
    if (row === undefined) {
      return yield* new AgentStoreError({ operation: "journal.recordFinish", agentId, message: `No finish position came back for ${agentId}` })
    }
    return yield* decodeFinishPosition(row.position)
  }, withoutStatementSpans, (effect, agentId) => Effect.mapError(effect, (error) => error._tag === "AgentStoreError" ? error : failure("recordFinish", agentId)(error)))

  const lastFinish = (agentId: string) =>
    sql`SELECT position, kind, last_reply FROM agent_finishes WHERE agent_id = ${agentId}`.pipe(
      Effect.flatMap((rows) => rows[0] === undefined ? Effect.succeedNone : Effect.asSome(decodeFinishRow(rows[0]))),
      Effect.map(Option.map((row): JournaledFinish => ({
        position: row.position,
        outcome: { kind: row.kind, lastReply: row.last_reply }
      }))),
      Effect.mapError(failure("lastFinish", agentId))
    )

  return TurnJournal.of({
    accept,
    update,
    claim,
    ...reads(sql),
    byClientMessageId,
    byMessageId,
    unfinished,
    unfinishedOf,
    recordFinish,
    lastFinish,
    prune,
    removeAgent
  })
})

/** The journal on the database of the provided `SqlClient`, migrated when the layer is built. */
export const layerFromClient: Layer.Layer<TurnJournal, AgentStoreError, SqlClient.SqlClient> = Layer.effect(
  TurnJournal,
  make.pipe(Effect.catchTags({
    SqlError: (error) =>
      Effect.fail(new AgentStoreError({ operation: "open", message: `Cannot open the turn journal: ${failureText(error)}` })),
    MigrationError: (error) =>
      Effect.fail(new AgentStoreError({ operation: "open", message: `Cannot migrate the turn journal: ${failureText(error)}` }))
  }))
)
