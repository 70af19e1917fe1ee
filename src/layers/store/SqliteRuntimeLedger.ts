/**
 * The durable `RuntimeLedger`: one `runtime_processes` table, normally in the same SQLite file
 * as the agent records (see `SqliteDatabase.layerStores`), reached through the project's
 * `effect/sql` driver over `node:sqlite` (see `SqliteClient.ts`).
 *
 * Rows are encoded and decoded through {@link RuntimeProcessFromRow}; a row that no longer
 * decodes fails `list` with an `AgentStoreError` naming its agent and pid, so a damaged entry
 * (whose processes would then never be ended) is never silently dropped.
 */
import { Effect, Layer, Predicate, Schema, SchemaTransformation } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql"
import { AgentStoreError } from "../../domain/errors.ts"
import { RuntimeProcess } from "../../domain/runtimeProcess.ts"
import { RuntimeLedger } from "../../services/RuntimeLedger.ts"
import { withoutStatementSpans } from "./statementSpans.ts"

// --- schema -----------------------------------------------------------------------

/** One row of `runtime_processes` as SQLite returns it: times are epoch ms, start times clock ticks. */
export const RuntimeProcessRow = Schema.Struct({
  agent_id: Schema.String,
  pid: Schema.Number,
  start_time: Schema.Number,
  marker: Schema.String,
  recorded_at: Schema.Number
})

/** Decodes a raw `runtime_processes` row to a `RuntimeProcess`; encodes an entry to the row to write. */
export const RuntimeProcessFromRow = RuntimeProcessRow.pipe(Schema.decodeTo(
  RuntimeProcess,
  SchemaTransformation.transform({
    decode: (row) => ({
      agentId: row.agent_id,
      pid: row.pid,
      startTime: row.start_time,
      marker: row.marker,
      recordedAt: row.recorded_at
    }),
    encode: (entry) => ({
      agent_id: entry.agentId,
      pid: entry.pid,
      start_time: entry.startTime,
      marker: entry.marker,
      recorded_at: entry.recordedAt
    })
  })
))

const decodeRow = Schema.decodeUnknownEffect(RuntimeProcessFromRow)
const encodeEntry = Schema.encodeEffect(RuntimeProcessFromRow)

// --- migrations -------------------------------------------------------------------

/** One statement per `sql` call: node:sqlite prepares only the first of a multi-statement string. */
export const migrations = {
  "1_create_runtime_processes": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE runtime_processes (
      agent_id TEXT NOT NULL,
      pid INTEGER NOT NULL,
      start_time INTEGER NOT NULL,
      marker TEXT NOT NULL,
      recorded_at INTEGER NOT NULL,
      PRIMARY KEY (agent_id, pid)
    )`
  })
}

/**
 * Runs the pending migrations. The ledger keeps its own migrations table so it shares the
 * database file with the other stores, each numbering its migrations independently.
 */
export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "runtime_ledger_migrations"
})

// --- ledger -----------------------------------------------------------------------

const columns = "agent_id, pid, start_time, marker, recorded_at"

/** "agent a1 pid 42", or whatever of it a damaged row still shows. */
const nameOfRow = (row: unknown): string => {
  const agentId = Predicate.hasProperty(row, "agent_id") && typeof row.agent_id === "string"
    ? row.agent_id
    : "<unknown agent>"
  const pid = Predicate.hasProperty(row, "pid") && typeof row.pid === "number" ? String(row.pid) : "<unknown pid>"
  return `agent ${agentId} pid ${pid}`
}

const sqlFailure = (operation: string, agentId: string | undefined, pid?: number) => (error: SqlError.SqlError) =>
  new AgentStoreError({
    operation,
    ...(agentId === undefined ? {} : { agentId }),
    message: `Runtime ledger ${operation}${agentId === undefined ? "" : ` of agent ${agentId} pid ${pid}`} failed: ${error.message}`
  })

/** Decodes one row; a row that does not decode becomes an error naming its agent and pid. */
const decodeStoredRow = (row: unknown) =>
  decodeRow(row).pipe(Effect.mapError((error) => {
    const agentId = Predicate.hasProperty(row, "agent_id") && typeof row.agent_id === "string"
      ? row.agent_id
      : undefined
    return new AgentStoreError({
      operation: "ledger.list",
      ...(agentId === undefined ? {} : { agentId }),
      message: `Runtime ledger entry of ${nameOfRow(row)} cannot be decoded: ${error.message}`
    })
  }))

/** Migrates the database, then returns a `RuntimeLedger` over it. */
export const make: Effect.Effect<
  RuntimeLedger["Service"],
  SqlError.SqlError | Migrator.MigrationError,
  SqlClient.SqlClient
> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* migrate

  const record = Effect.fn("SqliteRuntimeLedger.record")(function*(entry: RuntimeProcess) {
    const row = yield* encodeEntry(entry).pipe(Effect.mapError((error) =>
      new AgentStoreError({
        operation: "ledger.record",
        agentId: entry.agentId,
        message: `Runtime ledger entry of agent ${entry.agentId} pid ${entry.pid} cannot be encoded: ${error.message}`
      })
    ))
    yield* sql`INSERT INTO runtime_processes ${sql.insert(row)}
      ON CONFLICT (agent_id, pid) DO UPDATE SET
        start_time = excluded.start_time,
        marker = excluded.marker,
        recorded_at = excluded.recorded_at`.pipe(
        Effect.mapError(sqlFailure("ledger.record", entry.agentId, entry.pid))
      )
  }, withoutStatementSpans)

  const remove = Effect.fn("SqliteRuntimeLedger.remove")(function*(agentId: string, pid: number) {
    // Deleting a missing entry deletes nothing, which is not an error.
    yield* sql`DELETE FROM runtime_processes WHERE agent_id = ${agentId} AND pid = ${pid}`.pipe(
      Effect.mapError(sqlFailure("ledger.remove", agentId, pid))
    )
  }, withoutStatementSpans)

  const list = Effect.gen(function*() {
    const rows = yield* sql`SELECT ${sql.literal(columns)} FROM runtime_processes
      ORDER BY recorded_at, agent_id, pid`.pipe(Effect.mapError(sqlFailure("ledger.list", undefined)))
    return yield* Effect.forEach(rows, decodeStoredRow)
  }).pipe(withoutStatementSpans, Effect.withSpan("SqliteRuntimeLedger.list"))

  return RuntimeLedger.of({ record, remove, list })
})

/**
 * The durable `RuntimeLedger` on the database of the provided `SqlClient`, migrated when the
 * layer is built. Open and migration failures fail the layer with operation `"ledger.open"`.
 */
export const layerFromClient: Layer.Layer<RuntimeLedger, AgentStoreError, SqlClient.SqlClient> = Layer.effect(
  RuntimeLedger,
  make.pipe(Effect.catchTags({
    SqlError: (error) =>
      Effect.fail(
        new AgentStoreError({ operation: "ledger.open", message: `Cannot open the runtime ledger: ${error.message}` })
      ),
    MigrationError: (error) =>
      Effect.fail(
        new AgentStoreError({ operation: "ledger.open", message: `Cannot migrate the runtime ledger: ${error.message}` })
      )
  }))
)
