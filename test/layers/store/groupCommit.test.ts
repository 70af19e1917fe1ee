import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { DatabaseSync } from "node:sqlite"
import * as GroupCommit from "../../../src/layers/store/groupCommit.ts"
import * as SqliteClient from "../../../src/layers/store/SqliteClient.ts"

const database = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "quiesce-group-"))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )
  const file = path.join(dir, "db.sqlite")
  const sql = Context.get(yield* Layer.build(SqliteClient.layer({ filename: file })), SqlClient.SqlClient)
  yield* sql`CREATE TABLE items (id INTEGER PRIMARY KEY)`
  let transactions = 0
  const group = yield* GroupCommit.make((effect) => {
    transactions++
    return sql.withTransaction(effect)
  })
  /** What another connection sees: only what was committed. */
  const committed = () => {
    const other = new DatabaseSync(file, { readOnly: true })
    try {
      return other.prepare("SELECT id FROM items ORDER BY id").all().map((row) => Number(row["id"]))
    } finally {
      other.close()
    }
  }
  return { sql, group, committed, transactions: () => transactions }
})

describe("group commit", () => {
  it.effect("writes submitted together share one transaction, and each is answered once it is durable", () =>
    Effect.gen(function*() {
      const { committed, group, sql, transactions } = yield* database
      const ids = Array.from({ length: 50 }, (_, i) => i + 1)
      const answers = yield* Effect.forEach(ids, (id) =>
        group.submit(sql`INSERT INTO items (id) VALUES (${id})`.pipe(Effect.as(id))), { concurrency: "unbounded" })
      assert.deepStrictEqual(answers, ids)
      assert.deepStrictEqual(committed(), ids)
      assert.isBelow(transactions(), 5, `50 writes in ${transactions()} transactions`)
    }))

  it.effect("a write that fails fails alone; the others in its group commit", () =>
    Effect.gen(function*() {
      const { committed, group, sql } = yield* database
      yield* sql`INSERT INTO items (id) VALUES (7)`
      const exits = yield* Effect.forEach([6, 7, 8], (id) =>
        Effect.exit(group.submit(sql`INSERT INTO items (id) VALUES (${id})`)), { concurrency: "unbounded" })
      assert.deepStrictEqual(exits.map(Exit.isSuccess), [true, false, true])
      assert.deepStrictEqual(committed(), [6, 7, 8])
    }))

  it.effect("a write in a savepoint of its own is undone whole when it fails", () =>
    Effect.gen(function*() {
      const { committed, group, sql } = yield* database
      const both = (first: number, second: number) =>
        Effect.andThen(sql`INSERT INTO items (id) VALUES (${first})`, sql`INSERT INTO items (id) VALUES (${second})`).pipe(
          sql.withTransaction,
          group.submit,
          Effect.exit
        )
      const [kept, undone] = yield* Effect.all([both(1, 2), both(3, 1)], { concurrency: "unbounded" })
      assert.isTrue(Exit.isSuccess(kept))
      assert.isTrue(Exit.isFailure(undone))
      assert.deepStrictEqual(committed(), [1, 2])
    }))

  it.effect("a commit that fails fails every write of its group: none is told it is durable", () =>
    Effect.gen(function*() {
      const { committed, sql } = yield* database
      const group = yield* GroupCommit.make((effect) =>
        sql.withTransaction(Effect.tap(effect, () => sql`INSERT INTO nowhere VALUES (1)`))
      )
      const exits = yield* Effect.forEach([1, 2], (id) => Effect.exit(group.submit(sql`INSERT INTO items (id) VALUES (${id})`)), {
        concurrency: "unbounded"
      })
      assert.isTrue(exits.every(Exit.isFailure))
      assert.deepStrictEqual(committed(), [])
    }))
})
