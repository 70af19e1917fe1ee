import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Schema, Stream, String as Str } from "effect"
import { Migrator, SqlClient, SqlError, SqlSchema } from "effect/sql"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteClient from "../../../src/layers/store/SqliteClient.ts"

// --- fixtures ----------------------------------------------------------------

/** A fresh directory under the OS temp dir, removed when the test's scope closes. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "quiesce-sqlite-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const migrations = {
  "1_create_agents": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE agents (
      id TEXT PRIMARY KEY NOT NULL,
      name TEXT NOT NULL UNIQUE,
      idle_seconds INTEGER NOT NULL,
      protected INTEGER NOT NULL DEFAULT 0,
      closed_at TEXT
    )`
  }),
  "2_create_sessions": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE sessions (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      agent_id TEXT NOT NULL REFERENCES agents(id)
    )`
    yield* sql`CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)`
    yield* sql`INSERT INTO counter (id, value) VALUES (1, 0)`
  })
}

const migrate = Migrator.make({})({ loader: Migrator.fromRecord(migrations) })

type Backend = "memory" | "file"

/** Runs `effect` against a migrated database of the given kind. */
const withDatabase = <A, E, R>(backend: Backend, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const filename = backend === "memory" ? ":memory:" : path.join(yield* tempDir, "store.db")
    return yield* Effect.andThen(migrate, effect).pipe(Effect.provide(SqliteClient.layer({ filename })))
  })

const insertAgent = (id: string, name = id) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql`INSERT INTO agents ${sql.insert({ id, name, idle_seconds: 0 })}`
  )

const agentIds = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => Effect.map(sql<{ id: string }>`SELECT id FROM agents ORDER BY id`, (rows) => rows.map((r) => r.id))
)

/** The error of a failed effect, failing the test if it succeeded. */
const failure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.exit(effect), (exit) =>
    Exit.isFailure(exit)
      ? Effect.succeed(exit.cause)
      : Effect.die(new Error("expected a failure")))

const sqlErrorOf = <A, R>(effect: Effect.Effect<A, SqlError.SqlError, R>) =>
  Effect.flatMap(Effect.flip(effect), (error) => {
    assert.isTrue(SqlError.isSqlError(error))
    return Effect.succeed(error)
  })

// --- tests on both backends -----------------------------------------------------

for (const backend of ["memory", "file"] satisfies ReadonlyArray<Backend>) {
  describe(`SqliteClient (${backend})`, () => {
    it.effect("migrates once, then inserts and selects with the sql template", () =>
      withDatabase(
        backend,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          assert.deepStrictEqual(yield* migrate, [], "a second run finds nothing to do")

          const applied = yield* sql<{ migration_id: number; name: string }>`
            SELECT migration_id, name FROM effect_sql_migrations ORDER BY migration_id`
          assert.deepStrictEqual(applied.map((r) => [r.migration_id, r.name]), [[1, "create_agents"], [
            2,
            "create_sessions"
          ]])

          yield* insertAgent("a1", "alpha")
          yield* sql`INSERT INTO agents (id, name, idle_seconds, protected) VALUES (${"a2"}, ${"beta"}, ${30}, ${true})`
          const rows = yield* sql<{ id: string; name: string; idle_seconds: number; protected: number }>`
            SELECT id, name, idle_seconds, protected FROM agents WHERE ${sql.in("id", ["a1", "a2"])} ORDER BY id`
          assert.deepStrictEqual(rows.map((r) => ({ ...r })), [
            { id: "a1", name: "alpha", idle_seconds: 0, protected: 0 },
            { id: "a2", name: "beta", idle_seconds: 30, protected: 1 }
          ])
        })
      ))

    it.effect("decodes rows with SqlSchema.findAll and binds Dates, booleans and undefined", () =>
      withDatabase(
        backend,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const closedAt = new Date("2025-01-02T03:04:05.678Z")
          yield* sql`INSERT INTO agents ${
            sql.insert([
              { id: "a1", name: "alpha", idle_seconds: 5, protected: false, closed_at: closedAt },
              { id: "a2", name: "beta", idle_seconds: 7, protected: true, closed_at: undefined }
            ])
          }`

          const Agent = Schema.Struct({
            id: Schema.String,
            idle_seconds: Schema.Int,
            protected: Schema.BooleanFromBit,
            closed_at: Schema.NullOr(Schema.DateFromString)
          })
          const findIdle = SqlSchema.findAll({
            Request: Schema.Number,
            Result: Agent,
            execute: (min) =>
              sql`SELECT id, idle_seconds, protected, closed_at FROM agents WHERE idle_seconds >= ${min} ORDER BY id`
          })
          const agents = yield* findIdle(5)
          assert.deepStrictEqual(agents, [
            { id: "a1", idle_seconds: 5, protected: false, closed_at: closedAt },
            { id: "a2", idle_seconds: 7, protected: true, closed_at: null }
          ])
          assert.deepStrictEqual(yield* findIdle(6), [agents[1]])
        })
      ))

    it.effect("a failing transaction rolls back", () =>
      withDatabase(
        backend,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* insertAgent("before")
          const cause = yield* failure(sql.withTransaction(
            Effect.andThen(insertAgent("inside"), Effect.fail("boom" as const))
          ))
          assert.deepStrictEqual(cause.reasons.map((r) => r._tag), ["Fail"])
          assert.deepStrictEqual(yield* agentIds, ["before"])

          // and a successful one commits
          yield* sql.withTransaction(insertAgent("committed"))
          assert.deepStrictEqual(yield* agentIds, ["before", "committed"])
        })
      ))

    it.effect("a nested transaction (savepoint) rolls back alone and the outer commits", () =>
      withDatabase(
        backend,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* insertAgent("outer")
            const inner = yield* Effect.exit(sql.withTransaction(
              Effect.andThen(insertAgent("inner"), Effect.fail("inner failed" as const))
            ))
            assert.isTrue(Exit.isFailure(inner))
            // a nested one that succeeds is kept with the outer
            yield* sql.withTransaction(insertAgent("inner-ok"))
            assert.deepStrictEqual(yield* agentIds, ["inner-ok", "outer"], "visible inside the transaction")
          }))
          assert.deepStrictEqual(yield* agentIds, ["inner-ok", "outer"])
        })
      ))

    it.effect("constraint and syntax errors surface as typed SqlErrors", () =>
      withDatabase(
        backend,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* insertAgent("a1", "alpha")

          const unique = yield* sqlErrorOf(insertAgent("a2", "alpha"))
          assert.strictEqual(unique.reason._tag, "UniqueViolation")
          if (unique.reason._tag === "UniqueViolation") {
            assert.strictEqual(unique.reason.constraint, "agents.name")
          }
          assert.strictEqual(unique.reason.operation, "execute")
          assert.match(unique.message, /UNIQUE constraint failed: agents\.name/)

          const primaryKey = yield* sqlErrorOf(insertAgent("a1", "other"))
          assert.strictEqual(primaryKey.reason._tag, "UniqueViolation")

          const notNull = yield* sqlErrorOf(sql`INSERT INTO agents (id, name, idle_seconds) VALUES ('x', NULL, 0)`)
          assert.strictEqual(notNull.reason._tag, "ConstraintError")

          // foreign_keys is on
          const foreignKey = yield* sqlErrorOf(sql`INSERT INTO sessions (agent_id) VALUES ('missing')`)
          assert.strictEqual(foreignKey.reason._tag, "ConstraintError")
          assert.match(foreignKey.message, /FOREIGN KEY/)

          const syntax = yield* sqlErrorOf(sql`SELEC 1`)
          assert.strictEqual(syntax.reason._tag, "SqlSyntaxError")

          const unbindable = yield* sqlErrorOf(sql`SELECT ${{ not: "bindable" }} AS v`)
          assert.strictEqual(unbindable.reason._tag, "UnknownError")

          // the error also reaches catchTag, and the original node:sqlite error is kept
          const caught = yield* insertAgent("a3", "alpha").pipe(
            Effect.as("inserted"),
            Effect.catchTag("SqlError", (e) => Effect.succeed(e.reason.cause))
          )
          assert.instanceOf(caught, Error)

          // a failed statement inside a transaction rolls the transaction back
          yield* Effect.exit(sql.withTransaction(Effect.andThen(insertAgent("a4"), insertAgent("a5", "alpha"))))
          assert.deepStrictEqual(yield* agentIds, ["a1"])
        })
      ))

    it.effect("supports values, raw, unprepared, stream and SafeIntegers", () =>
      withDatabase(
        backend,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* insertAgent("a1")
          yield* insertAgent("a2")

          assert.deepStrictEqual(yield* sql`SELECT id, 1 AS one, 2 AS one FROM agents ORDER BY id`.values, [
            ["a1", 1, 2],
            ["a2", 1, 2]
          ])
          const raw = yield* sql`UPDATE agents SET idle_seconds = idle_seconds + 1`.raw
          assert.deepInclude(raw, { changes: 2 })
          const unprepared = yield* sql`SELECT count(*) AS n FROM agents`.unprepared
          assert.deepStrictEqual(unprepared.map((r) => ({ ...r })), [{ n: 2 }])

          const streamed = yield* sql<{ id: string }>`SELECT id FROM agents ORDER BY id`.stream.pipe(
            Stream.map((r) => r.id),
            Stream.runCollect
          )
          assert.deepStrictEqual(Array.from(streamed), ["a1", "a2"])

          const [big] = yield* sql<{ n: unknown }>`SELECT 9007199254740993 AS n`.pipe(
            Effect.provideService(SqlClient.SafeIntegers, true)
          )
          assert.strictEqual(big.n, 9007199254740993n)
          const [small] = yield* sql<{ n: unknown }>`SELECT 42 AS n`
          assert.strictEqual(small.n, 42)
        })
      ))

    it.effect("serializes concurrent queries and transactions from many fibers", () =>
      withDatabase(
        backend,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          // read-modify-write with a yield in between: only correct if transactions are exclusive
          const increment = sql.withTransaction(Effect.gen(function*() {
            const [row] = yield* sql<{ value: number }>`SELECT value FROM counter WHERE id = 1`
            yield* Effect.yieldNow
            yield* sql`UPDATE counter SET value = ${row.value + 1} WHERE id = 1`
          }))
          const plainInserts = Effect.forEach(
            Array.from({ length: 20 }, (_, i) => `p${String(i).padStart(2, "0")}`),
            (id) => insertAgent(id),
            { concurrency: "unbounded", discard: true }
          )
          yield* Effect.all([
            Effect.all(Array.from({ length: 50 }, () => increment), { concurrency: "unbounded", discard: true }),
            plainInserts
          ], { concurrency: "unbounded" })
          const [counter] = yield* sql<{ value: number }>`SELECT value FROM counter WHERE id = 1`
          assert.strictEqual(counter.value, 50)
          assert.strictEqual((yield* agentIds).length, 20)
        })
      ))

    it.effect("a statement from another fiber waits for an open transaction instead of joining it", () =>
      withDatabase(
        backend,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const inTransaction = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const tx = yield* Effect.forkChild(Effect.exit(sql.withTransaction(Effect.gen(function*() {
            yield* insertAgent("tx")
            yield* Deferred.succeed(inTransaction, undefined)
            yield* Deferred.await(release)
            return yield* Effect.fail("abort" as const)
          }))))
          yield* Deferred.await(inTransaction)
          const outside = yield* Effect.forkChild(insertAgent("outside"))
          for (let i = 0; i < 20; i++) yield* Effect.yieldNow
          assert.isUndefined(outside.pollUnsafe(), "the outside insert is still waiting")
          yield* Deferred.succeed(release, undefined)
          assert.isTrue(Exit.isFailure(yield* Fiber.join(tx)))
          yield* Fiber.join(outside)
          assert.deepStrictEqual(yield* agentIds, ["outside"])
        })
      ))
  })
}

// --- file-only behaviour ----------------------------------------------------------

describe("SqliteClient (file)", () => {
  it.effect("persists data across closing and reopening the same file, in WAL mode", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "persist.db")
      const config = { filename, transformResultNames: Str.snakeToCamel, transformQueryNames: Str.camelToSnake }

      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* migrate
        yield* sql`INSERT INTO agents ${sql.insert({ id: "a1", name: "alpha", idleSeconds: 12 })}`
        const [mode] = yield* sql<{ journalMode: string }>`PRAGMA journal_mode`
        assert.strictEqual(mode.journalMode, "wal")
      }).pipe(Effect.provide(SqliteClient.layer(config)))

      const rows = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        assert.deepStrictEqual(yield* migrate, [], "the migration table persisted too")
        return yield* sql<{ id: string; idleSeconds: number }>`SELECT id, idle_seconds FROM agents`
      }).pipe(Effect.provide(SqliteClient.layer(config)))
      assert.deepStrictEqual(rows.map((r) => ({ ...r })), [{ id: "a1", idleSeconds: 12 }])
    }))

  it.effect("a read-only client reads but cannot write", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "ro.db")
      yield* Effect.andThen(migrate, insertAgent("a1")).pipe(Effect.provide(SqliteClient.layer({ filename })))

      yield* Effect.gen(function*() {
        assert.deepStrictEqual(yield* agentIds, ["a1"])
        const error = yield* sqlErrorOf(insertAgent("a2"))
        assert.match(error.message, /readonly/)
      }).pipe(Effect.provide(SqliteClient.layer({ filename, readonly: true })))
    }))

  it.effect("a database file it creates is its owner's only, and so are its -wal and -shm", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "private.db")
      yield* Effect.gen(function*() {
        yield* migrate
        yield* insertAgent("a1")
        // Open: the write-ahead log and its index sit beside the file.
        for (const file of [filename, `${filename}-wal`, `${filename}-shm`]) {
          assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600, file)
        }
      }).pipe(Effect.provide(SqliteClient.layer({ filename })))
      // An existing file is opened as it is: its mode is its owner's business.
      fs.chmodSync(filename, 0o640)
      yield* Effect.provide(agentIds, SqliteClient.layer({ filename }))
      assert.strictEqual(fs.statSync(filename).mode & 0o777, 0o640)
    }))

  it.effect("opening a missing file read-only fails with a SqlError", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "missing.db")
      const error = yield* sqlErrorOf(
        Effect.provide(agentIds, SqliteClient.layer({ filename, readonly: true }))
      )
      assert.strictEqual(error.reason._tag, "ConnectionError")
      assert.strictEqual(error.reason.operation, "open")
    }))
})
