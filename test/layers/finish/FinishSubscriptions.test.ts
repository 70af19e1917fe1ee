import * as RuntimeCollectorLive from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Schedule, Scope } from "effect"
import { TestClock } from "effect/testing"
import type { FinishOutcome } from "../../../src/domain/finish.ts"
import * as CallerProtectionLive from "../../../src/layers/collector/CallerProtectionLive.ts"
import * as MessageDeliveryLive from "../../../src/layers/delivery/MessageDeliveryLive.ts"
import * as RegistryOperations from "../../../src/layers/registry/registryOperations.ts"
import * as FinishSubscriptionsLive from "../../../src/layers/finish/FinishSubscriptionsLive.ts"
import { MemoryProvider, providerRegistryWith } from "../../../src/testing/MemoryProvider.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as FinishStoreMemory from "../../../src/layers/store/FinishStoreMemory.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"
import { AgentOperations } from "../../../src/services/AgentOperations.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { FinishStore } from "../../../src/services/FinishStore.ts"
import { FinishSubscriptions } from "../../../src/services/FinishSubscriptions.ts"
import { MessageDelivery } from "../../../src/services/MessageDelivery.ts"
import { RemoteFinishes } from "../../../src/services/RemoteFinishes.ts"
import { RuntimeCollector } from "../../../src/services/RuntimeCollector.ts"

const minutes = (n: number) => n * 60_000

/** Remote finishes a test resolves by hand. */
class RemoteStub {
  readonly waits: Array<{ readonly targetAgentId: string; readonly result: Deferred.Deferred<FinishOutcome> }> = []
  readonly layer = Layer.succeed(RemoteFinishes, RemoteFinishes.of({
    awaitFinish: (_serverId, targetAgentId) =>
      Effect.suspend(() => {
        const result = Deferred.makeUnsafe<FinishOutcome>()
        this.waits.push({ targetAgentId, result })
        return Deferred.await(result)
      })
  }))
}

interface Stores {
  readonly agents: AgentStore["Service"]
  readonly finish: FinishStore["Service"]
  readonly journal: TurnJournal["Service"]
}

const makeStores = Effect.gen(function*(): Effect.fn.Return<Stores> {
  return { agents: yield* AgentStoreMemory.make, finish: yield* FinishStoreMemory.make, journal: yield* TurnJournalMemory.make }
})

/** One server: registry, delivery, finish subscriptions, caller protection and a collector. */
const server = Effect.fnUntraced(function*(options: {
  readonly provider: MemoryProvider
  readonly stores: Stores
  readonly remote?: RemoteStub
  readonly deliveryRetry?: Schedule.Schedule<unknown, unknown>
  /** Changes the agent operations the finish subscriptions use (a host that loses a watch, say). */
  readonly operations?: (operations: AgentOperations["Service"]) => AgentOperations["Service"]
}) {
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([Layer.succeed(AgentStore, options.stores.agents), providerRegistryWith(options.provider)]),
    Layer.provide(RuntimeLedgerMemory.layer),
    Layer.provideMerge(Layer.succeed(TurnJournal, options.stores.journal))
  )
  const deliveryLayer = MessageDeliveryLive.layer(
    options.deliveryRetry === undefined ? {} : { retry: options.deliveryRetry }
  )
  const wrap = options.operations
  const finishLayer = FinishSubscriptionsLive.layer().pipe(
    Layer.provide([Layer.succeed(FinishStore, options.stores.finish), (options.remote ?? new RemoteStub()).layer]),
    Layer.provide(wrap === undefined ? Layer.empty : Layer.effect(AgentOperations, Effect.gen(function*() {
      return wrap(yield* AgentOperations)
    })))
  )
  const collectorLayer = RuntimeCollectorLive.layer({ tickInterval: "3650 days" }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, CallerProtectionLive.layer])
  )
  const all = collectorLayer.pipe(
    Layer.provideMerge(finishLayer),
    Layer.provideMerge(deliveryLayer),
    Layer.provideMerge(RegistryOperations.layer),
    Layer.provideMerge(registryLayer)
  )
  const context = yield* Layer.build(all)
  return {
    registry: Context.get(context, AgentRegistry),
    finish: Context.get(context, FinishSubscriptions),
    delivery: Context.get(context, MessageDelivery),
    collector: Context.get(context, RuntimeCollector)
  }
})

describe("FinishSubscriptions (D2)", () => {
  it.effect("remote finish intent protects its caller through registration, observation and delivery", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const remote = new RemoteStub()
      const writing = yield* Deferred.make<void>()
      const gatedStores: Stores = {
        ...stores,
        finish: { ...stores.finish, put: (record) => Deferred.await(writing).pipe(Effect.andThen(stores.finish.put(record))) }
      }
      const s = yield* server({ provider, stores: gatedStores, remote })
      yield* s.finish.recovered
      const parent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const caller = parent.agentId
      yield* TestClock.setTime(minutes(61))

      const registering = yield* s.finish.register({ callerAgentId: caller, targetAgentId: "far", serverId: "remote" }, {
        held: true
      }).pipe(Effect.forkChild({ startImmediately: true }))
      assert.isTrue(yield* s.finish.hasPendingForCaller(caller), "protected from the start of registration")
      yield* Deferred.succeed(writing, undefined)
      const registration = yield* Fiber.join(registering)
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [])
      assert.isTrue(yield* s.finish.hasPendingForCaller(caller))

      yield* registration.accept
      yield* Effect.yieldNow
      assert.strictEqual(remote.waits.length, 1)
      assert.isTrue(yield* s.finish.hasPendingForCaller(caller), "protected while watching")

      const ack = yield* Deferred.make<void>()
      provider.dispatchGate = Deferred.await(ack)
      yield* Deferred.succeed(remote.waits[0]!.result, { kind: "finished", lastReply: "all done" })
      yield* TestClock.adjust("2 seconds")
      assert.isTrue(yield* s.finish.hasPendingForCaller(caller), "protected until delivery is acknowledged")
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [])

      yield* Deferred.succeed(ack, undefined)
      yield* s.registry.awaitIdle(caller)
      for (let i = 0; i < 5 && (yield* s.finish.hasPendingForCaller(caller)); i++) yield* Effect.yieldNow
      assert.isFalse(yield* s.finish.hasPendingForCaller(caller))
      assert.deepStrictEqual(yield* stores.finish.list, [])
      assert.deepStrictEqual(provider.deliveredTo(parent.persistence!.sessionId), [
        "[message from agent far]\n[finish notification] Agent far on server remote finished.\nLast reply:\nall done"
      ])

      yield* TestClock.setTime(minutes(62))
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [])
      yield* TestClock.setTime(minutes(121))
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [], "a full idle period after the acknowledgement")
      yield* TestClock.setTime(minutes(122))
      assert.deepStrictEqual((yield* s.collector.sweep).collected.map((c) => c.agentId), [caller])
    }))

  it.effect("recovery protects every caller until durable intent has loaded, then only real callers", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* server({ provider, stores })
        const parent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
        const child = yield* s.registry.create({ provider: "codex", cwd: "/work" })
        yield* s.finish.register({ callerAgentId: parent.agentId, targetAgentId: child.agentId })
        return { parent: parent.agentId }
      }))
      const loading = yield* Deferred.make<void>()
      const gatedStores: Stores = {
        ...stores,
        finish: { ...stores.finish, list: Deferred.await(loading).pipe(Effect.andThen(stores.finish.list)) }
      }
      const s = yield* server({ provider, stores: gatedStores })
      assert.isTrue(yield* s.finish.hasPendingForCaller(first.parent))
      assert.isTrue(yield* s.finish.hasPendingForCaller("unrelated"), "nobody knows yet who is waiting")
      yield* Deferred.succeed(loading, undefined)
      yield* s.finish.recovered
      assert.isTrue(yield* s.finish.hasPendingForCaller(first.parent))
      assert.isFalse(yield* s.finish.hasPendingForCaller("unrelated"))
    }))

  it.effect("a restart between the target's finish and the acknowledgement delivers exactly once", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const scope = yield* Scope.make()
      const s1 = yield* server({ provider, stores }).pipe(Scope.provide(scope))
      const parent = yield* s1.registry.create({ provider: "codex", cwd: "/work" })
      const child = yield* s1.registry.create({ provider: "codex", cwd: "/work" })
      yield* s1.finish.register({ callerAgentId: parent.agentId, targetAgentId: child.agentId })
      yield* Effect.yieldNow
      yield* s1.registry.prompt(child.agentId, "do the work")
      // The caller's provider never acknowledges before the restart.
      provider.dispatchGate = Effect.never
      yield* s1.registry.awaitIdle(child.agentId)
      yield* TestClock.adjust("2 seconds")
      const saved = yield* stores.finish.list
      assert.strictEqual(saved.length, 1)
      assert.include(saved[0]!.notification ?? "", `Agent ${child.agentId} finished`)
      yield* Scope.close(scope, Exit.void)

      provider.dispatchGate = Effect.void
      const s2 = yield* server({ provider, stores })
      yield* s2.finish.recovered
      yield* TestClock.adjust("2 seconds")
      for (let i = 0; i < 5 && (yield* stores.finish.list).length > 0; i++) yield* Effect.yieldNow
      const delivered = provider.deliveredTo(parent.persistence!.sessionId)
      assert.strictEqual(delivered.length, 1)
      assert.include(delivered[0]!, `Agent ${child.agentId} finished`)
      assert.deepStrictEqual(yield* stores.finish.list, [])
      assert.isFalse(yield* s2.finish.hasPendingForCaller(parent.agentId))
    }))

  /**
   * The caller's provider acknowledged the notification, then the server stopped before the
   * subscription record was removed: the next server finds the notification's turn in the journal
   * and acknowledges it with that turn instead of sending it again.
   */
  const acknowledgedThenStopped = (callerTurn: "ended" | "running") =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      // The first server's removal of the record hangs until its scope closes.
      const removalStarted = yield* Deferred.make<string>()
      const stuckStores: Stores = {
        ...stores,
        finish: {
          ...stores.finish,
          remove: (id) => Deferred.succeed(removalStarted, id).pipe(Effect.andThen(Effect.never))
        }
      }
      const scope = yield* Scope.make()
      const s1 = yield* server({ provider, stores: stuckStores }).pipe(Scope.provide(scope))
      yield* s1.finish.recovered
      const parent = yield* s1.registry.create({ provider: "codex", cwd: "/work" })
      const child = yield* s1.registry.create({ provider: "codex", cwd: "/work" })
      const sessionId = parent.persistence!.sessionId
      const registration = yield* s1.finish.register({ callerAgentId: parent.agentId, targetAgentId: child.agentId })
      yield* Effect.yieldNow
      yield* s1.registry.prompt(child.agentId, "do the work")
      yield* s1.registry.awaitIdle(child.agentId)
      // The child's turn is over; from here on the caller's turns stay open unless it ends them.
      if (callerTurn === "running") provider.turnGate = Effect.never
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(yield* Deferred.await(removalStarted), registration.id, "acknowledged: the record is being removed")
      if (callerTurn === "ended") yield* s1.registry.awaitIdle(parent.agentId)
      assert.strictEqual(provider.deliveredTo(sessionId).length, 1)
      const carried = yield* stores.journal.byMessageId(parent.agentId, `finish-${registration.id}`)
      assert.isTrue(carried._tag === "Some", "the notification's turn names the message")
      if (carried._tag === "Some") assert.strictEqual(carried.value.state, callerTurn === "ended" ? "completed" : "running")
      assert.strictEqual((yield* stores.finish.list).length, 1, "the record outlives the first server")
      yield* Scope.close(scope, Exit.void)
      // A turn the caller's runtime was running when the server stopped ends with the runtime's close.
      const stopped = yield* stores.journal.byMessageId(parent.agentId, `finish-${registration.id}`)
      assert.deepStrictEqual(
        stopped._tag === "Some" ? [stopped.value.state, stopped.value.error?._tag ?? null] : [],
        callerTurn === "ended" ? ["completed", null] : ["interrupted", "RuntimeGone"]
      )
      const resumes = provider.resumes

      provider.turnGate = undefined
      const s2 = yield* server({ provider, stores })
      yield* s2.finish.recovered
      yield* TestClock.adjust("2 seconds")
      for (let i = 0; i < 10 && (yield* stores.finish.list).length > 0; i++) yield* Effect.yieldNow
      assert.deepStrictEqual(yield* stores.finish.list, [], "the record is removed")
      assert.strictEqual(provider.deliveredTo(sessionId).length, 1, "the notification is not delivered a second time")
      assert.strictEqual(provider.resumes, resumes, "the released caller is not woken for it")
      assert.isFalse(yield* s2.finish.hasPendingForCaller(parent.agentId))
    })

  it.effect("a stop after the caller's provider acknowledged the notification (its turn ended) does not deliver it again", () =>
    acknowledgedThenStopped("ended"))

  it.effect("a stop after the caller's provider acknowledged the notification (its turn still running) does not deliver it again", () =>
    acknowledgedThenStopped("running"))

  it.effect("a dispatch failure keeps the record and retries with backoff", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const s = yield* server({ provider, stores, deliveryRetry: Schedule.recurs(0) })
      yield* s.finish.recovered
      const parent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const child = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      yield* s.finish.register({ callerAgentId: parent.agentId, targetAgentId: child.agentId })
      yield* Effect.yieldNow
      yield* s.registry.prompt(child.agentId, "work")
      yield* s.registry.awaitIdle(child.agentId)
      provider.failingTurnStarts = 2
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* stores.finish.list).length, 1, "kept after the first failure")
      yield* TestClock.adjust("1 second")
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* stores.finish.list).length, 1, "kept after the second failure")
      yield* TestClock.adjust("2 seconds")
      yield* TestClock.adjust("2 seconds")
      for (let i = 0; i < 5 && (yield* stores.finish.list).length > 0; i++) yield* Effect.yieldNow
      assert.deepStrictEqual(yield* stores.finish.list, [])
      assert.strictEqual(provider.deliveredTo(parent.persistence!.sessionId).length, 1)
    }))

  it.effect("a finish between the registration and the watch is owed once; one before the registration is not", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const s = yield* server({ provider, stores })
      yield* s.finish.recovered
      const parent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const child = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      // Before the registration: not owed.
      yield* s.registry.prompt(child.agentId, "before", { wait: true })
      // Registered held, so its watch is not issued yet; the target finishes in between.
      const registration = yield* s.finish.register({ callerAgentId: parent.agentId, targetAgentId: child.agentId }, {
        held: true
      })
      yield* s.registry.prompt(child.agentId, "between", { wait: true })
      yield* s.registry.awaitIdle(child.agentId)
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow
      // The watch starts after that finish, and no other comes.
      yield* registration.accept
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      yield* TestClock.adjust("2 seconds")
      yield* s.registry.awaitIdle(parent.agentId)
      for (let i = 0; i < 5 && (yield* stores.finish.list).length > 0; i++) yield* Effect.yieldNow
      assert.deepStrictEqual(provider.deliveredTo(parent.persistence!.sessionId), [
        `[message from agent ${child.agentId}]\n[finish notification] Agent ${child.agentId} finished.`
      ])
      assert.deepStrictEqual(yield* stores.finish.list, [])
      // Told once: later steps of the clock deliver nothing more.
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(provider.deliveredTo(parent.persistence!.sessionId).length, 1)

      // Registered after every finish so far: nothing is owed until the next one.
      yield* s.finish.register({ callerAgentId: parent.agentId, targetAgentId: child.agentId })
      yield* TestClock.adjust("1 minute")
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow
      assert.strictEqual(provider.deliveredTo(parent.persistence!.sessionId).length, 1, "a finish before the registration is not owed")
      assert.strictEqual((yield* stores.finish.list).length, 1)
      yield* s.registry.prompt(child.agentId, "after", { wait: true })
      yield* s.registry.awaitIdle(child.agentId)
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      yield* TestClock.adjust("2 seconds")
      yield* s.registry.awaitIdle(parent.agentId)
      for (let i = 0; i < 5 && (yield* stores.finish.list).length > 0; i++) yield* Effect.yieldNow
      assert.strictEqual(provider.deliveredTo(parent.persistence!.sessionId).length, 2)
      assert.deepStrictEqual(yield* stores.finish.list, [])
    }))

  it.effect("a watch its host never answers is issued again from its position, and the finish is told once", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      let watches = 0
      // The first watch is left unanswered, as by a runner that stopped hosting the target.
      const s = yield* server({
        provider,
        stores,
        operations: (operations) => ({
          ...operations,
          awaitFinish: (agentId, options) =>
            Effect.suspend(() => watches++ === 0 ? Effect.never : operations.awaitFinish(agentId, options))
        })
      })
      yield* s.finish.recovered
      const parent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      const child = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      yield* s.finish.register({ callerAgentId: parent.agentId, targetAgentId: child.agentId })
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      yield* s.registry.prompt(child.agentId, "work", { wait: true })
      yield* s.registry.awaitIdle(child.agentId)
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      assert.strictEqual(provider.deliveredTo(parent.persistence!.sessionId).length, 0, "the lost watch heard nothing")
      yield* TestClock.adjust("30 seconds")
      for (let i = 0; i < 20 && watches < 2; i++) yield* Effect.yieldNow
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      yield* TestClock.adjust("2 seconds")
      yield* s.registry.awaitIdle(parent.agentId)
      for (let i = 0; i < 5 && (yield* stores.finish.list).length > 0; i++) yield* Effect.yieldNow
      assert.strictEqual(watches, 2)
      assert.deepStrictEqual(provider.deliveredTo(parent.persistence!.sessionId), [
        `[message from agent ${child.agentId}]\n[finish notification] Agent ${child.agentId} finished.`
      ])
      assert.deepStrictEqual(yield* stores.finish.list, [])
    }))

  it.effect("rejecting a held registration removes the durable record and the protection", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const remote = new RemoteStub()
      const s = yield* server({ provider, stores, remote })
      yield* s.finish.recovered
      const registration = yield* s.finish.register({ callerAgentId: "caller", targetAgentId: "far", serverId: "x" }, {
        held: true
      })
      assert.strictEqual((yield* stores.finish.list).length, 1)
      assert.isTrue(yield* s.finish.hasPendingForCaller("caller"))
      yield* registration.reject
      assert.deepStrictEqual(yield* stores.finish.list, [])
      assert.isFalse(yield* s.finish.hasPendingForCaller("caller"))
      assert.strictEqual(remote.waits.length, 0, "a rejected registration is never watched")
    }))

  it.effect("recovery drops the records of callers that no longer exist", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      yield* stores.finish.put({
        id: "finish-orphan",
        callerAgentId: "gone",
        targetAgentId: "whoever",
        serverId: null,
        state: "accepted",
        createdAt: 0,
        afterFinish: null,
        notification: null
      })
      const s = yield* server({ provider, stores })
      yield* s.finish.recovered
      assert.deepStrictEqual(yield* stores.finish.list, [])
      assert.isFalse(yield* s.finish.hasPendingForCaller("gone"))
    }))

  it.effect("a queued message protects its recipient from collection until acknowledged (C4, D1)", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const stores = yield* makeStores
      const s = yield* server({ provider, stores })
      yield* s.finish.recovered
      const agent = yield* s.registry.create({ provider: "codex", cwd: "/work" })
      yield* TestClock.setTime(minutes(61))
      const ack = yield* Deferred.make<void>()
      provider.dispatchGate = Deferred.await(ack)
      const acknowledged = yield* s.delivery.enqueue({ recipientId: agent.agentId, text: "ping", senderId: "peer" })
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [], "queued")
      yield* TestClock.adjust("2 seconds")
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [], "dispatching")
      yield* Deferred.succeed(ack, undefined)
      yield* acknowledged
      yield* s.registry.awaitIdle(agent.agentId)
      yield* TestClock.setTime(minutes(62))
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [], "a fresh idle period starts now")
      yield* TestClock.setTime(minutes(121))
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [])
      yield* TestClock.setTime(minutes(122))
      assert.deepStrictEqual((yield* s.collector.sweep).collected.map((c) => c.agentId), [agent.agentId])
    }))
})

