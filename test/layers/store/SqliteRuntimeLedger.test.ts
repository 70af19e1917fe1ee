/**
 * The runtime ledger: the same behaviour from the SQLite layer (a real file in a temp dir) and the
 * in-memory one; then what only the file does: it survives reopening, shares one database with
 * the other stores through `SqliteDatabase.layerStores`, and reports damaged rows and SQL failures
 * as `AgentStoreError`s with the ledger's operation names.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type { Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { AgentRecord } from "../../../src/domain/agent.ts"
import type { AgentStoreError } from "../../../src/domain/errors.ts"
import type { FinishSubscription } from "../../../src/domain/finish.ts"
import type { RuntimeProcess } from "../../../src/domain/runtimeProcess.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as SqliteClient from "../../../src/layers/store/SqliteClient.ts"
import * as SqliteDatabase from "../../../src/layers/store/SqliteDatabase.ts"
import * as SqliteRuntimeLedger from "../../../src/layers/store/SqliteRuntimeLedger.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { FinishStore } from "../../../src/services/FinishStore.ts"
import { RuntimeLedger } from "../../../src/services/RuntimeLedger.ts"

// --- fixtures ----------------------------------------------------------------

/** A fresh directory under the OS temp dir, removed when the test's scope closes. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "quiesce-runtime-ledger-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const entry = (agentId: string, pid: number, fields: Partial<RuntimeProcess> = {}): RuntimeProcess => ({
  agentId,
  pid,
  startTime: 123_456,
  marker: `marker-${agentId}-${pid}`,
  recordedAt: 1_000,
  ...fields
})

const agent = (agentId: string): AgentRecord => ({
  agentId,
  provider: "shell",
  cwd: "/work/project",
  labels: {},
  persistence: null,
  lifecycle: "active",
  createdAt: 1_000,
  lastActivityAt: 1_000,
  closedAt: null
})

const subscription = (id: string): FinishSubscription => ({
  id,
  callerAgentId: "agent-caller",
  targetAgentId: "agent-target",
  serverId: null,
  state: "pending",
  createdAt: 1_000,
  afterFinish: null,
  notification: null
})

/** The ledger from a built layer. */
const ledgerOf = (layer: Layer.Layer<RuntimeLedger, AgentStoreError>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, RuntimeLedger))

/** Every store from one built `layerStores`. */
const storesOf = (filename: string) =>
  Effect.map(Layer.build(SqliteDatabase.layerStores(filename)), (context) => ({
    agents: Context.get(context, AgentStore),
    finishes: Context.get(context, FinishStore),
    ledger: Context.get(context, RuntimeLedger)
  }))

/** The SQLite ledger on `filename`, over its own database layer. */
const sqliteLayer = (filename: string) =>
  SqliteRuntimeLedger.layerFromClient.pipe(Layer.provide(SqliteDatabase.layer(filename)))

/** A plain SQL connection to the ledger's file, beside the ledger's own. */
const withSql = <A, E>(filename: string, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.provide(effect, SqliteClient.layer({ filename }))

// --- the same behaviour from both layers ------------------------------------------

interface Backend {
  readonly name: string
  readonly layer: Effect.Effect<Layer.Layer<RuntimeLedger, AgentStoreError>, never, Scope.Scope>
}

const backends: ReadonlyArray<Backend> = [
  {
    name: "SqliteRuntimeLedger",
    // A nested path also checks that the database layer creates missing parent directories.
    layer: Effect.map(tempDir, (dir) => sqliteLayer(path.join(dir, "state", "nested", "quiesce.db")))
  },
  { name: "RuntimeLedgerMemory", layer: Effect.succeed(RuntimeLedgerMemory.layer) }
]

for (const backend of backends) {
  describe(backend.name, () => {
    const ledger = Effect.flatMap(backend.layer, ledgerOf)

    it.effect("records, lists and removes entries", () =>
      Effect.gen(function*() {
        const runtimes = yield* ledger
        assert.deepStrictEqual(yield* runtimes.list, [])
        const first = entry("agent-ünïcode 'quoted'", 4_000_000, { startTime: 0, recordedAt: 1_750_000_000_123 })
        const second = entry("agent-b", 42)
        yield* runtimes.record(first)
        yield* runtimes.record(second)
        assert.deepStrictEqual(yield* runtimes.list, [second, first])

        yield* runtimes.remove(second.agentId, second.pid)
        assert.deepStrictEqual(yield* runtimes.list, [first])
        yield* runtimes.remove(first.agentId, first.pid)
        assert.deepStrictEqual(yield* runtimes.list, [])
      }))

    it.effect("record replaces the entry with the same agent id and pid, and only that one", () =>
      Effect.gen(function*() {
        const runtimes = yield* ledger
        // The same agent with two pids, and the same pid under two agents: four distinct entries.
        const a1 = entry("agent-a", 100)
        const a2 = entry("agent-a", 200)
        const b1 = entry("agent-b", 100)
        for (const e of [a1, a2, b1]) yield* runtimes.record(e)
        const replaced = entry("agent-a", 100, { startTime: 999, marker: "another-marker", recordedAt: 5_000 })
        yield* runtimes.record(replaced)
        assert.deepStrictEqual(yield* runtimes.list, [a2, b1, replaced])
      }))

    it.effect("remove needs both the agent id and the pid; a missing entry is not an error", () =>
      Effect.gen(function*() {
        const runtimes = yield* ledger
        const a1 = entry("agent-a", 100)
        const b2 = entry("agent-b", 200)
        yield* runtimes.record(a1)
        yield* runtimes.record(b2)
        yield* runtimes.remove("agent-a", 200)
        yield* runtimes.remove("agent-b", 100)
        yield* runtimes.remove("missing", 1)
        assert.deepStrictEqual(yield* runtimes.list, [a1, b2])
      }))

    it.effect("lists oldest recordedAt first, then by agent id, then by pid", () =>
      Effect.gen(function*() {
        const runtimes = yield* ledger
        const c = entry("c", 1, { recordedAt: 2_000 })
        const a = entry("a", 1, { recordedAt: 3_000 })
        const b20 = entry("b", 20, { recordedAt: 2_000 })
        const b3 = entry("b", 3, { recordedAt: 2_000 })
        const d = entry("d", 1, { recordedAt: 1_000 })
        for (const e of [c, a, b20, b3, d]) yield* runtimes.record(e)
        // Pids compare as numbers (3 before 20), not as text.
        assert.deepStrictEqual(yield* runtimes.list, [d, b3, b20, c, a])
      }))
  })
}

// --- SQLite only --------------------------------------------------------------------

describe("SqliteRuntimeLedger file", () => {
  it.effect("entries survive closing and reopening the file; migrations run once", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "quiesce.db")
      const layer = sqliteLayer(filename)
      const kept = entry("agent-kept", 4242, { startTime: 987_654_321, recordedAt: 7 })

      yield* Effect.scoped(Effect.gen(function*() {
        const runtimes = yield* ledgerOf(layer)
        yield* runtimes.record(kept)
        yield* runtimes.record(entry("agent-gone", 1))
        yield* runtimes.remove("agent-gone", 1)
      }))

      yield* Effect.scoped(Effect.gen(function*() {
        const runtimes = yield* ledgerOf(layer)
        assert.deepStrictEqual(yield* runtimes.list, [kept])
        yield* runtimes.record(entry("agent-another", 5, { recordedAt: 8 }))
      }))

      yield* Effect.scoped(Effect.gen(function*() {
        const runtimes = yield* ledgerOf(layer)
        assert.deepStrictEqual((yield* runtimes.list).map((e) => e.agentId), ["agent-kept", "agent-another"])
      }))

      const migrations = yield* withSql(
        filename,
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ migration_id: number; name: string }>`SELECT migration_id, name FROM runtime_ledger_migrations`
        )
      )
      assert.deepStrictEqual(migrations.map((m) => [m.migration_id, m.name]), [[1, "create_runtime_processes"]])
    }))

  it.effect("layerStores keeps agents, finish subscriptions and the ledger in one database file", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "state", "quiesce.db")
      const running = entry("agent-target", 31337)

      yield* Effect.scoped(Effect.gen(function*() {
        const { agents, finishes, ledger } = yield* storesOf(filename)
        yield* agents.put(agent("agent-target"))
        yield* finishes.put(subscription("sub-1"))
        yield* ledger.record(running)
      }))

      yield* Effect.scoped(Effect.gen(function*() {
        const { agents, finishes, ledger } = yield* storesOf(filename)
        assert.deepStrictEqual(yield* agents.list, [agent("agent-target")])
        assert.deepStrictEqual(yield* finishes.list, [subscription("sub-1")])
        assert.deepStrictEqual(yield* ledger.list, [running])
      }))

      assert.deepStrictEqual(
        fs.readdirSync(path.dirname(filename)).filter((name) => name.endsWith(".db")),
        ["quiesce.db"]
      )
      const tables = yield* withSql(
        filename,
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
        )
      )
      assert.includeMembers(tables.map((t) => t.name), [
        "agent_store_migrations",
        "agents",
        "finish_store_migrations",
        "finish_subscriptions",
        "runtime_ledger_migrations",
        "runtime_processes"
      ])
    }))

  interface Corruption {
    readonly kind: string
    readonly column: string
    readonly value: string | number
  }
  const corruptions: ReadonlyArray<Corruption> = [
    { kind: "a pid that is not a number", column: "pid", value: "forty-two" },
    { kind: "a negative start time", column: "start_time", value: -1 },
    { kind: "an empty marker", column: "marker", value: "" },
    { kind: "a fractional pid", column: "pid", value: 4.5 }
  ]

  for (const corruption of corruptions) {
    it.effect(`a row with ${corruption.kind} fails list with an error naming the agent`, () =>
      Effect.gen(function*() {
        const filename = path.join(yield* tempDir, "quiesce.db")
        const runtimes = yield* ledgerOf(sqliteLayer(filename))
        yield* runtimes.record(entry("agent-good", 1, { recordedAt: 1 }))
        yield* runtimes.record(entry("agent-broken", 2, { recordedAt: 2 }))
        yield* withSql(
          filename,
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql`UPDATE runtime_processes SET ${sql(corruption.column)} = ${corruption.value}
                WHERE agent_id = ${"agent-broken"}`
          )
        )

        const listError = yield* Effect.flip(runtimes.list)
        assert.strictEqual(listError._tag, "AgentStoreError")
        assert.strictEqual(listError.operation, "ledger.list")
        assert.strictEqual(listError.agentId, "agent-broken")
        assert.include(listError.message, "agent-broken")
      }))
  }

  it.effect("maps SQL failures to AgentStoreError with the ledger's operation, agent and pid", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "quiesce.db")
      const runtimes = yield* ledgerOf(sqliteLayer(filename))
      yield* withSql(filename, Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DROP TABLE runtime_processes`))

      const recordError = yield* Effect.flip(runtimes.record(entry("agent-x", 77)))
      assert.strictEqual(recordError.operation, "ledger.record")
      assert.strictEqual(recordError.agentId, "agent-x")
      assert.include(recordError.message, "pid 77")
      assert.include(recordError.message, "no such table")
      const removeError = yield* Effect.flip(runtimes.remove("agent-y", 78))
      assert.strictEqual(removeError.operation, "ledger.remove")
      assert.include(removeError.message, "agent-y pid 78")
      const listError = yield* Effect.flip(runtimes.list)
      assert.strictEqual(listError.operation, "ledger.list")
    }))

  it.effect("an entry the schema rejects is not written", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "quiesce.db")
      const runtimes = yield* ledgerOf(sqliteLayer(filename))
      const error = yield* Effect.flip(runtimes.record(entry("agent-bad", 0)))
      assert.strictEqual(error.operation, "ledger.record")
      assert.include(error.message, "agent-bad")
      assert.deepStrictEqual(yield* runtimes.list, [])
    }))

  it.effect("a migration that cannot run fails the layer with operation \"ledger.open\"", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "quiesce.db")
      // A table of that name the ledger did not create: its first migration cannot create it.
      yield* withSql(filename, Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE runtime_processes (x TEXT)`))
      const error = yield* Effect.flip(ledgerOf(sqliteLayer(filename)))
      assert.strictEqual(error.operation, "ledger.open")
      assert.include(error.message, "runtime ledger")
    }))

  it.effect("fails to open with an AgentStoreError when the file is not a database", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "quiesce.db")
      fs.writeFileSync(filename, "this is not a SQLite database, just some text that is long enough ".repeat(20))
      const error = yield* Effect.flip(ledgerOf(sqliteLayer(filename)))
      assert.strictEqual(error._tag, "AgentStoreError")
      // The shared database layer fails first, naming the file.
      assert.strictEqual(error.operation, "open")
      assert.include(error.message, filename)
      const storesError = yield* Effect.flip(Effect.scoped(storesOf(filename)))
      assert.strictEqual(storesError._tag, "AgentStoreError")
    }))
})
