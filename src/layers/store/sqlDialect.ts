/**
 * What the SQL stores write differently on SQLite (the embedded default) and PostgreSQL (a
 * cluster's shared store): a few column types in the migrations, how a time comes back, and how
 * a statement reports the rows it changed. Everything else the stores say is the same SQL on both.
 */
import { Effect, Predicate, Schedule, Schema, SchemaTransformation } from "effect"
import { type SqlClient, SqlError } from "effect/sql"

/** The column types that differ, as fragments for a migration's `CREATE TABLE`. */
export const columnTypes = (sql: SqlClient.SqlClient) =>
  sql.onDialectOrElse({
    pg: () => ({
      /** Epoch milliseconds: past 2^31, so PostgreSQL needs 64 bits. */
      millis: sql.literal("BIGINT"),
      /** An increasing row number, assigned on insert. */
      serialKey: sql.literal("BIGSERIAL PRIMARY KEY")
    }),
    orElse: () => ({
      millis: sql.literal("INTEGER"),
      serialKey: sql.literal("INTEGER PRIMARY KEY AUTOINCREMENT")
    })
  })

/**
 * A `BIGINT` column as a number: SQLite returns a number, PostgreSQL a bigint. Times and row
 * numbers stay far below 2^53, so nothing is lost.
 */
export const Int64 = Schema.Union([
  Schema.Number,
  Schema.BigInt.pipe(Schema.decodeTo(
    Schema.Number,
    SchemaTransformation.transform({ decode: (value) => Number(value), encode: (value) => BigInt(value) })
  ))
])

/** How many rows a raw statement changed: node:sqlite says `changes`, PostgreSQL `rowCount`. */
export const changedRows = (result: unknown): number => {
  if (Predicate.hasProperty(result, "changes") && typeof result.changes === "number") return result.changes
  if (Predicate.hasProperty(result, "rowCount") && typeof result.rowCount === "number") return result.rowCount
  return 0
}

/**
 * A failure's message with those of its causes that say more: a PostgreSQL failure's message is
 * only "Query failed", and the server's own words (a violated constraint, a refused connection)
 * are a cause or two below it.
 */
export const failureText = (error: { readonly message: string; readonly cause?: unknown }): string => {
  let text = error.message
  let cause = error.cause
  for (let depth = 0; depth < 4 && cause !== undefined; depth++) {
    const detail = Predicate.hasProperty(cause, "message") && typeof cause.message === "string" ? cause.message : ""
    if (detail !== "" && !text.includes(detail)) text = `${text}: ${detail}`
    cause = Predicate.hasProperty(cause, "cause") ? cause.cause : undefined
  }
  return text
}

/**
 * Whether `error` says that the transaction lost a conflict with another one, and would succeed
 * if run again as it is: a deadlock (PostgreSQL's SQLSTATE 40P01), which PostgreSQL breaks by
 * failing one of the transactions, or a serialization failure (40001). Runners sharing one
 * database can lock the same rows in different orders.
 */
export const lostConflict = (error: unknown): boolean =>
  SqlError.isSqlError(error) && (error.reason._tag === "DeadlockError" || error.reason._tag === "SerializationError")

/** At most 5 runs again, after about 10, 20, 40, 80, 160 ms, each jittered (so two losers do not collide again in step). */
const conflictBackoff = Schedule.exponential("10 millis").pipe(Schedule.jittered)

/**
 * Runs `transaction` again while it fails because it lost a conflict (`lostConflict`), a bounded
 * number of times with jittered backoff; any other failure, or the last one, is its own.
 * `transaction` must be a whole transaction, a savepoint or one statement: what the losing run
 * did has been undone.
 */
export const retryLostConflicts = <A, E, R>(transaction: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.retry(transaction, { while: (error: E) => lostConflict(error), times: 5, schedule: conflictBackoff })
