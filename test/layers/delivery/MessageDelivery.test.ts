import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import * as MessageDeliveryLive from "../../../src/layers/delivery/MessageDeliveryLive.ts"
import { MemoryProvider, providerRegistryWith } from "../../../src/layers/providers/memory/MemoryProvider.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { MessageDelivery } from "../../../src/services/MessageDelivery.ts"

const setup = Effect.fnUntraced(function*() {
  const provider = new MemoryProvider("codex")
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([AgentStoreMemory.layer, providerRegistryWith(provider)]),
    Layer.provide(RuntimeLedgerMemory.layer),
    Layer.provideMerge(TurnJournalMemory.layer)
  )
  const context = yield* Layer.build(MessageDeliveryLive.layer().pipe(Layer.provideMerge(registryLayer)))
  const registry = Context.get(context, AgentRegistry)
  const delivery = Context.get(context, MessageDelivery)
  const agent = yield* registry.create({ provider: "codex", cwd: "/work" })
  return { provider, registry, delivery, agent, sessionId: agent.persistence!.sessionId }
})

describe("MessageDelivery (D1)", () => {
  it.effect("runtime safety sees queued messages until the provider acknowledges dispatch", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      const release = yield* Deferred.make<void>()
      s.provider.dispatchGate = Deferred.await(release)
      assert.isFalse(yield* s.delivery.hasPending(s.agent.agentId))
      const acknowledged = yield* s.delivery.enqueue({ recipientId: s.agent.agentId, text: "finished", senderId: "child" })
      assert.isTrue(yield* s.delivery.hasPending(s.agent.agentId))
      yield* TestClock.adjust("2 seconds")
      assert.isTrue(yield* s.delivery.hasPending(s.agent.agentId), "dispatching, not yet acknowledged")
      yield* Deferred.succeed(release, undefined)
      const receipt = yield* acknowledged
      assert.strictEqual(receipt.disposition, "turn")
      assert.isFalse(yield* s.delivery.hasPending(s.agent.agentId))
    }))

  it.effect("messages inside the window go out as one prompt, each sender's order kept", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      const send = (text: string, senderId: string) =>
        s.delivery.enqueue({ recipientId: s.agent.agentId, text, senderId })
      const acks = [yield* send("a1", "a"), yield* send("b1", "b")]
      yield* TestClock.adjust("1 second")
      acks.push(yield* send("a2", "a"))
      yield* TestClock.adjust("1 second")
      for (const ack of acks) yield* ack
      assert.deepStrictEqual(s.provider.deliveredTo(s.sessionId), [
        "[message from agent a]\na1\n\n[message from agent b]\nb1\n\n[message from agent a]\na2"
      ])
      const late = yield* send("a3", "a")
      yield* TestClock.adjust("2 seconds")
      yield* late
      assert.strictEqual(s.provider.deliveredTo(s.sessionId).length, 2)
    }))

  it.effect("a released recipient is resumed first and gets the batch once", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      yield* s.registry.close(s.agent.agentId)
      const ack = yield* s.delivery.enqueue({ recipientId: s.agent.agentId, text: "wake up" })
      yield* TestClock.adjust("2 seconds")
      const receipt = yield* ack
      assert.isTrue(receipt.resumed)
      assert.strictEqual(s.provider.resumes, 1)
      assert.deepStrictEqual(s.provider.deliveredTo(s.sessionId), ["wake up"])
    }))

  it.effect("a dispatch that fails for a passing reason is retried with backoff", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      s.provider.failingTurnStarts = 2
      const ack = yield* s.delivery.enqueue({ recipientId: s.agent.agentId, text: "retry me" })
      yield* TestClock.adjust("2 seconds")
      assert.isTrue(yield* s.delivery.hasPending(s.agent.agentId))
      assert.deepStrictEqual(s.provider.deliveredTo(s.sessionId), [])
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(s.provider.deliveredTo(s.sessionId), [], "second attempt fails too")
      yield* TestClock.adjust("2 seconds")
      yield* ack
      assert.deepStrictEqual(s.provider.deliveredTo(s.sessionId), ["retry me"])
      assert.isFalse(yield* s.delivery.hasPending(s.agent.agentId))
    }))

  it.effect("a message to an unknown agent fails for good and stops protecting", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      const ack = yield* s.delivery.enqueue({ recipientId: "nobody", text: "hello" })
      yield* TestClock.adjust("2 seconds")
      const error = yield* Effect.flip(ack)
      assert.strictEqual(error._tag, "DeliveryFailed")
      assert.isFalse(yield* s.delivery.hasPending("nobody"))
    }))

  it.effect("close stops admission, dispatches without waiting for the window and awaits acknowledgements", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      const ack = yield* s.delivery.enqueue({ recipientId: s.agent.agentId, text: "last words" })
      const closing = yield* s.delivery.close.pipe(Effect.forkChild)
      yield* Fiber.join(closing)
      assert.strictEqual((yield* ack).disposition, "turn")
      assert.deepStrictEqual(s.provider.deliveredTo(s.sessionId), ["last words"])
      const late = yield* Effect.flip(s.delivery.enqueue({ recipientId: s.agent.agentId, text: "too late" }))
      assert.strictEqual(late._tag, "DeliveryClosed")
      assert.isFalse(yield* s.delivery.hasPending(s.agent.agentId))
    }))
})
