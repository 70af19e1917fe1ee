import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import * as PostgresDatabase from "../../../src/layers/store/PostgresDatabase.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { FinishStore } from "../../../src/services/FinishStore.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"
import { freePort } from "../../support/daemonProcess.ts"
import { usePostgres } from "../../support/usePostgres.ts"

const postgres = usePostgres()

const storesOf = (url: string) =>
  Effect.map(Layer.build(PostgresDatabase.layerSharedStores(url)), (context) => ({
    agents: Context.get(context, AgentStore),
    finishes: Context.get(context, FinishStore),
    journal: Context.get(context, TurnJournal)
  }))

describe("PostgresDatabase", () => {
  it.effect("keeps agents, finish subscriptions and turns in one database; a second pool migrates nothing again and reads them", () =>
    Effect.gen(function*() {
      const url = postgres.database("shared")
      yield* Effect.scoped(Effect.gen(function*() {
        const { agents, finishes, journal } = yield* storesOf(url)
        yield* agents.put({
          agentId: "agent-1", provider: "shell", cwd: "/tmp", labels: {}, persistence: null,
          lifecycle: "active", createdAt: 1_750_000_000_123, lastActivityAt: 1_750_000_000_456, closedAt: null
        })
        yield* finishes.put({
          id: "finish-1", callerAgentId: "agent-0", targetAgentId: "agent-1", serverId: null,
          state: "pending", createdAt: 1_750_000_000_789, afterFinish: null, notification: null
        })
        yield* journal.accept({
          record: {
            turnId: "turn-1", agentId: "agent-1", clientMessageId: "m-1", text: "hi", state: "accepted",
            disposition: null, joinedTurnId: null, resumed: false, reply: null, error: null,
            acceptedAt: 1_750_000_001_000, dispatchedAt: null, endedAt: null
          }
        })
      }))
      const { agents, finishes, journal } = yield* storesOf(url)
      assert.strictEqual(Option.getOrThrow(yield* agents.get("agent-1")).lastActivityAt, 1_750_000_000_456)
      assert.deepStrictEqual((yield* finishes.list).map((subscription) => subscription.id), ["finish-1"])
      assert.strictEqual(Option.getOrThrow(yield* journal.byClientMessageId("agent-1", "m-1")).turnId, "turn-1")
    }))

  it.effect("a server that cannot be reached fails the open with the address and without the password", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(freePort)
      const error = yield* Effect.flip(Effect.scoped(storesOf(`postgres://quiesce:secret-word@127.0.0.1:${port}/nowhere`)))
      assert.strictEqual(error._tag, "AgentStoreError")
      assert.strictEqual(error.operation, "open")
      assert.include(error.message, `127.0.0.1:${port}/nowhere`)
      // The driver's own words, not only "Failed to connect".
      assert.include(error.message, "ECONNREFUSED")
      assert.notInclude(error.message, "secret-word")
    }))
})
