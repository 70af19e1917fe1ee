import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import { TestClock } from "effect/testing"
import type { TurnRecord } from "../../../src/domain/turn.ts"
import * as MessageDeliveryLive from "../../../src/layers/delivery/MessageDeliveryLive.ts"
import * as RegistryOperations from "../../../src/layers/registry/registryOperations.ts"
import { MemoryProvider, providerRegistryWith } from "../../../src/testing/MemoryProvider.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { MessageDelivery } from "../../../src/services/MessageDelivery.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"

const setup = Effect.fnUntraced(function*() {
  const provider = new MemoryProvider("codex")
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([AgentStoreMemory.layer, providerRegistryWith(provider)]),
    Layer.provide(RuntimeLedgerMemory.layer),
    Layer.provideMerge(TurnJournalMemory.layer)
  )
  const context = yield* Layer.build(MessageDeliveryLive.layer().pipe(Layer.provideMerge(RegistryOperations.layer), Layer.provideMerge(registryLayer)))
  const registry = Context.get(context, AgentRegistry)
  const delivery = Context.get(context, MessageDelivery)
  const agent = yield* registry.create({ provider: "codex", cwd: "/work" })
  return { provider, registry, delivery, agent, sessionId: agent.persistence!.sessionId }
})

/** What outlives a server: agent records and the turn journal. */
interface Stores {
  readonly agents: AgentStore["Service"]
  readonly journal: TurnJournal["Service"]
  /** Every turn the journal accepted as new (not a repeat of a client message id), in order. */
  readonly accepted: Array<TurnRecord>
}

const makeStores = Effect.gen(function*(): Effect.fn.Return<Stores> {
  const journal = yield* TurnJournalMemory.make
  const accepted: Array<TurnRecord> = []
  return {
    agents: yield* AgentStoreMemory.make,
    accepted,
    journal: TurnJournal.of({
      ...journal,
      accept: (input) =>
        journal.accept(input).pipe(Effect.tap((acceptance) =>
          Effect.sync(() => {
            if (acceptance._tag === "Accepted") accepted.push(acceptance.record)
          })
        ))
    })
  }
})

/** Registry and delivery over the stores, in the current scope: a test stops one and starts the next. */
const server = Effect.fnUntraced(function*(provider: MemoryProvider, stores: Stores) {
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([Layer.succeed(AgentStore, stores.agents), providerRegistryWith(provider)]),
    Layer.provide(RuntimeLedgerMemory.layer),
    Layer.provideMerge(Layer.succeed(TurnJournal, stores.journal))
  )
  const context = yield* Layer.build(MessageDeliveryLive.layer().pipe(Layer.provideMerge(RegistryOperations.layer), Layer.provideMerge(registryLayer)))
  return { registry: Context.get(context, AgentRegistry), delivery: Context.get(context, MessageDelivery) }
})

const carrierOf = (stores: Stores, recipientId: string, messageId: string) =>
  stores.journal.byMessageId(recipientId, messageId).pipe(
    Effect.flatMap((found) =>
      Option.isSome(found) ? Effect.succeed(found.value) : Effect.die(new Error(`no turn carried ${messageId}`))
    )
  )

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

describe("MessageDelivery with message ids (D1, turn journal)", () => {
  it.effect("the layer's own teardown dispatches what is queued, without waiting out the window or the close timeout", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const scope = yield* Scope.make()
      const s = yield* server(provider, stores).pipe(Scope.provide(scope))
      const agent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const ack = yield* s.delivery.enqueue({ recipientId: agent.agentId, text: "last words", id: "m1" })
      // No explicit close: the layer's finalizer is all a host's shutdown runs.
      const closing = yield* Scope.close(scope, Exit.void).pipe(Effect.forkChild({ startImmediately: true }))
      for (let i = 0; i < 100 && closing.pollUnsafe() === undefined; i++) yield* Effect.yieldNow
      const closedAtOnce = closing.pollUnsafe() !== undefined
      // Either way the shutdown ends within its bound.
      yield* TestClock.adjust("30 seconds")
      yield* Fiber.join(closing)
      assert.deepStrictEqual(provider.deliveredTo(agent.persistence!.sessionId), ["last words"])
      assert.isTrue(closedAtOnce, "the shutdown did not wait for an acknowledgement that could never come")
      const receipt = yield* ack
      assert.strictEqual(receipt.disposition, "turn")
      // Recorded with the turn that carried it: a sender that enqueues it again after the restart is answered with that turn.
      assert.strictEqual((yield* carrierOf(stores, agent.agentId, "m1")).turnId, receipt.turnId)
    }))

  it.effect("a teardown after the registry stopped admission fails what is queued at once", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const scope = yield* Scope.make()
      const s = yield* server(provider, stores).pipe(Scope.provide(scope))
      const agent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const ack = yield* s.delivery.enqueue({ recipientId: agent.agentId, text: "too late", id: "m1" })
      // A daemon's API server stops admission first, then the layers close.
      yield* s.registry.stopAdmission
      const closing = yield* Scope.close(scope, Exit.void).pipe(Effect.forkChild({ startImmediately: true }))
      for (let i = 0; i < 100 && closing.pollUnsafe() === undefined; i++) yield* Effect.yieldNow
      const closedAtOnce = closing.pollUnsafe() !== undefined
      yield* TestClock.adjust("30 seconds")
      yield* Fiber.join(closing)
      assert.isTrue(closedAtOnce, "the shutdown did not wait for an acknowledgement that could never come")
      const error = yield* Effect.flip(ack)
      assert.strictEqual(error._tag, "DeliveryFailed")
      assert.deepStrictEqual(provider.deliveredTo(agent.persistence!.sessionId), [])
      assert.deepStrictEqual(stores.accepted, [], "nothing was accepted")
    }))

  it.effect("a message whose turn the journal already has is acknowledged with that turn, not sent again", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const scope = yield* Scope.make()
      const s1 = yield* server(provider, stores).pipe(Scope.provide(scope))
      const agent = yield* s1.registry.create({ provider: "codex", cwd: "/work" })
      const sessionId = agent.persistence!.sessionId
      provider.turnEnd = () => Effect.succeed({ reply: "noted" })
      const first = yield* s1.delivery.enqueue({ recipientId: agent.agentId, text: "once", senderId: "peer", id: "m1" })
      yield* TestClock.adjust("2 seconds")
      const receipt = yield* first
      yield* s1.registry.awaitIdle(agent.agentId)
      yield* Scope.close(scope, Exit.void)
      const resumes = provider.resumes

      // After a restart, the sender (it had not cleared its record) enqueues the message again.
      const s2 = yield* server(provider, stores)
      const again = yield* s2.delivery.enqueue({ recipientId: agent.agentId, text: "once", senderId: "peer", id: "m1" })
      yield* TestClock.adjust("2 seconds")
      const repeat = yield* again
      assert.strictEqual(repeat.turnId, receipt.turnId)
      assert.strictEqual(repeat.state, "completed")
      assert.strictEqual(repeat.output, "noted", "the turn's own receipt, with its reply")
      assert.deepStrictEqual(provider.deliveredTo(sessionId), ["[message from agent peer]\nonce"])
      assert.strictEqual(provider.resumes, resumes, "the released recipient is not woken for it")
      assert.strictEqual(stores.accepted.length, 1)
      assert.isFalse(yield* s2.delivery.hasPending(agent.agentId))
    }))

  it.effect("a message enqueued twice in one batching window is sent once; both are acknowledged with its turn", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const s = yield* server(provider, stores)
      const agent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const send = () => s.delivery.enqueue({ recipientId: agent.agentId, text: "only once", senderId: "a", id: "m1" })
      const acks = [yield* send(), yield* send()]
      yield* TestClock.adjust("2 seconds")
      const [first, second] = yield* Effect.all(acks)
      assert.strictEqual(first!.turnId, second!.turnId)
      assert.deepStrictEqual(provider.deliveredTo(agent.persistence!.sessionId), ["[message from agent a]\nonly once"])
    }))

  it.effect("messages with ids batched together are recorded with one turn, and each is found again", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const s = yield* server(provider, stores)
      const agent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const sessionId = agent.persistence!.sessionId
      const send = (text: string, senderId: string, id: string) =>
        s.delivery.enqueue({ recipientId: agent.agentId, text, senderId, id })
      const acks = [yield* send("a1", "a", "m1"), yield* send("b1", "b", "m2")]
      yield* TestClock.adjust("2 seconds")
      const [first, second] = yield* Effect.all(acks)
      assert.strictEqual(first!.turnId, second!.turnId)
      yield* s.registry.awaitIdle(agent.agentId)
      const carriers = [yield* carrierOf(stores, agent.agentId, "m1"), yield* carrierOf(stores, agent.agentId, "m2")]
      assert.deepStrictEqual(carriers.map((record) => record.turnId), [first!.turnId, first!.turnId])
      assert.strictEqual(carriers[0]!.text, "[message from agent a]\na1\n\n[message from agent b]\nb1")

      // Each is found again, alone or together with the other.
      const alone = yield* send("b1", "b", "m2")
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* alone).turnId, first!.turnId)
      const together = [yield* send("a1", "a", "m1"), yield* send("b1", "b", "m2")]
      yield* TestClock.adjust("2 seconds")
      assert.deepStrictEqual((yield* Effect.all(together)).map((receipt) => receipt.turnId), [first!.turnId, first!.turnId])
      assert.strictEqual(provider.deliveredTo(sessionId).length, 1)
      assert.strictEqual(stores.accepted.length, 1)
    }))

  it.effect("a message whose turn the daemon stopped while handing it over is sent again, once", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const scope = yield* Scope.make()
      const s1 = yield* server(provider, stores).pipe(Scope.provide(scope))
      const agent = yield* s1.registry.create({ provider: "codex", cwd: "/work" })
      const sessionId = agent.persistence!.sessionId
      // The provider never takes the prompt before the stop.
      provider.dispatchGate = Effect.never
      yield* s1.delivery.enqueue({ recipientId: agent.agentId, text: "are you there", senderId: "peer", id: "m1" })
      yield* TestClock.adjust("2 seconds")
      const handingOver = yield* carrierOf(stores, agent.agentId, "m1")
      assert.strictEqual(handingOver.state, "running")
      yield* Scope.close(scope, Exit.void)

      provider.dispatchGate = Effect.void
      const s2 = yield* server(provider, stores)
      const cut = yield* carrierOf(stores, agent.agentId, "m1")
      assert.deepStrictEqual([cut.turnId, cut.state, cut.error?._tag], [handingOver.turnId, "interrupted", "DaemonStopped"])
      assert.deepStrictEqual(provider.deliveredTo(sessionId), [])
      const again = yield* s2.delivery.enqueue({ recipientId: agent.agentId, text: "are you there", senderId: "peer", id: "m1" })
      yield* TestClock.adjust("2 seconds")
      const receipt = yield* again
      assert.notStrictEqual(receipt.turnId, handingOver.turnId, "a turn of its own")
      assert.strictEqual(receipt.disposition, "turn")
      assert.deepStrictEqual(provider.deliveredTo(sessionId), ["[message from agent peer]\nare you there"])
      yield* s2.registry.awaitIdle(agent.agentId)
      const carrier = yield* carrierOf(stores, agent.agentId, "m1")
      assert.deepStrictEqual([carrier.turnId, carrier.state], [receipt.turnId, "completed"], "the newest turn carries it now")
      assert.strictEqual(stores.accepted.length, 2)
    }))

  it.effect("a turn start that fails before reaching the provider is retried as the same turn", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const s = yield* server(provider, stores)
      const agent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      provider.failingTurnStarts = 1
      const ack = yield* s.delivery.enqueue({ recipientId: agent.agentId, text: "retry me", id: "m1" })
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(stores.accepted.length, 1)
      const failed = yield* carrierOf(stores, agent.agentId, "m1")
      assert.deepStrictEqual([failed.state, failed.dispatchedAt], ["failed", null], "the first attempt never reached it")
      yield* TestClock.adjust("1 second")
      const receipt = yield* ack
      yield* s.registry.awaitIdle(agent.agentId)
      assert.strictEqual(stores.accepted.length, 1, "one turn record, not two")
      assert.strictEqual(receipt.turnId, stores.accepted[0]!.turnId)
      const record = yield* s.registry.turn(agent.agentId, receipt.turnId)
      assert.strictEqual(record.state, "completed")
      assert.match(record.clientMessageId ?? "", /^delivery-/)
      assert.deepStrictEqual(provider.deliveredTo(agent.persistence!.sessionId), ["retry me"])
    }))

  it.effect("a resume that fails is retried as the same turn", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const s = yield* server(provider, stores)
      const agent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const sessionId = agent.persistence!.sessionId
      yield* s.registry.close(agent.agentId)
      // The provider has lost the session for now: resuming it fails until it is back.
      const transcript = provider.transcripts.get(sessionId)!
      provider.transcripts.delete(sessionId)
      const ack = yield* s.delivery.enqueue({ recipientId: agent.agentId, text: "wake up", id: "m1" })
      yield* TestClock.adjust("2 seconds")
      const failed = yield* carrierOf(stores, agent.agentId, "m1")
      assert.deepStrictEqual([failed.state, failed.dispatchedAt], ["failed", null])
      provider.transcripts.set(sessionId, transcript)
      yield* TestClock.adjust("1 second")
      const receipt = yield* ack
      assert.isTrue(receipt.resumed)
      yield* s.registry.awaitIdle(agent.agentId)
      assert.strictEqual(stores.accepted.length, 1, "one turn record, not two")
      assert.strictEqual(receipt.turnId, failed.turnId)
      assert.strictEqual((yield* s.registry.turn(agent.agentId, receipt.turnId)).state, "completed")
      assert.deepStrictEqual(provider.deliveredTo(sessionId), ["wake up"])
      assert.strictEqual(provider.resumes, 1)
    }))
})
