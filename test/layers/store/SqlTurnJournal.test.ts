import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { TurnRecord } from "../../../src/domain/turn.ts"
import * as PostgresDatabase from "../../../src/layers/store/PostgresDatabase.ts"
import * as SqliteClient from "../../../src/layers/store/SqliteClient.ts"
import * as SqliteDatabase from "../../../src/layers/store/SqliteDatabase.ts"
import * as SqlTurnJournal from "../../../src/layers/store/SqlTurnJournal.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"
import { until } from "../../support/daemonProcess.ts"
import { usePostgres } from "../../support/usePostgres.ts"

const postgres = usePostgres()

const tempFile = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "quiesce-journal-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir) => path.join(dir, "state.sqlite")))

const turn = (turnId: string, fields: Partial<TurnRecord> = {}): TurnRecord => ({
  turnId,
  agentId: "agent-1",
  clientMessageId: null,
  text: "echo \"hi\" 🚀\nsecond line",
  state: "accepted",
  disposition: null,
  joinedTurnId: null,
  resumed: false,
  reply: null,
  error: null,
  acceptedAt: 1_000,
  dispatchedAt: null,
  endedAt: null,
  ...fields
})

/** A journal on its own connection to `file`. */
const sqliteJournal = (file: string) =>
  Effect.map(
    Layer.build(SqlTurnJournal.layerFromClient.pipe(Layer.provide(SqliteClient.layer({ filename: file })))),
    (context) => Context.get(context, TurnJournal)
  )

/** A journal on its own pool to the PostgreSQL database at `url`. */
const postgresJournal = (url: string) =>
  Effect.map(
    Layer.build(SqlTurnJournal.layerFromClient.pipe(Layer.provide(PostgresDatabase.layer(url)))),
    (context) => Context.get(context, TurnJournal)
  )

const journals = {
  sqlite: Effect.flatMap(tempFile, sqliteJournal),
  postgres: Effect.suspend(() => postgresJournal(postgres.database("journal"))),
  memory: TurnJournalMemory.make
}

for (const [name, make] of Object.entries(journals)) {
  describe(`TurnJournal (${name})`, () => {
    it.effect("claims a turn only while it is accepted: once, and never one that runs or ended", () =>
      Effect.gen(function*() {
        const journal = yield* make
        yield* journal.accept({ record: turn("turn-claimed") })
        const running = turn("turn-claimed", { state: "running", disposition: "turn" })
        assert.isTrue(yield* journal.claim(running))
        assert.isFalse(yield* journal.claim(running))
        assert.deepStrictEqual(yield* journal.get("agent-1", "turn-claimed"), Option.some(running))
        yield* journal.update({ ...running, state: "completed", endedAt: 2_000 })
        assert.isFalse(yield* journal.claim(running))
        assert.strictEqual(Option.getOrThrow(yield* journal.get("agent-1", "turn-claimed")).state, "completed")
        const missing = yield* Effect.flip(journal.claim(turn("turn-never")))
        assert.strictEqual(missing._tag, "AgentStoreError")
      }))

    it.effect("journals each agent's finishes: positions count from 1, the newest outcome is kept, a delete keeps the count", () =>
      Effect.gen(function*() {
        const journal = yield* make
        assert.deepStrictEqual(yield* journal.lastFinish("agent-1"), Option.none())
        assert.strictEqual(yield* journal.recordFinish("agent-1", { kind: "finished", lastReply: "one" }), 1)
        assert.strictEqual(yield* journal.recordFinish("agent-1", { kind: "needs-permission", lastReply: null }), 2)
        assert.strictEqual(yield* journal.recordFinish("agent-2", { kind: "errored", lastReply: "other" }), 1)
        assert.deepStrictEqual(
          yield* journal.lastFinish("agent-1"),
          Option.some({ position: 2, outcome: { kind: "needs-permission", lastReply: null } })
        )
        yield* journal.removeAgent("agent-1")
        assert.strictEqual(yield* journal.recordFinish("agent-1", { kind: "closed", lastReply: null }), 3)
        assert.deepStrictEqual(
          yield* journal.lastFinish("agent-2"),
          Option.some({ position: 1, outcome: { kind: "errored", lastReply: "other" } })
        )
      }))

    it.effect("accepts a client message id once; the repeat finds the first record", () =>
      Effect.gen(function*() {
        const journal = yield* make
        const first = yield* journal.accept({ record: turn("turn-1", { clientMessageId: "m-1" }) })
        assert.strictEqual(first._tag, "Accepted")
        const again = yield* journal.accept({ record: turn("turn-2", { clientMessageId: "m-1", text: "other" }) })
        assert.deepStrictEqual(again, { _tag: "Existing", record: turn("turn-1", { clientMessageId: "m-1" }) })
        // The same id for another agent is another prompt; no id at all is never a repeat.
        assert.strictEqual((yield* journal.accept({ record: turn("turn-3", { agentId: "agent-2", clientMessageId: "m-1" }) }))._tag, "Accepted")
        assert.strictEqual((yield* journal.accept({ record: turn("turn-4") }))._tag, "Accepted")
        assert.strictEqual((yield* journal.accept({ record: turn("turn-5") }))._tag, "Accepted")
        assert.isTrue(Option.isNone(yield* journal.get("agent-1", "turn-2")))
        assert.isTrue(Option.isNone(yield* journal.get("agent-2", "turn-1")), "a turn is read through its own agent")
      }))

    it.effect("updates state, reply, error and times; lists what is unfinished in acceptance order", () =>
      Effect.gen(function*() {
        const journal = yield* make
        for (const id of ["turn-a", "turn-b", "turn-c"]) yield* journal.accept({ record: turn(id) })
        yield* journal.update(turn("turn-a", { state: "running", disposition: "turn", resumed: true, dispatchedAt: 2_000 }))
        const ended = turn("turn-b", {
          state: "failed",
          disposition: "turn",
          error: { _tag: "ProviderFailed", message: "exit 3 \"quoted\"" },
          dispatchedAt: 2_000,
          endedAt: 3_000
        })
        yield* journal.update(ended)
        assert.deepStrictEqual(Option.getOrThrow(yield* journal.get("agent-1", "turn-b")), ended)
        assert.deepStrictEqual((yield* journal.unfinished).map((record) => [record.turnId, record.state]), [
          ["turn-a", "running"],
          ["turn-c", "accepted"]
        ])
      }))

    it.effect("lists one agent's unfinished turns in acceptance order, none of another agent's", () =>
      Effect.gen(function*() {
        const journal = yield* make
        yield* journal.accept({ record: turn("turn-a") })
        yield* journal.accept({ record: turn("turn-other", { agentId: "agent-2" }) })
        yield* journal.accept({ record: turn("turn-b") })
        yield* journal.accept({ record: turn("turn-ended", { state: "completed", endedAt: 2_000 }) })
        yield* journal.update(turn("turn-b", { state: "running", dispatchedAt: 2_000 }))
        assert.deepStrictEqual((yield* journal.unfinishedOf("agent-1")).map((record) => record.turnId), ["turn-a", "turn-b"])
        assert.deepStrictEqual((yield* journal.unfinishedOf("agent-2")).map((record) => record.turnId), ["turn-other"])
        assert.deepStrictEqual(yield* journal.unfinishedOf("agent-3"), [])
      }))

    it.effect("finds the turn that carried a delivered message, and the newest when it was sent again", () =>
      Effect.gen(function*() {
        const journal = yield* make
        yield* journal.accept({ record: turn("turn-1", { clientMessageId: "batch-1" }), messageIds: ["msg-a", "msg-b"] })
        assert.strictEqual(Option.getOrThrow(yield* journal.byMessageId("agent-1", "msg-b")).turnId, "turn-1")
        assert.isTrue(Option.isNone(yield* journal.byMessageId("agent-2", "msg-a")), "message ids are per recipient")
        yield* journal.accept({ record: turn("turn-2", { clientMessageId: "batch-2" }), messageIds: ["msg-a"] })
        assert.strictEqual(Option.getOrThrow(yield* journal.byMessageId("agent-1", "msg-a")).turnId, "turn-2")
        assert.strictEqual(Option.getOrThrow(yield* journal.byMessageId("agent-1", "msg-b")).turnId, "turn-1")
      }))

    it.effect("prunes final turns by age and by count per agent, never unfinished ones", () =>
      Effect.gen(function*() {
        const journal = yield* make
        const final = (id: string, agentId: string, endedAt: number) =>
          turn(id, { agentId, clientMessageId: id, state: "completed", dispatchedAt: endedAt, endedAt })
        for (const [id, agentId, endedAt] of [
          ["old", "agent-1", 10],
          ["a1", "agent-1", 100],
          ["a2", "agent-1", 200],
          ["a3", "agent-1", 300],
          ["b1", "agent-2", 100]
        ] as const) {
          yield* journal.accept({ record: final(id, agentId, endedAt), messageIds: [`msg-${id}`] })
        }
        yield* journal.accept({ record: turn("waiting", { acceptedAt: 0 }) })
        assert.strictEqual(yield* journal.prune(50, 2), 2)
        const left = (agentId: string, ids: ReadonlyArray<string>) =>
          Effect.forEach(ids, (id) => Effect.map(journal.byClientMessageId(agentId, id), Option.isSome))
        assert.deepStrictEqual(yield* left("agent-1", ["old", "a1", "a2", "a3"]), [false, false, true, true])
        assert.deepStrictEqual(yield* left("agent-2", ["b1"]), [true])
        assert.isTrue(Option.isSome(yield* journal.get("agent-1", "waiting")))
        assert.isTrue(Option.isNone(yield* journal.byMessageId("agent-1", "msg-a1")), "its messages go with it")
      }))

    it.effect("lists an agent's recent records newest accepted first, at most `limit`, ties by acceptance order", () =>
      Effect.gen(function*() {
        const journal = yield* make
        for (const [id, agentId, acceptedAt] of [
          ["t1", "agent-1", 100],
          ["t2", "agent-1", 300],
          ["other", "agent-2", 400],
          ["t3", "agent-1", 200],
          ["t4", "agent-1", 300]
        ] as const) {
          yield* journal.accept({ record: turn(id, { agentId, acceptedAt }) })
        }
        yield* journal.update(turn("t3", { acceptedAt: 200, state: "completed", reply: "done", dispatchedAt: 250, endedAt: 260 }))
        const ids = (records: ReadonlyArray<TurnRecord>) => records.map((record) => record.turnId)
        assert.deepStrictEqual(ids(yield* journal.recent("agent-1", 10)), ["t4", "t2", "t3", "t1"])
        assert.deepStrictEqual(ids(yield* journal.recent("agent-1", 2)), ["t4", "t2"])
        const [, , third] = yield* journal.recent("agent-1", 3)
        assert.deepStrictEqual(third, turn("t3", { acceptedAt: 200, state: "completed", reply: "done", dispatchedAt: 250, endedAt: 260 }))
        assert.deepStrictEqual(ids(yield* journal.recent("agent-2", 10)), ["other"])
        assert.deepStrictEqual(yield* journal.recent("agent-3", 10), [])
      }))
  })
}

/** 40 accepts of one client id at once, alternating between two journals: one is accepted, every other finds it. */
const raceForOneClientId = (left: TurnJournal["Service"], right: TurnJournal["Service"]) =>
  Effect.gen(function*() {
      const outcomes = yield* Effect.forEach(
        Array.from({ length: 40 }, (_, i) => i),
        (i) => (i % 2 === 0 ? left : right).accept({ record: turn(`turn-${i}`, { clientMessageId: "contested" }) }),
        { concurrency: "unbounded" }
      )
      const accepted = outcomes.filter((outcome) => outcome._tag === "Accepted")
      assert.strictEqual(accepted.length, 1)
      const winner = accepted[0]!.record.turnId
      assert.isTrue(outcomes.every((outcome) => outcome.record.turnId === winner))
  })

describe("TurnJournal (SQLite file)", () => {
  it.effect("two connections racing to accept one client id: exactly one wins, the other finds it", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const [left, right] = yield* Effect.all([sqliteJournal(file), sqliteJournal(file)])
      yield* raceForOneClientId(left, right)
    }))

  it.effect("two pools racing to accept one client id on PostgreSQL: exactly one wins, the other finds it", () =>
    Effect.gen(function*() {
      const url = postgres.database("race")
      const [left, right] = yield* Effect.all([postgresJournal(url), postgresJournal(url)])
      yield* raceForOneClientId(left, right)
    }))

  it.effect("two pools recording finishes of one agent at once on PostgreSQL get distinct positions", () =>
    Effect.gen(function*() {
      const url = postgres.database("finishes")
      const [left, right] = yield* Effect.all([postgresJournal(url), postgresJournal(url)])
      const positions = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) => (i % 2 === 0 ? left : right).recordFinish("agent-1", { kind: "finished", lastReply: `${i}` }),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual([...positions].sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i + 1))
      assert.strictEqual(Option.getOrThrow(yield* left.lastFinish("agent-1")).position, 20)
    }))

  it.effect("records survive reopening the file, beside the other stores", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      yield* Effect.scoped(Effect.gen(function*() {
        const journal = Context.get(yield* Layer.build(SqliteDatabase.layerStores(file)), TurnJournal)
        yield* journal.accept({ record: turn("turn-kept", { clientMessageId: "kept" }), messageIds: ["msg-1"] })
      }))
      const journal = Context.get(yield* Layer.build(SqliteDatabase.layerStores(file)), TurnJournal)
      assert.strictEqual(Option.getOrThrow(yield* journal.byClientMessageId("agent-1", "kept")).turnId, "turn-kept")
      assert.strictEqual(Option.getOrThrow(yield* journal.byMessageId("agent-1", "msg-1")).turnId, "turn-kept")
    }))

  it.effect("a row that no longer decodes fails the read with an error naming the turn", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const journal = yield* sqliteJournal(file)
      yield* journal.accept({ record: turn("turn-bad") })
      const { DatabaseSync } = yield* Effect.promise(() => import("node:sqlite"))
      const raw = new DatabaseSync(file)
      raw.exec("UPDATE turns SET state = 'exploded' WHERE turn_id = 'turn-bad'")
      raw.close()
      const error = yield* Effect.flip(journal.unfinished.pipe(Effect.andThen(journal.get("agent-1", "turn-bad"))))
      assert.strictEqual(error._tag, "AgentStoreError")
      assert.include(error.message, "turn-bad")
    }))
})

describe("TurnJournal (PostgreSQL, beside another client's transactions)", () => {
  it.live("a deadlock with another client's transaction (SQLSTATE 40P01) is run again: the journal's update succeeds", () =>
    Effect.gen(function*() {
      const url = postgres.database("deadlock")
      const journal = yield* postgresJournal(url)
      // Another runner's pool, on the same database.
      const other = Context.get(yield* Layer.build(PostgresDatabase.layer(url)), SqlClient.SqlClient)
      yield* journal.accept({ record: turn("turn-x") })
      yield* journal.accept({ record: turn("turn-y") })
      const holdsX = yield* Deferred.make<void>()
      const journalWaits = yield* Deferred.make<void>()
      // It locks turn-x, then turn-y; the journal's group locks turn-y, then waits for turn-x.
      const otherTransaction = yield* Effect.gen(function*() {
        // PostgreSQL then breaks the deadlock in the journal's transaction, which waited first (after 1 s).
        yield* other`SET LOCAL deadlock_timeout = '30s'`
        yield* other`UPDATE turns SET reply = 'other' WHERE turn_id = 'turn-x'`
        yield* Deferred.succeed(holdsX, undefined)
        yield* Deferred.await(journalWaits)
        yield* other`UPDATE turns SET reply = 'other' WHERE turn_id = 'turn-y'`
      }).pipe(other.withTransaction, Effect.forkChild)
      yield* Deferred.await(holdsX)
      // Submitted together: one group transaction, turn-y first.
      const writes = yield* Effect.all([
        journal.update(turn("turn-y", { reply: "journal" })),
        journal.update(turn("turn-x", { reply: "journal" }))
      ], { concurrency: "unbounded" }).pipe(Effect.forkChild)
      /** Polls a one-row query (with a bound) until its column `value` is `expected`. */
      const untilValue = (query: Effect.Effect<ReadonlyArray<{ readonly [column: string]: unknown }>, unknown>, expected: number, what: string) =>
        Effect.promise(() => until(async () => (await Effect.runPromise(query))[0]?.value === expected, what, 10_000))
      yield* untilValue(
        other`SELECT count(*)::int AS value FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`,
        1,
        "the journal's transaction waits for the other's lock"
      )
      yield* Deferred.succeed(journalWaits, undefined)
      yield* Fiber.join(writes)
      yield* Fiber.join(otherTransaction)
      // turn-x was written again once the other transaction had committed; turn-y by the journal's first group, then by the other.
      assert.strictEqual(Option.getOrThrow(yield* journal.get("agent-1", "turn-x")).reply, "journal")
      assert.strictEqual(Option.getOrThrow(yield* journal.get("agent-1", "turn-y")).reply, "other")
      // PostgreSQL did detect a deadlock (its statistics are flushed within a second or so).
      yield* untilValue(
        other`SELECT deadlocks::int AS value FROM pg_stat_database WHERE datname = current_database()`,
        1,
        "PostgreSQL counts the deadlock"
      )
    }).pipe(Effect.scoped), 30_000)
})
