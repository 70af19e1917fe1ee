/**
 * The durable `FinishStore`: one `finish_subscriptions` table, normally in the same SQLite
 * file as the agent records (see `SqliteDatabase.layerStores`), reached through the
 * project's `effect/sql` driver over `node:sqlite` (see `SqliteClient.ts`).
 *
 * Rows are encoded and decoded through {@link FinishSubscriptionFromRow}; a row that no
 * longer decodes fails the read with a `FinishStoreError` naming the subscription, so a
 * damaged subscription is never silently dropped from `list`.
 */
import { Effect, Layer, Predicate, Result, Schema, SchemaTransformation } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql"
import { FinishStoreError } from "../../domain/errors.ts"
import { FinishSubscription } from "../../domain/finish.ts"
import { FinishStore } from "../../services/FinishStore.ts"
import { changedRows, columnTypes, failureText, Int64, retryLostConflicts } from "./sqlDialect.ts"
import { withoutStatementSpans } from "./statementSpans.ts"

// --- schema -----------------------------------------------------------------------

/** One row of `finish_subscriptions` as SQLite returns it: times are epoch ms. */
export const FinishSubscriptionRow = Schema.Struct({
  id: Schema.String,
  caller_agent_id: Schema.String,
  target_agent_id: Schema.String,
  server_id: Schema.NullOr(Schema.String),
  state: FinishSubscription.fields.state,
  created_at: Int64,
  after_finish: Schema.NullOr(Int64),
  notification: Schema.NullOr(Schema.String)
})

/** Decodes a raw `finish_subscriptions` row; encodes a subscription to the row to write. */
export const FinishSubscriptionFromRow = FinishSubscriptionRow.pipe(Schema.decodeTo(
  FinishSubscription,
  SchemaTransformation.transform({
    decode: (row) => ({
      id: row.id,
      callerAgentId: row.caller_agent_id,
      targetAgentId: row.target_agent_id,
      serverId: row.server_id,
      state: row.state,
      createdAt: row.created_at,
      afterFinish: row.after_finish,
      notification: row.notification
    }),
    encode: (subscription) => ({
      id: subscription.id,
      caller_agent_id: subscription.callerAgentId,
      target_agent_id: subscription.targetAgentId,
      server_id: subscription.serverId,
      state: subscription.state,
      created_at: subscription.createdAt,
      after_finish: subscription.afterFinish,
      notification: subscription.notification
    })
  })
))

// Synchronous decoding: `list` decodes every row in one plain loop, which stays cheap for
// very large tables (no effect per row).
const decodeRow = Schema.decodeUnknownResult(FinishSubscriptionFromRow)
const encodeSubscription = Schema.encodeEffect(FinishSubscriptionFromRow)

// --- migrations -------------------------------------------------------------------

/** One statement per `sql` call: node:sqlite prepares only the first of a multi-statement string. */
export const migrations = {
  "1_create_finish_subscriptions": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { millis } = columnTypes(sql)
    yield* sql`CREATE TABLE finish_subscriptions (
      id TEXT PRIMARY KEY NOT NULL,
      caller_agent_id TEXT NOT NULL,
      target_agent_id TEXT NOT NULL,
      server_id TEXT,
      state TEXT NOT NULL,
      created_at ${millis} NOT NULL,
      notification TEXT
    )`
    // Serves `list`'s ORDER BY without a sort.
    yield* sql`CREATE INDEX finish_subscriptions_created_at_id ON finish_subscriptions (created_at, id)`
  }),
  // The target's finish position at registration: the first finish past it is owed.
  "2_add_after_finish": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE finish_subscriptions ADD COLUMN after_finish INTEGER`
  })
}

/**
 * Runs the pending migrations. The store keeps its own migrations table so it can share a
 * database file with the agent store, each numbering its migrations independently.
 */
export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "finish_store_migrations"
})

// --- store ------------------------------------------------------------------------

const columns = "id, caller_agent_id, target_agent_id, server_id, state, created_at, after_finish, notification"

const idOfRow = (row: unknown): string | undefined =>
  Predicate.hasProperty(row, "id") && typeof row.id === "string" ? row.id : undefined

const sqlFailure = (operation: string, id: string | undefined) => (error: SqlError.SqlError) =>
  new FinishStoreError({
    operation,
    message: `Finish store ${operation}${id === undefined ? "" : ` of subscription ${id}`} failed: ${failureText(error)}`
  })

/** Decodes one row; a row that does not decode becomes an error naming its subscription. */
const decodeStoredRow = (
  operation: string,
  row: unknown
): Result.Result<FinishSubscription, FinishStoreError> =>
  Result.mapError(decodeRow(row), (error) =>
    new FinishStoreError({
      operation,
      message: `Stored finish subscription ${idOfRow(row) ?? "<unknown id>"} cannot be decoded: ${error.message}`
    }))

/** Migrates the database, then returns a `FinishStore` over it. */
export const make: Effect.Effect<
  FinishStore["Service"],
  SqlError.SqlError | Migrator.MigrationError,
  SqlClient.SqlClient
> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* migrate

  const put = Effect.fn("SqlFinishStore.put")(function*(subscription: FinishSubscription) {
    const row = yield* encodeSubscription(subscription).pipe(Effect.mapError((error) =>
      new FinishStoreError({
        operation: "put",
        message: `Finish subscription ${subscription.id} cannot be encoded: ${error.message}`
      })
    ))
    yield* sql`INSERT INTO finish_subscriptions ${sql.insert(row)}
      ON CONFLICT (id) DO UPDATE SET
        caller_agent_id = excluded.caller_agent_id,
        target_agent_id = excluded.target_agent_id,
        server_id = excluded.server_id,
        state = excluded.state,
        created_at = excluded.created_at,
        after_finish = excluded.after_finish,
        notification = excluded.notification`.pipe(retryLostConflicts, Effect.mapError(sqlFailure("put", subscription.id)))
  }, withoutStatementSpans)

  const remove = Effect.fn("SqlFinishStore.remove")(function*(id: string) {
    // Deleting a missing id deletes nothing, which is not an error.
    yield* sql`DELETE FROM finish_subscriptions WHERE id = ${id}`.pipe(retryLostConflicts, Effect.mapError(sqlFailure("remove", id)))
  }, withoutStatementSpans)

  // One statement: of two runners watching one subscription, one saves its notification.
  const claimNotification = Effect.fn("SqlFinishStore.claimNotification")(function*(id: string, notification: string) {
    const result = yield* sql`UPDATE finish_subscriptions SET notification = ${notification}
      WHERE id = ${id} AND notification IS NULL`.raw.pipe(retryLostConflicts, Effect.mapError(sqlFailure("claimNotification", id)))
    return changedRows(result) === 1
  }, withoutStatementSpans)

  const list = Effect.gen(function*() {
    const rows = yield* sql`SELECT ${sql.literal(columns)} FROM finish_subscriptions ORDER BY created_at, id`.pipe(
      Effect.mapError(sqlFailure("list", undefined))
    )
    const subscriptions: Array<FinishSubscription> = []
    for (const row of rows) {
      const decoded = decodeStoredRow("list", row)
      if (Result.isFailure(decoded)) return yield* decoded.failure
      subscriptions.push(decoded.success)
    }
    return subscriptions
  }).pipe(withoutStatementSpans, Effect.withSpan("SqlFinishStore.list"))

  return FinishStore.of({ put, remove, claimNotification, list })
})

/**
 * The durable `FinishStore` on the database of the provided `SqlClient`, migrated when the
 * layer is built. Open and migration failures fail the layer with operation `"open"`.
 */
export const layerFromClient: Layer.Layer<FinishStore, FinishStoreError, SqlClient.SqlClient> = Layer.effect(
  FinishStore,
  make.pipe(Effect.catchTags({
    SqlError: (error) =>
      Effect.fail(new FinishStoreError({ operation: "open", message: `Cannot open finish store: ${failureText(error)}` })),
    MigrationError: (error) =>
      Effect.fail(new FinishStoreError({ operation: "open", message: `Cannot migrate finish store: ${failureText(error)}` }))
  }))
)
