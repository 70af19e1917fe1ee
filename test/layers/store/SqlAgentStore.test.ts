import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import type { Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type AgentRecord, parentAgentIdLabel } from "../../../src/domain/agent.ts"
import type { AgentStoreError } from "../../../src/domain/errors.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as PostgresDatabase from "../../../src/layers/store/PostgresDatabase.ts"
import * as SqlAgentStore from "../../../src/layers/store/SqlAgentStore.ts"
import * as SqliteClient from "../../../src/layers/store/SqliteClient.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { usePostgres } from "../../support/usePostgres.ts"

const postgres = usePostgres()

// --- fixtures ----------------------------------------------------------------

/** A fresh directory under the OS temp dir, removed when the test's scope closes. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "quiesce-agent-store-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const record = (agentId: string, fields: Partial<AgentRecord> = {}): AgentRecord => ({
  agentId,
  provider: "claude",
  cwd: "/work/project",
  labels: {},
  persistence: null,
  lifecycle: "active",
  createdAt: 1_000,
  lastActivityAt: 1_000,
  closedAt: null,
  ...fields
})

const closedWithEverything = record("agent-full", {
  provider: "codex",
  cwd: "/home/me/some dir/ünïcode",
  labels: { [parentAgentIdLabel]: "agent-parent", team: "core", "emoji 🚀": "value with \"quotes\"" },
  persistence: {
    provider: "codex",
    sessionId: "session-1",
    data: {
      transcript: "/tmp/transcript.jsonl",
      nested: { list: [1, "two", null, { deep: true, n: 1.5 }], empty: {} },
      count: 42
    }
  },
  lifecycle: "closed",
  createdAt: 1_750_000_000_123,
  lastActivityAt: 1_750_000_100_456,
  closedAt: 1_750_000_200_789,
  release: { reason: "pressure", rssBytes: 123_456_789 }
})

const persistenceWithoutData = record("agent-no-data", {
  persistence: { provider: "claude", sessionId: "session-2" }
})

const nullPersistence = record("agent-null", { labels: { only: "one" } })

/** The store from a built layer. */
const storeOf = (layer: Layer.Layer<AgentStore, AgentStoreError>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, AgentStore))

const getSome = (store: AgentStore["Service"], agentId: string) =>
  Effect.flatMap(store.get(agentId), (found) => {
    assert.isTrue(Option.isSome(found), `expected a record for ${agentId}`)
    return Option.isSome(found) ? Effect.succeed(found.value) : Effect.die(new Error("unreachable"))
  })

/** A plain SQL connection to the store's file, beside the store's own. */
const withSql = <A, E>(filename: string, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.provide(effect, SqliteClient.layer({ filename }))

// --- the same behaviour from both layers ------------------------------------------

interface Backend {
  readonly name: string
  readonly layer: Effect.Effect<Layer.Layer<AgentStore, AgentStoreError>, never, Scope.Scope>
}

const backends: ReadonlyArray<Backend> = [
  {
    name: "SqlAgentStore",
    // A nested path also checks that the layer creates missing parent directories.
    layer: Effect.map(tempDir, (dir) => SqlAgentStore.layer(path.join(dir, "state", "nested", "agents.db")))
  },
  {
    name: "SqlAgentStore on PostgreSQL",
    layer: Effect.sync(() => SqlAgentStore.layerFromClient.pipe(Layer.provide(PostgresDatabase.layer(postgres.database("agents")))))
  },
  { name: "AgentStoreMemory", layer: Effect.succeed(AgentStoreMemory.layer) }
]

for (const backend of backends) {
  describe(backend.name, () => {
    const store = Effect.flatMap(backend.layer, storeOf)

    it.effect("round-trips records with labels, nested persistence data, null persistence and closedAt", () =>
      Effect.gen(function*() {
        const agents = yield* store
        for (const r of [closedWithEverything, persistenceWithoutData, nullPersistence]) {
          yield* agents.put(r)
        }
        for (const r of [closedWithEverything, persistenceWithoutData, nullPersistence]) {
          assert.deepStrictEqual(yield* getSome(agents, r.agentId), r)
        }
        const withoutData = yield* getSome(agents, persistenceWithoutData.agentId)
        assert.isFalse(withoutData.persistence !== null && "data" in withoutData.persistence)
      }))

    it.effect("put replaces the record with the same agent id", () =>
      Effect.gen(function*() {
        const agents = yield* store
        yield* agents.put(closedWithEverything)
        const reopened = record(closedWithEverything.agentId, {
          labels: { team: "other" },
          persistence: { provider: "codex", sessionId: "session-9", data: { resumed: true } },
          lastActivityAt: 1_750_000_300_000
        })
        yield* agents.put(reopened)
        assert.deepStrictEqual(yield* getSome(agents, reopened.agentId), reopened)
        assert.deepStrictEqual(yield* agents.list, [reopened])
      }))

    it.effect("lists oldest first, then by agent id", () =>
      Effect.gen(function*() {
        const agents = yield* store
        const c = record("c", { createdAt: 2_000 })
        const a = record("a", { createdAt: 3_000 })
        const b = record("b", { createdAt: 2_000 })
        const d = record("d", { createdAt: 1_000 })
        for (const r of [c, a, b, d]) yield* agents.put(r)
        assert.deepStrictEqual(yield* agents.list, [d, b, c, a])
      }))

    it.effect("lists nothing and gets none from an empty store", () =>
      Effect.gen(function*() {
        const agents = yield* store
        assert.deepStrictEqual(yield* agents.list, [])
        yield* agents.put(nullPersistence)
        assert.isTrue(Option.isNone(yield* agents.get("missing")))
      }))
  })
}

// --- SQLite only --------------------------------------------------------------------

describe("SqlAgentStore file", () => {
  it.effect("records survive closing and reopening the file; migrations run once", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "agents.db")
      const layer = SqlAgentStore.layer(filename)

      yield* Effect.scoped(Effect.gen(function*() {
        const agents = yield* storeOf(layer)
        yield* agents.put(closedWithEverything)
        yield* agents.put(nullPersistence)
      }))

      yield* Effect.scoped(Effect.gen(function*() {
        const agents = yield* storeOf(layer)
        assert.deepStrictEqual(yield* agents.list, [nullPersistence, closedWithEverything])
        yield* agents.put(persistenceWithoutData)
      }))

      // A third open still works and sees every write (equal createdAt: ordered by id).
      yield* Effect.scoped(Effect.gen(function*() {
        const agents = yield* storeOf(layer)
        assert.deepStrictEqual(
          (yield* agents.list).map((r) => r.agentId),
          [persistenceWithoutData.agentId, nullPersistence.agentId, closedWithEverything.agentId]
        )
      }))

      const migrations = yield* withSql(
        filename,
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ migration_id: number; name: string }>`SELECT migration_id, name FROM agent_store_migrations`
        )
      )
      assert.deepStrictEqual(migrations.map((m) => [m.migration_id, m.name]), [[1, "create_agents"], [2, "agent_release"]])
    }))

  const corruptions: ReadonlyArray<{ readonly kind: string; readonly column: string; readonly value: string }> = [
    { kind: "labels that are not JSON", column: "labels", value: "{not json" },
    { kind: "persistence JSON of the wrong shape", column: "persistence", value: "{\"provider\":1}" },
    { kind: "an unknown lifecycle", column: "lifecycle", value: "zombie" }
  ]

  for (const corruption of corruptions) {
    it.effect(`a row with ${corruption.kind} fails list and get with an error naming the agent`, () =>
      Effect.gen(function*() {
        const filename = path.join(yield* tempDir, "agents.db")
        const agents = yield* storeOf(SqlAgentStore.layer(filename))
        yield* agents.put(record("good", { createdAt: 1 }))
        yield* agents.put(record("broken", { createdAt: 2 }))
        yield* withSql(
          filename,
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql`UPDATE agents SET ${sql(corruption.column)} = ${corruption.value} WHERE agent_id = ${"broken"}`
          )
        )

        const listError = yield* Effect.flip(agents.list)
        assert.strictEqual(listError._tag, "AgentStoreError")
        assert.strictEqual(listError.operation, "list")
        assert.strictEqual(listError.agentId, "broken")
        assert.include(listError.message, "broken")

        const getError = yield* Effect.flip(agents.get("broken"))
        assert.strictEqual(getError.operation, "get")
        assert.strictEqual(getError.agentId, "broken")
        assert.include(getError.message, "broken")

        assert.deepStrictEqual(yield* getSome(agents, "good"), record("good", { createdAt: 1 }))
      }))
  }

  it.effect("maps SQL failures to AgentStoreError with the operation and agent id", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "agents.db")
      const agents = yield* storeOf(SqlAgentStore.layer(filename))
      yield* withSql(filename, Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DROP TABLE agents`))

      const putError = yield* Effect.flip(agents.put(nullPersistence))
      assert.deepInclude(putError, { operation: "put", agentId: nullPersistence.agentId })
      assert.include(putError.message, "no such table")
      const getError = yield* Effect.flip(agents.get("x"))
      assert.deepInclude(getError, { operation: "get", agentId: "x" })
      const listError = yield* Effect.flip(agents.list)
      assert.strictEqual(listError.operation, "list")
      assert.isUndefined(listError.agentId)
    }))

  it.effect("fails to open with operation \"open\" when the file is not a database", () =>
    Effect.gen(function*() {
      const filename = path.join(yield* tempDir, "agents.db")
      fs.writeFileSync(filename, "this is not a SQLite database, just some text that is long enough ".repeat(20))
      const error = yield* Effect.flip(storeOf(SqlAgentStore.layer(filename)))
      assert.strictEqual(error._tag, "AgentStoreError")
      assert.strictEqual(error.operation, "open")
      assert.include(error.message, filename)
    }))

  it.effect("fails to open with operation \"open\" when the directory cannot be created", () =>
    Effect.gen(function*() {
      const blocker = path.join(yield* tempDir, "a-file")
      fs.writeFileSync(blocker, "")
      const error = yield* Effect.flip(storeOf(SqlAgentStore.layer(path.join(blocker, "agents.db"))))
      assert.strictEqual(error.operation, "open")
      assert.include(error.message, "directory")
    }))
})
