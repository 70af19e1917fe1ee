/**
 * A small `effect/sql` driver over Node's built-in `node:sqlite` (`DatabaseSync`).
 *
 * Why it exists: no published SQLite driver loads with effect 4.1 (the v4 betas of
 * `@effect/sql-sqlite-node` import `effect/unstable/...`, which 4.1 removed). Replace it
 * with the published driver once a 4.1-compatible release exists.
 *
 * Model: one connection per client. `node:sqlite` is synchronous, so a statement never
 * interleaves with another; the semaphore from `SqlClient.makeSqliteAcquirers` makes
 * transactions exclusive too (a fiber outside a transaction waits until it ends, so its
 * statements can never land inside someone else's transaction).
 *
 * Gotchas:
 * - `DatabaseSync.prepare` compiles only the FIRST statement of a multi-statement string
 *   and silently ignores the rest. Issue one statement per `sql` call.
 * - `sql.stream` holds the connection until the stream ends; querying the same client
 *   from inside the stream's consumer waits for it (deadlock if awaited inline).
 *
 * @since 0.1.0
 */
import { Duration, Effect, Layer, Predicate, Semaphore, Stream } from "effect"
import type { Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, SqlError, Statement } from "effect/sql"
import type { SqlConnection } from "effect/sql"
import * as fs from "node:fs"
import { DatabaseSync, type SQLInputValue, type SQLOutputValue, type StatementSync } from "node:sqlite"

/** Configuration of {@link make} and {@link layer}. */
export interface SqliteClientConfig {
  /**
   * Path of the database file, or `":memory:"` for a private in-memory database. A file the
   * client creates is readable by its owner only (0600, whatever the umask); SQLite gives the
   * `-wal` and `-shm` files it makes beside it the same mode.
   */
  readonly filename: string
  /** Open read-only; the file must already exist. Default `false`. */
  readonly readonly?: boolean | undefined
  /** How long a statement waits for another process's lock before failing. Default "5 seconds". */
  readonly busyTimeout?: Duration.Input | undefined
  /** How many prepared statements to keep, least recently used evicted first. Default 200. */
  readonly statementCacheSize?: number | undefined
  /** Extra tracing span attributes. */
  readonly spanAttributes?: Record<string, unknown> | undefined
  /** Renames result columns, e.g. `snake_case` → `camelCase`. */
  readonly transformResultNames?: ((name: string) => string) | undefined
  /** Renames identifiers written with `sql(name)` / `sql.insert`, e.g. `camelCase` → `snake_case`. */
  readonly transformQueryNames?: ((name: string) => string) | undefined
}

type Rows = ReadonlyArray<Record<string, SQLOutputValue>>
type TransformRows = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

const isMemory = (filename: string): boolean => filename === ":memory:" || filename === ""

/** Opens for writing, creating the file if missing; an existing file is left as it is. */
const createPrivate = fs.constants.O_RDWR | fs.constants.O_CREAT

/**
 * Converts one bound parameter to a value `node:sqlite` accepts. A value that has no
 * SQLite representation (a plain object, a symbol, a function) throws, and the caller
 * turns that into a `SqlError` rather than binding something surprising.
 */
const toSqlInput = (value: unknown, index: number): SQLInputValue => {
  switch (typeof value) {
    case "string":
    case "number":
    case "bigint":
      return value
    case "boolean":
      return value ? 1 : 0
    case "undefined":
      return null
  }
  if (value === null || value instanceof Uint8Array) return value
  // ISO-8601 text sorts and compares correctly and is what SQLite's date functions read.
  if (value instanceof Date) return value.toISOString()
  throw new TypeError(`Cannot bind SQLite parameter ${index + 1}: unsupported value of type ${typeof value}`)
}

const toSqlInputs = (params: ReadonlyArray<unknown>): Array<SQLInputValue> => params.map(toSqlInput)

// node:sqlite reports the extended result code in `errcode` (its `code` is the generic
// "ERR_SQLITE_ERROR"), which `SqlError.classifySqliteError` does not read: it looks at
// `code` and `errno` only and would call every node:sqlite failure "UnknownError". So the
// node:sqlite codes are mapped here, keeping the thrown error itself as the cause.
const SQLITE_ERROR = 1
const SQLITE_PERM = 3
const SQLITE_BUSY = 5
const SQLITE_LOCKED = 6
const SQLITE_CANTOPEN = 14
const SQLITE_CONSTRAINT = 19
const SQLITE_AUTH = 23
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555
const SQLITE_CONSTRAINT_UNIQUE = 2067

const messageOf = (cause: unknown): string | undefined =>
  Predicate.hasProperty(cause, "message") && typeof cause.message === "string" ? cause.message : undefined

const uniqueConstraintOf = (message: string | undefined): string => {
  const prefix = "UNIQUE constraint failed:"
  const index = message?.indexOf(prefix) ?? -1
  const constraint = index === -1 || message === undefined ? "" : message.slice(index + prefix.length).trim()
  return constraint === "" ? "unknown" : constraint
}

/** Maps anything thrown by `node:sqlite` (or by parameter conversion) to a typed `SqlError`. */
export const toSqlError = (cause: unknown, operation: string): SqlError.SqlError => {
  const message = messageOf(cause)
  const props = { cause, message, operation }
  const errcode = Predicate.hasProperty(cause, "errcode") && typeof cause.errcode === "number"
    ? cause.errcode
    : undefined
  if (errcode === undefined) {
    return new SqlError.SqlError({ reason: SqlError.classifySqliteError(cause, { message, operation }) })
  }
  const reason = (() => {
    if (errcode === SQLITE_CONSTRAINT_UNIQUE || errcode === SQLITE_CONSTRAINT_PRIMARYKEY) {
      return new SqlError.UniqueViolation({ ...props, constraint: uniqueConstraintOf(message) })
    }
    switch (errcode & 0xff) {
      case SQLITE_CONSTRAINT:
        return new SqlError.ConstraintError(props)
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        return new SqlError.LockTimeoutError(props)
      case SQLITE_CANTOPEN:
        return new SqlError.ConnectionError(props)
      case SQLITE_AUTH:
        return new SqlError.AuthenticationError(props)
      case SQLITE_PERM:
        return new SqlError.AuthorizationError(props)
      case SQLITE_ERROR:
        // SQLITE_ERROR is generic; only its parser message identifies a syntax error.
        return message !== undefined && /syntax error|incomplete input/.test(message)
          ? new SqlError.SqlSyntaxError(props)
          : new SqlError.UnknownError(props)
      default:
        return new SqlError.UnknownError(props)
    }
  })()
  return new SqlError.SqlError({ reason })
}

const attempt = <A>(operation: string, f: () => A): Effect.Effect<A, SqlError.SqlError> =>
  Effect.try({ try: f, catch: (cause) => toSqlError(cause, operation) })

/**
 * Rows come back as objects (or arrays after `setReturnArrays(true)`, which the
 * `node:sqlite` typings do not model); this turns either into a value array.
 */
const toValues = (rows: Rows): ReadonlyArray<ReadonlyArray<unknown>> =>
  rows.map((row) => Array.isArray(row) ? row : Object.values(row))

/**
 * Opens the database in the current scope (closed by a finalizer) and builds a
 * `SqlClient` on it.
 */
export const make = (
  config: SqliteClientConfig
): Effect.Effect<SqlClient.SqlClient, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const readOnly = config.readonly ?? false
    const busyTimeoutMs = Math.max(0, Math.round(Duration.toMillis(config.busyTimeout ?? "5 seconds")))
    const cacheSize = Math.max(0, config.statementCacheSize ?? 200)

    if (!readOnly && !isMemory(config.filename) && !config.filename.startsWith("file:")) {
      // Created here, before SQLite would create it with 0644.
      yield* attempt("open", () => fs.closeSync(fs.openSync(config.filename, createPrivate, 0o600)))
    }
    const db = yield* Effect.acquireRelease(
      attempt("open", () => new DatabaseSync(config.filename, { readOnly })),
      // Statements are synchronous, so none is mid-flight here; an open transaction is rolled back.
      (db) => Effect.sync(() => db.isOpen && db.close())
    )

    // Least-recently-used cache of prepared statements, keyed by SQL text.
    const cache = new Map<string, StatementSync>()
    const prepare = (sql: string): StatementSync => {
      const cached = cache.get(sql)
      if (cached !== undefined) {
        cache.delete(sql)
        cache.set(sql, cached)
        return cached
      }
      const statement = db.prepare(sql)
      if (cacheSize > 0) {
        cache.set(sql, statement)
        if (cache.size > cacheSize) {
          const oldest = cache.keys().next()
          if (!oldest.done) cache.delete(oldest.value)
        }
      }
      return statement
    }

    // A cached statement is shared, so every use sets the row shape and integer mode it needs.
    const runRows = (statement: StatementSync, params: ReadonlyArray<unknown>, safeIntegers: boolean): Rows => {
      statement.setReturnArrays(false)
      statement.setReadBigInts(safeIntegers)
      return statement.all(...toSqlInputs(params))
    }
    const runValues = (statement: StatementSync, params: ReadonlyArray<unknown>, safeIntegers: boolean) => {
      statement.setReturnArrays(true)
      statement.setReadBigInts(safeIntegers)
      return toValues(statement.all(...toSqlInputs(params)))
    }

    // `SqlClient.SafeIntegers` is the effect/sql switch for reading INTEGERs as bigint.
    const withSafeIntegers = <A>(
      operation: string,
      f: (safeIntegers: boolean) => A
    ): Effect.Effect<A, SqlError.SqlError> =>
      Effect.flatMap(SqlClient.SafeIntegers, (safeIntegers) => attempt(operation, () => f(safeIntegers)))

    const execute = (sql: string, params: ReadonlyArray<unknown>, transformRows: TransformRows) =>
      withSafeIntegers("execute", (safe) => {
        const rows = runRows(prepare(sql), params, safe)
        return transformRows === undefined ? rows : transformRows(rows)
      })

    const connection: SqlConnection.Connection = {
      execute,
      executeUnprepared: (sql, params, transformRows) =>
        withSafeIntegers("executeUnprepared", (safe) => {
          const rows = runRows(db.prepare(sql), params, safe)
          return transformRows === undefined ? rows : transformRows(rows)
        }),
      // Raw: the rows for a statement that returns columns, otherwise node's
      // `{ changes, lastInsertRowid }`.
      executeRaw: (sql, params) =>
        withSafeIntegers("executeRaw", (safe) => {
          const statement = prepare(sql)
          if (statement.columns().length > 0) return runRows(statement, params, safe)
          statement.setReadBigInts(safe)
          return statement.run(...toSqlInputs(params))
        }),
      executeValues: (sql, params) => withSafeIntegers("executeValues", (safe) => runValues(prepare(sql), params, safe)),
      executeValuesUnprepared: (sql, params) =>
        withSafeIntegers("executeValuesUnprepared", (safe) => runValues(db.prepare(sql), params, safe)),
      // node:sqlite reads a whole result synchronously anyway; emit the rows once read.
      executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(execute(sql, params, transformRows))
    }

    const pragma = (sql: string) => attempt("configure", () => db.exec(sql))
    yield* pragma(`PRAGMA busy_timeout = ${busyTimeoutMs}`)
    yield* pragma("PRAGMA foreign_keys = ON")
    // WAL lets readers in other processes proceed while this one writes; it is
    // meaningless for memory databases and cannot be switched on read-only.
    if (!isMemory(config.filename) && !readOnly) {
      yield* pragma("PRAGMA journal_mode = WAL")
    }

    const semaphore = yield* Semaphore.make(1)
    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore,
      isTransaction: () => db.isOpen && db.isTransaction
    })

    const transformRows = config.transformResultNames === undefined
      ? undefined
      : Statement.defaultTransforms(config.transformResultNames).array

    return yield* SqlClient.make({
      ...acquirers,
      compiler: Statement.makeCompilerSqlite(config.transformQueryNames),
      transformRows,
      // Same engine and connection model as the (not yet 4.1-compatible) official
      // `@effect/sql-sqlite-node`, so code that branches on the driver treats it alike.
      driver: "sqlite-node",
      spanAttributes: [
        ...Object.entries(config.spanAttributes ?? {}),
        ["db.system.name", "sqlite"]
      ],
      // A deferred BEGIN that later writes cannot wait for another process's write lock
      // (SQLite answers SQLITE_BUSY at once to avoid deadlock), so writable clients take
      // the write lock up front, where busy_timeout applies.
      beginTransaction: readOnly ? "BEGIN" : "BEGIN IMMEDIATE",
      prepareTransactionControls: true,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`
    })
  })

/** A `SqlClient` layer over one SQLite database; provides its own `Reactivity`. */
export const layer = (config: SqliteClientConfig): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.effect(SqlClient.SqlClient, make(config)).pipe(Layer.provide(Reactivity.layer))
