/**
 * The durable `AgentStore`: one `agents` table in a SQLite file, reached through the
 * project's `effect/sql` driver over `node:sqlite` (see `SqliteClient.ts`).
 *
 * Rows are encoded and decoded through {@link AgentRecordFromRow}; a row that no longer
 * decodes fails the read with an `AgentStoreError` naming the agent, so a damaged record is
 * never silently dropped from `list`.
 */
import { Effect, Layer, Option, Predicate, Schema, SchemaTransformation } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql"
import * as fs from "node:fs"
import * as path from "node:path"
import { AgentLifecycle, AgentRecord, Labels, PersistenceHandle, ReleaseNote } from "../../domain/agent.ts"
import { AgentStoreError } from "../../domain/errors.ts"
import { AgentStore } from "../../services/AgentStore.ts"
import * as SqliteClient from "./SqliteClient.ts"
import { columnTypes, failureText, Int64, retryLostConflicts } from "./sqlDialect.ts"
import { withoutStatementSpans } from "./statementSpans.ts"

// --- schema -----------------------------------------------------------------------

/** One row of `agents` as SQLite returns it: JSON columns are text, times are epoch ms. */
export const AgentRow = Schema.Struct({
  agent_id: Schema.String,
  provider: Schema.String,
  cwd: Schema.String,
  labels: Schema.fromJsonString(Labels),
  persistence: Schema.NullOr(Schema.fromJsonString(PersistenceHandle)),
  lifecycle: AgentLifecycle,
  created_at: Int64,
  last_activity_at: Int64,
  closed_at: Schema.NullOr(Int64),
  /** How its last runtime was released, as JSON (migration 2). */
  release_note: Schema.NullOr(Schema.fromJsonString(ReleaseNote))
})

/** Decodes a raw `agents` row to an `AgentRecord`; encodes a record to the row to write. */
export const AgentRecordFromRow = AgentRow.pipe(Schema.decodeTo(
  AgentRecord,
  SchemaTransformation.transform({
    decode: (row) => ({
      agentId: row.agent_id,
      provider: row.provider,
      cwd: row.cwd,
      labels: row.labels,
      persistence: row.persistence,
      lifecycle: row.lifecycle,
      createdAt: row.created_at,
      lastActivityAt: row.last_activity_at,
      closedAt: row.closed_at,
      ...(row.release_note === null ? {} : { release: row.release_note })
    }),
    encode: (record) => ({
      agent_id: record.agentId,
      provider: record.provider,
      cwd: record.cwd,
      labels: record.labels,
      persistence: record.persistence,
      lifecycle: record.lifecycle,
      created_at: record.createdAt,
      last_activity_at: record.lastActivityAt,
      closed_at: record.closedAt,
      release_note: record.release ?? null
    })
  })
))

const decodeRow = Schema.decodeUnknownEffect(AgentRecordFromRow)
const encodeRecord = Schema.encodeEffect(AgentRecordFromRow)

// --- migrations -------------------------------------------------------------------

/** One statement per `sql` call: node:sqlite prepares only the first of a multi-statement string. */
export const migrations = {
  "1_create_agents": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { millis } = columnTypes(sql)
    yield* sql`CREATE TABLE agents (
      agent_id TEXT PRIMARY KEY NOT NULL,
      provider TEXT NOT NULL,
      cwd TEXT NOT NULL,
      labels TEXT NOT NULL,
      persistence TEXT,
      lifecycle TEXT NOT NULL,
      created_at ${millis} NOT NULL,
      last_activity_at ${millis} NOT NULL,
      closed_at ${millis}
    )`
    // Serves `list`'s ORDER BY without a sort.
    yield* sql`CREATE INDEX agents_created_at_agent_id ON agents (created_at, agent_id)`
  }),
  /** Why each agent's last runtime was released and the memory it gave back (docs/collector.md). */
  "2_agent_release": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE agents ADD COLUMN release_note TEXT`
  })
}

/**
 * Runs the pending migrations. The store keeps its own migrations table so other stores can
 * share the same database file with independently numbered migrations.
 */
export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "agent_store_migrations"
})

// --- store ------------------------------------------------------------------------

const baseColumns = "agent_id, provider, cwd, labels, persistence, lifecycle, created_at, last_activity_at, closed_at"
const columns = `${baseColumns}, release_note`
/** A store saved before migration 2 has no `release_note`: read as null (released by an older version). */
const columnsBeforeReleaseNote = `${baseColumns}, NULL AS release_note`

const agentIdOfRow = (row: unknown): string | undefined =>
  Predicate.hasProperty(row, "agent_id") && typeof row.agent_id === "string" ? row.agent_id : undefined

const sqlFailure = (operation: string, agentId: string | undefined) => (error: SqlError.SqlError) =>
  new AgentStoreError({
    operation,
    ...(agentId === undefined ? {} : { agentId }),
    message: `Agent store ${operation}${agentId === undefined ? "" : ` of ${agentId}`} failed: ${failureText(error)}`
  })

/** Decodes one row; a row that does not decode becomes an error naming its agent. */
const decodeStoredRow = (operation: string) => (row: unknown) =>
  decodeRow(row).pipe(Effect.mapError((error) => {
    const agentId = agentIdOfRow(row)
    return new AgentStoreError({
      operation,
      ...(agentId === undefined ? {} : { agentId }),
      message: `Stored record of agent ${agentId ?? "<unknown id>"} cannot be decoded: ${error.message}`
    })
  }))

/**
 * The store's reads (`get`, `list`) over `sql`, without migrating: the store's own, and what a
 * read-only look at a saved store (`savedStore.ts`) uses; `hasReleaseNote: false` reads a store an
 * older daemon saved, before its `release_note` column (each agent then has no `release`).
 */
export const reads = (
  sql: SqlClient.SqlClient,
  options: { readonly hasReleaseNote: boolean } = { hasReleaseNote: true }
): Pick<AgentStore["Service"], "get" | "list"> => {
  const selected = options.hasReleaseNote ? columns : columnsBeforeReleaseNote
  const get = Effect.fn("SqlAgentStore.get")(function*(agentId: string) {
    const rows = yield* sql`SELECT ${sql.literal(selected)} FROM agents WHERE agent_id = ${agentId}`.pipe(
      Effect.mapError(sqlFailure("get", agentId))
    )
    const row = rows[0]
    if (row === undefined) return Option.none<AgentRecord>()
    return Option.some(yield* decodeStoredRow("get")(row))
  }, withoutStatementSpans)

  const list = Effect.gen(function*() {
    const rows = yield* sql`SELECT ${sql.literal(selected)} FROM agents ORDER BY created_at, agent_id`.pipe(
      Effect.mapError(sqlFailure("list", undefined))
    )
    return yield* Effect.forEach(rows, decodeStoredRow("list"))
  }).pipe(withoutStatementSpans, Effect.withSpan("SqlAgentStore.list"))
  return { get, list }
}

/** Migrates the database, then returns an `AgentStore` over it. */
export const make: Effect.Effect<
  AgentStore["Service"],
  SqlError.SqlError | Migrator.MigrationError,
  SqlClient.SqlClient
> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* migrate

  const put = Effect.fn("SqlAgentStore.put")(function*(record: AgentRecord) {
    const row = yield* encodeRecord(record).pipe(Effect.mapError((error) =>
      new AgentStoreError({
        operation: "put",
        agentId: record.agentId,
        message: `Record of agent ${record.agentId} cannot be encoded: ${error.message}`
      })
    ))
    yield* sql`INSERT INTO agents ${sql.insert(row)}
      ON CONFLICT (agent_id) DO UPDATE SET
        provider = excluded.provider,
        cwd = excluded.cwd,
        labels = excluded.labels,
        persistence = excluded.persistence,
        lifecycle = excluded.lifecycle,
        created_at = excluded.created_at,
        last_activity_at = excluded.last_activity_at,
        closed_at = excluded.closed_at,
        release_note = excluded.release_note`.pipe(retryLostConflicts, Effect.mapError(sqlFailure("put", record.agentId)))
  }, withoutStatementSpans)

  const remove = Effect.fn("SqlAgentStore.remove")(function*(agentId: string) {
    yield* sql`DELETE FROM agents WHERE agent_id = ${agentId}`.pipe(retryLostConflicts, Effect.mapError(sqlFailure("remove", agentId)))
  }, withoutStatementSpans)

  return AgentStore.of({ put, ...reads(sql), remove })
})

/**
 * Creates the parent directory of the database file `filename` if missing (owner-only, 0700);
 * shared with `SqliteDatabase.layer`.
 */
export const ensureParentDirectory = (filename: string): Effect.Effect<void, AgentStoreError> =>
  Effect.try({
    try: () => {
      fs.mkdirSync(path.dirname(filename), { recursive: true, mode: 0o700 })
    },
    catch: (cause) =>
      new AgentStoreError({
        operation: "open",
        message: `Cannot create the directory of agent store ${filename}: ${
          cause instanceof Error ? cause.message : String(cause)
        }`
      })
  })

/** Open and migration failures of `subject` (e.g. "agent store /x.db") as `AgentStoreError`s. */
const openFailures = (subject: string) =>
<A, R>(
  effect: Effect.Effect<A, SqlError.SqlError | Migrator.MigrationError | AgentStoreError, R>
): Effect.Effect<A, AgentStoreError, R> =>
  effect.pipe(Effect.catchTags({
    SqlError: (error) =>
      Effect.fail(new AgentStoreError({ operation: "open", message: `Cannot open ${subject}: ${failureText(error)}` })),
    MigrationError: (error) =>
      Effect.fail(new AgentStoreError({ operation: "open", message: `Cannot migrate ${subject}: ${failureText(error)}` }))
  }))

/**
 * The durable `AgentStore` on the database of the provided `SqlClient`, migrated when the
 * layer is built. Open and migration failures fail the layer with operation `"open"`.
 */
export const layerFromClient: Layer.Layer<AgentStore, AgentStoreError, SqlClient.SqlClient> = Layer.effect(
  AgentStore,
  make.pipe(openFailures("agent store"))
)

/**
 * The durable `AgentStore` on the SQLite file `filename`, created (with its parent
 * directory) if missing and migrated. The database closes with the layer.
 */
export const layer = (filename: string): Layer.Layer<AgentStore, AgentStoreError> =>
  Layer.effect(
    AgentStore,
    Effect.gen(function*() {
      yield* ensureParentDirectory(filename)
      // Built in the layer's scope, so the connection lives exactly as long as the store.
      const client = yield* Layer.build(SqliteClient.layer({ filename }))
      return yield* make.pipe(Effect.provideContext(client))
    }).pipe(openFailures(`agent store ${filename}`))
  )
