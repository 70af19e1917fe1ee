/**
 * What the SQL stores write differently on SQLite (the embedded default) and PostgreSQL (a
 * cluster's shared store): a few column types in the migrations, how a time comes back, and how
 * a statement reports the rows it changed. Everything else the stores say is the same SQL on both.
 */
import { Predicate, Schema, SchemaTransformation } from "effect"
import type { SqlClient } from "effect/sql"

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
