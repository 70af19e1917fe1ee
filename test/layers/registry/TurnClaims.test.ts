/**
 * Claims (TurnJournal.claim) on a lone daemon: a turn this process claimed stays its own, even
 * when its write back to `accepted` (the runtime went away during the hand-over) was refused.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { AgentStoreError } from "../../../src/domain/errors.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"
import { harness } from "./harness.ts"

describe("turn claims on one daemon", () => {
  it.effect("a turn handed back to accepted whose write failed is still run, once, when the agent resumes", () =>
    Effect.gen(function*() {
      const claimGate = yield* Deferred.make<void>()
      let gateClaims = false
      let failAccepted = false
      let stored: TurnJournal["Service"] | undefined
      const journal = Layer.effect(TurnJournal, Effect.gen(function*() {
        const inner = yield* TurnJournalMemory.make
        stored = inner
        return TurnJournal.of({
          ...inner,
          claim: (record) => gateClaims ? Effect.andThen(Deferred.await(claimGate), inner.claim(record)) : inner.claim(record),
          update: (record) =>
            failAccepted && record.state === "accepted"
              ? Effect.andThen(
                Effect.sync(() => (failAccepted = false)),
                Effect.fail(new AgentStoreError({ operation: "journal.update", message: "a write failed once" }))
              )
              : inner.update(record)
        })
      }))
      const t = yield* harness({ journal })
      const agent = yield* t.create()
      gateClaims = true
      const prompt = yield* Effect.forkChild(t.registry.prompt(agent.agentId, "hello", { clientMessageId: "m", wait: true }))
      yield* TestClock.adjust("10 millis")
      // The runtime goes away while the turn is being claimed: the turn goes back to accepted, and that write fails.
      const closing = yield* Effect.forkChild(t.registry.close(agent.agentId))
      yield* TestClock.adjust("10 millis")
      failAccepted = true
      gateClaims = false
      yield* Deferred.succeed(claimGate, undefined)
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(closing)
      const receipt = yield* Fiber.join(prompt)
      assert.strictEqual(receipt.state, "completed")
      assert.deepStrictEqual(t.provider.deliveries.map((delivery) => delivery.prompt), ["hello"])
      assert.strictEqual(Option.getOrThrow(yield* stored!.get(agent.agentId, receipt.turnId)).state, "completed")
    }))
})
