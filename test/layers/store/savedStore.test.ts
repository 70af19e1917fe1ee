/**
 * A home's saved store read without its daemon: the records a daemon saved, as the API shows them
 * (released), from a real SQLite file opened read-only; never created, written or migrated; and
 * not read at all while a live process holds the home's lock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as fs from "node:fs"
import { DatabaseSync } from "node:sqlite"
import * as os from "node:os"
import * as path from "node:path"
import type { AgentRecord } from "../../../src/domain/agent.ts"
import type { TurnRecord } from "../../../src/domain/turn.ts"
import { databaseFileOf } from "../../../src/layers/host/Home.ts"
import { readSavedStore } from "../../../src/layers/store/savedStore.ts"
import * as SqliteDatabase from "../../../src/layers/store/SqliteDatabase.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"

const tempHome = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "quiesce-saved-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const agent = (agentId: string, fields: Partial<AgentRecord> = {}): AgentRecord => ({
  agentId,
  provider: "shell",
  cwd: "/tmp",
  labels: { team: "web" },
  persistence: { provider: "shell", sessionId: `shell-${agentId}` },
  lifecycle: "closed",
  createdAt: 1_000,
  lastActivityAt: 2_000,
  closedAt: 3_000,
  ...fields
})

const turn = (turnId: string, acceptedAt: number): TurnRecord => ({
  turnId,
  agentId: "agent-a",
  clientMessageId: null,
  text: `echo ${turnId}`,
  state: "completed",
  disposition: "turn",
  joinedTurnId: null,
  resumed: false,
  reply: `${turnId}\n`,
  error: null,
  acceptedAt,
  dispatchedAt: acceptedAt,
  endedAt: acceptedAt + 1
})

/** What a daemon leaves in its home: two agents (one of a provider the config no longer has) and three turns. */
const saveAsDaemon = (home: string) =>
  Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(SqliteDatabase.layerStores(databaseFileOf(home)))
    const store = Context.get(context, AgentStore)
    const journal = Context.get(context, TurnJournal)
    yield* store.put(agent("agent-a"))
    yield* store.put(agent("agent-b", { provider: "gone", labels: {}, persistence: null, createdAt: 1_500 }))
    for (const [id, at] of [["turn-1", 10_000], ["turn-2", 20_000], ["turn-3", 30_000]] as const) {
      yield* journal.accept({ record: turn(id, at) })
    }
  }))

const fingerprint = (home: string) => {
  const file = databaseFileOf(home)
  const stat = fs.statSync(file)
  return { size: stat.size, mtime: stat.mtimeMs, bytes: fs.readFileSync(file).toString("base64") }
}

describe("readSavedStore", () => {
  it.effect("lists, shows and reads the turns of saved agents as the API does, released, without writing", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      yield* saveAsDaemon(home)
      const before = fingerprint(home)

      const { agents, one, turns, single } = yield* readSavedStore(home, (reads) =>
        Effect.all({
          agents: reads.agents,
          one: reads.agent("agent-a"),
          turns: reads.turns("agent-a", 2),
          single: reads.turn("agent-a", "turn-1")
        }))
      assert.deepStrictEqual(agents.map((a) => [a.agentId, a.resident, a.sessionId, a.providerAvailable]), [
        ["agent-a", false, "shell-agent-a", true],
        ["agent-b", false, null, false]
      ])
      assert.deepStrictEqual(one, {
        agentId: "agent-a",
        provider: "shell",
        cwd: "/tmp",
        labels: { team: "web" },
        sessionId: "shell-agent-a",
        resident: false,
        lifecycle: "closed",
        lastActivityAt: new Date(2_000).toISOString(),
        parentAgentId: null,
        pid: null,
        pendingPermissions: [],
        providerAvailable: true,
        // Released at its close; why and what it gave back were not recorded.
        release: { at: new Date(3_000).toISOString(), reason: null, rssBytes: null }
      })
      assert.deepStrictEqual(turns.map((t) => t.turnId), ["turn-3", "turn-2"])
      assert.strictEqual(single.reply, "turn-1\n")
      assert.strictEqual(single.acceptedAt, new Date(10_000).toISOString())
      // Not a byte of the store changed.
      assert.deepStrictEqual(fingerprint(home), before)
    }))

  it.effect("a store an older daemon saved, before the release note column, reads as it is", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      yield* saveAsDaemon(home)
      // As a daemon before migration 2 left it.
      const file = new DatabaseSync(databaseFileOf(home))
      file.exec("ALTER TABLE agents DROP COLUMN release_note")
      file.close()
      const agents = yield* readSavedStore(home, (reads) => reads.agents)
      // Released at its close; why and what it gave back are not known.
      const unknownRelease = { at: new Date(3_000).toISOString(), reason: null, rssBytes: null }
      assert.deepStrictEqual(agents.map((a) => [a.agentId, a.sessionId, a.release]), [
        ["agent-a", "shell-agent-a", unknownRelease],
        ["agent-b", null, unknownRelease]
      ])
    }))

  it.effect("an unknown agent or turn is not found, typed", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      yield* saveAsDaemon(home)
      const agentMissing = yield* Effect.flip(readSavedStore(home, (reads) => reads.agent("agent-x")))
      assert.strictEqual(agentMissing._tag, "AgentNotFound")
      const turnsMissing = yield* Effect.flip(readSavedStore(home, (reads) => reads.turns("agent-x", 5)))
      assert.strictEqual(turnsMissing._tag, "AgentNotFound")
      const turnMissing = yield* Effect.flip(readSavedStore(home, (reads) => reads.turn("agent-a", "turn-x")))
      assert.strictEqual(turnMissing._tag, "TurnNotFound")
    }))

  it.effect("a home without a store has no agents yet, and the read creates nothing", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      const found = yield* readSavedStore(home, (reads) => Effect.map(reads.agents, (agents) => ({ found: reads.found, agents })))
      assert.deepStrictEqual(found, { found: false, agents: [] })
      assert.deepStrictEqual(fs.readdirSync(home), [])
      const missing = path.join(home, "never-made")
      assert.deepStrictEqual(yield* readSavedStore(missing, (reads) => reads.agents), [])
      assert.isFalse(fs.existsSync(missing))
    }))

  it.effect("a live holder of the home's lock is asked instead: the store is not read", () =>
    Effect.gen(function*() {
      const home = yield* tempHome
      yield* saveAsDaemon(home)
      // This process stands for the daemon: alive, and named in the lock.
      fs.writeFileSync(path.join(home, "daemon.lock"), JSON.stringify({ pid: process.pid, startedAt: Date.now() }))
      const error = yield* Effect.flip(readSavedStore(home, (reads) => reads.agents))
      assert.strictEqual(error._tag, "HomeHeld")
      assert.include(error.message, `pid ${process.pid}`)
      // A stale lock (its holder gone) does not stand in the way.
      fs.writeFileSync(path.join(home, "daemon.lock"), JSON.stringify({ pid: 2 ** 22 + 1, startedAt: Date.now() }))
      assert.lengthOf(yield* readSavedStore(home, (reads) => reads.agents), 2)
    }))
})
