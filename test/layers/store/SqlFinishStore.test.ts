import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import type { Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { AgentRecord } from "../../../src/domain/agent.ts"
import type { AgentStoreError, FinishStoreError } from "../../../src/domain/errors.ts"
import type { FinishSubscription } from "../../../src/domain/finish.ts"
import * as FinishStoreMemory from "../../../src/layers/store/FinishStoreMemory.ts"
import * as SqliteClient from "../../../src/layers/store/SqliteClient.ts"
import * as SqliteDatabase from "../../../src/layers/store/SqliteDatabase.ts"
import * as PostgresDatabase from "../../../src/layers/store/PostgresDatabase.ts"
import * as SqlFinishStore from "../../../src/layers/store/SqlFinishStore.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { FinishStore } from "../../../src/services/FinishStore.ts"
import { usePostgres } from "../../support/usePostgres.ts"

const postgres = usePostgres()

// --- fixtures ----------------------------------------------------------------

/** A fresh directory under the OS temp dir, removed when the test's scope closes. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "quiesce-finish-store-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const subscription = (id: string, fields: Partial<FinishSubscription> = {}): FinishSubscription => ({
  id,
  callerAgentId: "agent-caller",
  targetAgentId: "agent-target",
  serverId: null,
  state: "pending",
  createdAt: 1_000,
  afterFinish: null,
  notification: null,
  ...fields
})

const remoteDelivered = subscription("sub-remote", {
  callerAgentId: "agent-ünïcode caller",
  targetAgentId: "agent-other",
  serverId: "server-2",
  state: "accepted",
  createdAt: 1_750_000_000_123,
  notification: "Agent agent-other finished:\nline two with \"quotes\" and emoji 🚀"
})

const localPending = subscription("sub-local", { afterFinish: 3 })

const agent = (agentId: string): AgentRecord => ({
  agentId,
  provider: "claude",
  cwd: "/work/project",
  labels: { team: "core" },
  persistence: null,
  lifecycle: "active",
  createdAt: 1_000,
  lastActivityAt: 1_000,
  closedAt: null
})

/** The store from a built layer. */
const storeOf = (layer: Layer.Layer<FinishStore, FinishStoreError | AgentStoreError>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, FinishStore))

/** Both stores from one built `layerStores`. */
const storesOf = (filename: string) =>
  Effect.map(Layer.build(SqliteDatabase.layerStores(filename)), (context) => ({
    agents: Context.get(context, AgentStore),
    finishes: Context.get(context, FinishStore)
  }))

/** The SQLite finish store on `filename`, over its own database layer. */
const sqliteLayer = (filename: string) =>
  SqlFinishStore.layerFromClient.pipe(Layer.provide(SqliteDatabase.layer(filename)))

/** A plain SQL connection to the store's file, beside the store's own. */
const withSql = <A, E>(filename: string, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.provide(effect, SqliteClient.layer({ filename }))

// --- the same behaviour from both layers ------------------------------------------

interface Backend {
  readonly name: string
  readonly layer: Effect.Effect<Layer.Layer<FinishStore, FinishStoreError | AgentStoreError>, never, Scope.Scope>
}

const backends: ReadonlyArray<Backend> = [
  {
    name: "SqlFinishStore",
    // A nested path also checks that the database layer creates missing parent directories.
    layer: Effect.map(tempDir, (dir) => sqliteLayer(path.join(dir, "state", "nested", "quiesce.db")))
  },
  {
    name: "SqlFinishStore on PostgreSQL",
    layer: Effect.sync(() => SqlFinishStore.layerFromClient.pipe(Layer.provide(PostgresDatabase.layer(postgres.database("finishes")))))
  },
  { name: "FinishStoreMemory", layer: Effect.succeed(FinishStoreMemory.layer) }
]

for (const backend of backends) {
  describe(backend.name, () => {
    const store = Effect.flatMap(backend.layer, storeOf)

    it.effect("round-trips subscriptions with and without server id and notification; remove deletes", () =>
      Effect.gen(function*() {
        const finishes = yield* store
        yield* finishes.put(remoteDelivered)
        yield* finishes.put(localPending)
        assert.deepStrictEqual(yield* finishes.list, [localPending, remoteDelivered])

        yield* finishes.remove(localPending.id)
        assert.deepStrictEqual(yield* finishes.list, [remoteDelivered])
        yield* finishes.remove(remoteDelivered.id)
        assert.deepStrictEqual(yield* finishes.list, [])
      }))

    it.effect("put replaces the subscription with the same id", () =>
      Effect.gen(function*() {
        const finishes = yield* store
        yield* finishes.put(localPending)
        const accepted = subscription(localPending.id, {
          state: "accepted",
          serverId: "server-9",
          notification: "done",
          createdAt: 5_000
        })
        yield* finishes.put(accepted)
        assert.deepStrictEqual(yield* finishes.list, [accepted])
        // And back to nulls: a replacement clears columns too.
        yield* finishes.put(localPending)
        assert.deepStrictEqual(yield* finishes.list, [localPending])
      }))

    it.effect("claims a notification once: only while the record exists and has none", () =>
      Effect.gen(function*() {
        const finishes = yield* store
        yield* finishes.put(localPending)
        const claims = yield* Effect.forEach(["first", "second", "third"], (text) => finishes.claimNotification(localPending.id, text), {
          concurrency: "unbounded"
        })
        assert.strictEqual(claims.filter(Boolean).length, 1)
        const saved = (yield* finishes.list)[0]?.notification
        assert.strictEqual(saved, ["first", "second", "third"][claims.indexOf(true)])
        yield* finishes.remove(localPending.id)
        assert.isFalse(yield* finishes.claimNotification(localPending.id, "late"))
        assert.deepStrictEqual(yield* finishes.list, [])
      }))

    it.effect("removing a missing id succeeds and changes nothing", () =>
      Effect.gen(function*() {
        const finishes = yield* store
        yield* finishes.remove("missing")
        yield* finishes.put(localPending)
        yield* finishes.remove("missing")
        assert.deepStrictEqual(yield* finishes.list, [localPending])
      }))

    it.effect("lists oldest first, then by id", () =>
      Effect.gen(function*() {
        const finishes = yield* store
        const c = subscription("c", { createdAt: 2_000 })
        const a = subscription("a", { createdAt: 3_000 })
        const b = subscription("b", { createdAt: 2_000 })
        const d = subscription("d", { createdAt: 1_000 })
        for (const s of [c, a, b, d]) yield* finishes.put(s)
        assert.deepStrictEqual(yield* finishes.list, [d, b, c, a])
      }))
  })
}

// --- SQLite only --------------------------------------------------------------------

describe("SqlFinishStore file", () => {
  it.effect("subscriptions survive closing and reopening the file; migrations run once", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "quiesce.db")
      const layer = sqliteLayer(filename)

      yield* Effect.scoped(Effect.gen(function*() {
        const finishes = yield* storeOf(layer)
        yield* finishes.put(remoteDelivered)
        yield* finishes.put(localPending)
        yield* finishes.put(subscription("gone"))
        yield* finishes.remove("gone")
      }))

      yield* Effect.scoped(Effect.gen(function*() {
        const finishes = yield* storeOf(layer)
        assert.deepStrictEqual(yield* finishes.list, [localPending, remoteDelivered])
        yield* finishes.put(subscription("sub-another"))
      }))

      // A third open still works and sees every write (equal createdAt: ordered by id).
      yield* Effect.scoped(Effect.gen(function*() {
        const finishes = yield* storeOf(layer)
        assert.deepStrictEqual(
          (yield* finishes.list).map((s) => s.id),
          ["sub-another", localPending.id, remoteDelivered.id]
        )
      }))

      const migrations = yield* withSql(
        filename,
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ migration_id: number; name: string }>`SELECT migration_id, name FROM finish_store_migrations`
        )
      )
      assert.deepStrictEqual(migrations.map((m) => [m.migration_id, m.name]), [[1, "create_finish_subscriptions"], [2, "add_after_finish"]])
    }))

  interface Corruption {
    readonly kind: string
    readonly column: string
    readonly value: string | Uint8Array
  }
  const corruptions: ReadonlyArray<Corruption> = [
    { kind: "an unknown state", column: "state", value: "finished-ish" },
    { kind: "a binary server id", column: "server_id", value: new Uint8Array([1, 2, 3]) },
    { kind: "a created_at that is not a number", column: "created_at", value: "yesterday" }
  ]

  for (const corruption of corruptions) {
    it.effect(`a row with ${corruption.kind} fails list with an error naming the subscription`, () =>
      Effect.gen(function*() {
        const filename = path.join(yield* tempDir, "quiesce.db")
        const finishes = yield* storeOf(sqliteLayer(filename))
        yield* finishes.put(subscription("good", { createdAt: 1 }))
        yield* finishes.put(subscription("broken", { createdAt: 2 }))
        yield* withSql(
          filename,
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql`UPDATE finish_subscriptions SET ${sql(corruption.column)} = ${corruption.value}
                WHERE id = ${"broken"}`
          )
        )

        const listError = yield* Effect.flip(finishes.list)
        assert.strictEqual(listError._tag, "FinishStoreError")
        assert.strictEqual(listError.operation, "list")
        assert.include(listError.message, "broken")

        // Removing the damaged row repairs the store.
        yield* finishes.remove("broken")
        assert.deepStrictEqual(yield* finishes.list, [subscription("good", { createdAt: 1 })])
      }))
  }

  it.effect("maps SQL failures to FinishStoreError with the operation and id", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "quiesce.db")
      const finishes = yield* storeOf(sqliteLayer(filename))
      yield* withSql(filename, Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DROP TABLE finish_subscriptions`))

      const putError = yield* Effect.flip(finishes.put(localPending))
      assert.strictEqual(putError.operation, "put")
      assert.include(putError.message, localPending.id)
      assert.include(putError.message, "no such table")
      const removeError = yield* Effect.flip(finishes.remove("x"))
      assert.strictEqual(removeError.operation, "remove")
      assert.include(removeError.message, "x")
      const listError = yield* Effect.flip(finishes.list)
      assert.strictEqual(listError.operation, "list")
    }))

  it.effect("fails to open with operation \"open\" when the file is not a database", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "quiesce.db")
      fs.writeFileSync(filename, "this is not a SQLite database, just some text that is long enough ".repeat(20))
      const error = yield* Effect.flip(storeOf(sqliteLayer(filename)))
      assert.strictEqual(error.operation, "open")
      assert.include(error.message, filename)
      const storesError = yield* Effect.flip(Effect.scoped(storesOf(filename)))
      assert.strictEqual(storesError.operation, "open")
    }))

  it.effect("layerStores keeps agents and finish subscriptions in one database file", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "state", "quiesce.db")

      yield* Effect.scoped(Effect.gen(function*() {
        const { agents, finishes } = yield* storesOf(filename)
        yield* agents.put(agent("agent-target"))
        yield* finishes.put(remoteDelivered)
        yield* finishes.put(localPending)
      }))

      yield* Effect.scoped(Effect.gen(function*() {
        const { agents, finishes } = yield* storesOf(filename)
        assert.deepStrictEqual(yield* agents.list, [agent("agent-target")])
        assert.deepStrictEqual(Option.getOrUndefined(yield* agents.get("agent-target")), agent("agent-target"))
        assert.deepStrictEqual(yield* finishes.list, [localPending, remoteDelivered])
      }))

      // Only the one file exists beside its WAL companions, and it holds every table.
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
        "finish_subscriptions"
      ])
    }))
})
