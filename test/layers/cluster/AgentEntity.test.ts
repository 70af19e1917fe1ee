/**
 * The Agent entity (X6) over `TestRunner.layer` (sharding, in-memory message and runner storage,
 * one runner) under TestClock, with the real registry and collector over the in-memory provider.
 */
import * as RuntimeCollectorLive from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Layer, Option, Scope, Stream } from "effect"
import { Sharding, TestRunner } from "effect/cluster"
import { TestClock } from "effect/testing"
import { parentAgentIdLabel } from "../../../src/domain/agent.ts"
import * as AgentEntity from "../../../src/layers/cluster/AgentEntity.ts"
import type { ProviderRefusal } from "../../../src/domain/close.ts"
import { stopVetoed } from "../../../src/domain/provider.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import * as AgentEventsLive from "../../../src/layers/events/AgentEventsLive.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { FakeCallerProtection } from "../../../src/testing/FakeRuntimes.ts"
import { AgentPlacement } from "../../../src/services/AgentPlacement.ts"
import type { AgentEvents } from "../../../src/services/AgentEvents.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import type { AgentStore } from "../../../src/services/AgentStore.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { RuntimeCollector } from "../../../src/services/RuntimeCollector.ts"

/** The stores the runners of one cluster share. */
const sharedStores = Layer.build(Layer.mergeAll(AgentStoreMemory.layer, TurnJournalMemory.layer))

/**
 * The registry and collector of one runner over `stores`, in the test's scope (they outlive the
 * cluster layer).
 */
const runnerServices = Effect.fnUntraced(function*(
  provider: MemoryProvider,
  stores: Context.Context<AgentStore | TurnJournal>
) {
  const registry = AgentRegistryLive.layerWith({ sharedStore: true }).pipe(
    Layer.provide([
      Layer.succeedContext(stores),
      RuntimeLedgerMemory.layer,
      provider.layer.pipe(Layer.provideMerge(ProviderRegistry.layer))
    ])
  )
  // No scheduled sweeps: releases happen where a test says.
  const collector = RuntimeCollectorLive.layer({ tickInterval: "3650 days" }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, new FakeCallerProtection().layer])
  )
  // One room of live events: the registry and the collector publish there, the entity reads it.
  return yield* Layer.build(collector.pipe(Layer.provideMerge(registry), Layer.provideMerge(AgentEventsLive.layer)))
})

/** The entity and a test cluster over `services`, built in `scope`. */
const clusterIn = (services: Context.Context<AgentRegistry | RuntimeCollector | AgentEvents>, scope: Scope.Scope) =>
  Layer.buildWithScope(
    AgentEntity.layer.pipe(Layer.provideMerge(TestRunner.layer), Layer.provide(Layer.succeedContext(services))),
    scope
  )

/** Sharding starts on timers: a call is forked and the clock moved until it answers. */
const drive = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(effect)
    yield* TestClock.adjust("5 seconds")
    return yield* Fiber.join(fiber)
  })

const setup = Effect.fnUntraced(function*(
  provider: MemoryProvider = new MemoryProvider("memory"),
  stores?: Context.Context<AgentStore | TurnJournal>
) {
  const services = yield* runnerServices(provider, stores ?? (yield* sharedStores))
  const scope = yield* Scope.fork(yield* Effect.scope)
  const cluster = yield* clusterIn(services, scope)
  const agents = yield* AgentEntity.AgentEntity.client.pipe(Effect.provide(cluster))
  const sharding = Context.get(cluster, Sharding.Sharding)
  return {
    provider,
    registry: Context.get(services, AgentRegistry),
    collector: Context.get(services, RuntimeCollector),
    agent: agents,
    activeEntities: sharding.activeEntityCount,
    /** Ends the runner's cluster side (as a shutdown or a lost shard ends its entities). */
    stopCluster: Scope.close(scope, Exit.void)
  }
})

describe("the Agent entity", () => {
  it.effect("Close on the hosting runner refuses a runtime its provider vetoes, naming the veto; with force it closes and says what it ended", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("memory")
      provider.probe = () => Effect.succeed(stopVetoed("background job 1 `sleep 301`"))
      const t = yield* setup(provider)
      const agent = t.agent("agent-busy")
      yield* drive(agent.Create({ provider: "memory", cwd: "/work" }))
      const veto: ProviderRefusal = { agentId: "agent-busy", outcome: "vetoed", message: "background job 1 `sleep 301`" }

      const refused = yield* drive(Effect.flip(agent.Close({ force: false })))
      assert.strictEqual(refused._tag, "RuntimeCloseRefused")
      assert.deepStrictEqual(refused._tag === "RuntimeCloseRefused" ? refused.veto : null, veto)
      assert.isTrue((yield* t.registry.get("agent-busy")).resident)
      assert.strictEqual(provider.closes, 0)

      const closed = yield* drive(agent.Close({ force: true }))
      assert.deepStrictEqual(closed, { agentId: "agent-busy", ended: { blockers: [], veto } })
      assert.isFalse((yield* t.registry.get("agent-busy")).resident)
      assert.strictEqual(provider.closes, 1)
    }))

  it.effect("holds keep-alive while the runtime is resident; only the collector releases it, and then the reaper removes an empty shell", () =>
    Effect.gen(function*() {
      const t = yield* setup()
      const agent = t.agent("agent-kept")
      const record = yield* drive(agent.Create({ provider: "memory", cwd: "/work" }))
      assert.strictEqual(record.agentId, "agent-kept")
      // Ten minutes idle, far past the cluster's one-minute passivation: the entity and its runtime stay.
      yield* TestClock.adjust("10 minutes")
      assert.strictEqual(yield* t.activeEntities, 1)
      assert.isTrue((yield* t.registry.get("agent-kept")).resident)
      assert.strictEqual(t.provider.closes, 0)

      const outcome = yield* t.collector.collectNow("agent-kept")
      assert.strictEqual(outcome._tag, "Collected")
      yield* TestClock.adjust("2 minutes")
      assert.strictEqual(yield* t.activeEntities, 0)
      assert.strictEqual(t.provider.closes, 1)

      // The next prompt activates the entity again and resumes the saved session.
      const receipt = yield* drive(agent.Prompt({ text: "again", clientMessageId: "m-1", wait: true }))
      assert.isTrue(receipt.resumed)
      assert.strictEqual(receipt.state, "completed")
      assert.strictEqual(t.provider.resumes, 1)
      yield* TestClock.adjust("10 minutes")
      assert.strictEqual(yield* t.activeEntities, 1)
    }))

  it.effect("a create carries the parent in its field, and one that sets a quiesce.* label is refused across the runner", () =>
    Effect.gen(function*() {
      const t = yield* setup()
      yield* drive(t.agent("agent-parent").Create({ provider: "memory", cwd: "/work" }))
      const child = yield* drive(t.agent("agent-child").Create({ provider: "memory", cwd: "/work", parentAgentId: "agent-parent" }))
      assert.deepStrictEqual(child.labels, { [parentAgentIdLabel]: "agent-parent" })
      const refused = yield* Effect.flip(drive(t.agent("agent-labelled").Create({
        provider: "memory",
        cwd: "/work",
        labels: { [parentAgentIdLabel]: "agent-parent" }
      })))
      assert.strictEqual(refused._tag, "ReservedLabel")
      assert.strictEqual(refused._tag === "ReservedLabel" && refused.label, parentAgentIdLabel)
      assert.strictEqual(t.provider.creates, 2, "the refused create opened nothing")
    }))

  it.effect("a create and a prompt sent again get the first answer: one agent, one turn", () =>
    Effect.gen(function*() {
      const t = yield* setup()
      const agent = t.agent("agent-once")
      const first = yield* drive(agent.Create({ provider: "memory", cwd: "/work" }))
      const again = yield* drive(agent.Create({ provider: "memory", cwd: "/elsewhere" }))
      assert.deepStrictEqual(again, first)
      assert.strictEqual(t.provider.creates, 1)

      const receipts = yield* drive(Effect.all(
        Array.from({ length: 5 }, () => agent.Prompt({ text: "once", clientMessageId: "same-id", wait: true })),
        { concurrency: "unbounded" }
      ))
      const later = yield* drive(agent.Prompt({ text: "once", clientMessageId: "same-id", wait: true }))
      assert.strictEqual(new Set([...receipts, later].map((receipt) => receipt.turnId)).size, 1)
      assert.strictEqual(t.provider.deliveries.filter((delivery) => delivery.prompt === "once").length, 1)
      assert.strictEqual((yield* t.registry.turns("agent-once", 10)).length, 1)
    }))

  it.effect("when the entity ends (the runner stops serving its shard), an idle runtime is released resumably through the collector", () =>
    Effect.gen(function*() {
      const t = yield* setup()
      yield* drive(t.agent("agent-moved").Create({ provider: "memory", cwd: "/work" }))
      yield* t.stopCluster
      const view = yield* t.registry.get("agent-moved")
      assert.isFalse(view.resident)
      assert.isNotNull(view.record.persistence)
      assert.strictEqual(t.provider.closes, 1)
    }))

  it.effect("Follow streams the host's events to a reader; reading keeps no runtime resident, and the entity's end ends the stream at once", () =>
    Effect.gen(function*() {
      const t = yield* setup()
      const agent = t.agent("agent-read")
      yield* drive(agent.Create({ provider: "memory", cwd: "/work" }))
      const after = yield* drive(agent.LatestEvent())
      const seen: Array<string> = []
      const reading = yield* Effect.forkChild(
        Stream.runForEach(agent.Follow({ after }), (numbered) => Effect.sync(() => void seen.push(numbered.event._tag))).pipe(Effect.exit)
      )
      yield* drive(agent.Prompt({ text: "hello", clientMessageId: "m-read", wait: true }))
      // A reader is not a blocker: the collector releases the runtime while it reads.
      const outcome = yield* t.collector.collectNow("agent-read")
      assert.strictEqual(outcome._tag, "Collected")
      yield* TestClock.adjust("2 minutes")
      assert.deepStrictEqual(seen, ["turn-accepted", "turn-running", "turn-ended", "released"])
      // Its request in progress keeps the entity's empty shell (no runtime) from the reaper while it reads.
      assert.strictEqual(yield* t.activeEntities, 1)
      assert.strictEqual(t.provider.closes, 1)
      yield* t.stopCluster
      const ended = yield* Fiber.join(reading)
      assert.isTrue(Exit.isFailure(ended) && Cause.hasInterruptsOnly(ended.cause))
    }))

  it.effect("when the entity ends during a turn, the runtime is closed all the same and the turn ends interrupted, never left running", () =>
    Effect.gen(function*() {
      const t = yield* setup()
      const agent = t.agent("agent-busy")
      yield* drive(agent.Create({ provider: "memory", cwd: "/work" }))
      const gate = yield* Deferred.make<void>()
      t.provider.turnGate = Deferred.await(gate)
      const receipt = yield* drive(agent.Prompt({ text: "long", clientMessageId: "m-busy", wait: false }))
      assert.strictEqual(receipt.state, "running")
      yield* t.stopCluster
      assert.isFalse((yield* t.registry.get("agent-busy")).resident)
      const turn = yield* t.registry.turn("agent-busy", receipt.turnId)
      assert.strictEqual(turn.state, "interrupted")
    }))

  it.effect("a runner that starts hosting an agent takes over its unfinished turns: one left running is recorded interrupted, one only accepted runs", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("memory")
      const stores = yield* sharedStores
      const journal = Context.get(stores, TurnJournal)
      const first = yield* setup(provider, stores)
      yield* drive(first.agent("agent-taken").Create({ provider: "memory", cwd: "/work" }))
      yield* first.stopCluster
      // What a runner that died left in the shared journal.
      const left = (turnId: string, state: "accepted" | "running") => ({
        turnId, agentId: "agent-taken", clientMessageId: turnId, text: `left ${state}`, state,
        disposition: null, joinedTurnId: null, resumed: false, reply: null, error: null,
        acceptedAt: 0, dispatchedAt: state === "running" ? 0 : null, endedAt: null
      })
      yield* journal.accept({ record: left("turn-running", "running") })
      yield* journal.accept({ record: left("turn-accepted", "accepted") })

      // Another runner on the same stores: nothing is taken over until it hosts the agent.
      const second = yield* setup(provider, stores)
      assert.strictEqual((yield* journal.unfinished).length, 2)
      // The first message activates the entity: the left turns are taken over, and the accepted one resumes the agent.
      const explained = yield* drive(second.agent("agent-taken").Explain())
      assert.strictEqual(explained.agentId, "agent-taken")
      yield* TestClock.adjust("5 seconds")
      const running = Option.getOrThrow(yield* journal.get("agent-taken", "turn-running"))
      assert.strictEqual(running.state, "interrupted")
      const accepted = yield* second.registry.turn("agent-taken", "turn-accepted")
      assert.strictEqual(accepted.state, "completed")
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["left accepted"])
    }))

  it.effect("a runner that starts hosting an agent reads that agent's unfinished turns only, never the whole cluster's journal", () =>
    Effect.gen(function*() {
      const stores = yield* sharedStores
      const journal = Context.get(stores, TurnJournal)
      // What the journal was asked for: the whole journal's unfinished turns, or one agent's.
      let wholeJournalReads = 0
      const agentReads: Array<string> = []
      const counting = TurnJournal.of({
        ...journal,
        unfinished: Effect.suspend(() => {
          wholeJournalReads++
          return journal.unfinished
        }),
        unfinishedOf: (agentId) => Effect.suspend(() => {
          agentReads.push(agentId)
          return journal.unfinishedOf(agentId)
        })
      })
      // Another agent's turn, left unfinished in the shared journal.
      yield* journal.accept({
        record: {
          turnId: "turn-elsewhere", agentId: "agent-elsewhere", clientMessageId: null, text: "not ours", state: "accepted",
          disposition: null, joinedTurnId: null, resumed: false, reply: null, error: null,
          acceptedAt: 0, dispatchedAt: null, endedAt: null
        }
      })
      const runner = yield* setup(new MemoryProvider("memory"), Context.add(stores, TurnJournal, counting))
      yield* drive(runner.agent("agent-here").Create({ provider: "memory", cwd: "/work" }))
      assert.deepStrictEqual(agentReads, ["agent-here"])
      assert.strictEqual(wholeJournalReads, 0)
    }))

  it.effect("a prompt queued behind the running turn when the shard leaves is not run here: the runtime is not resumed, and the prompt stays accepted for the next host", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("memory")
      provider.steers = false
      const t = yield* setup(provider)
      const agent = t.agent("agent-queued")
      yield* drive(agent.Create({ provider: "memory", cwd: "/work" }))
      const gate = yield* Deferred.make<void>()
      provider.turnGate = Deferred.await(gate)
      yield* drive(agent.Prompt({ text: "long", clientMessageId: "m-long", wait: false }))
      const queued = yield* Effect.forkChild(t.registry.prompt("agent-queued", "queued", { clientMessageId: "m-queued", wait: true }))
      yield* TestClock.adjust("1 second")
      yield* t.stopCluster
      const receipt = yield* Fiber.join(queued)
      assert.strictEqual(receipt.state, "accepted")
      yield* TestClock.adjust("1 minute")
      assert.isFalse((yield* t.registry.get("agent-queued")).resident)
      assert.strictEqual(provider.resumes, 0)
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["long"])
      assert.strictEqual((yield* t.registry.turn("agent-queued", receipt.turnId)).state, "accepted")
    }))

  it.effect("two runners that both take over one agent (a split brain) run its accepted turn once: the journal lets one claim it", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("memory")
      const stores = yield* sharedStores
      const journal = Context.get(stores, TurnJournal)
      const first = yield* setup(provider, stores)
      yield* drive(first.agent("agent-split").Create({ provider: "memory", cwd: "/work" }))
      yield* first.stopCluster
      yield* journal.accept({
        record: {
          turnId: "turn-left", agentId: "agent-split", clientMessageId: "left", text: "left accepted", state: "accepted",
          disposition: null, joinedTurnId: null, resumed: false, reply: null, error: null,
          acceptedAt: 0, dispatchedAt: null, endedAt: null
        }
      })
      const second = yield* setup(provider, stores)
      const third = yield* setup(provider, stores)
      // Both take the turn over and resume the agent before either hands the turn to its runtime.
      const resuming = yield* Deferred.make<void>()
      let waiting = 0
      provider.resumeGate = Effect.suspend(() => (++waiting === 2 ? Deferred.succeed(resuming, undefined) : Deferred.await(resuming)))
      yield* Effect.all([second.registry.adopt("agent-split"), third.registry.adopt("agent-split")], { concurrency: "unbounded" })
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(provider.resumes, 2)
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["left accepted"])
      assert.strictEqual(Option.getOrThrow(yield* journal.get("agent-split", "turn-left")).state, "completed")
    }))

  it.effect("a path that prompts the registry itself (a finish notification, a delivered message) never resumes an agent this runner does not host", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("memory")
      const stores = yield* sharedStores
      const host = yield* setup(provider, stores)
      yield* drive(host.agent("agent-remote").Create({ provider: "memory", cwd: "/work" }))
      yield* host.collector.collectNow("agent-remote")
      // Another runner on the same stores, which does not hold the agent's shard.
      const other = yield* setup(provider, stores).pipe(
        Effect.provideService(AgentPlacement, { hostsHere: (agentId) => agentId !== "agent-remote" })
      )
      yield* other.registry.adopt("agent-remote")
      const receipt = yield* other.registry.prompt("agent-remote", "from a local path", { clientMessageId: "local", wait: true })
      assert.strictEqual(receipt.state, "accepted")
      assert.strictEqual(provider.resumes, 0)
      assert.isFalse((yield* other.registry.get("agent-remote")).resident)
      // The host runs it once it takes the agent's turns over.
      yield* host.registry.adopt("agent-remote")
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual((yield* host.registry.turn("agent-remote", receipt.turnId)).state, "completed")
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["from a local path"])
    }))

  it.effect("a hand-off while a resume is under way releases what the resume brings up, and answers every waiting prompt", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("memory")
      const t = yield* setup(provider)
      yield* drive(t.agent("agent-resuming").Create({ provider: "memory", cwd: "/work" }))
      assert.strictEqual((yield* t.collector.collectNow("agent-resuming"))._tag, "Collected")
      const resumeGate = yield* Deferred.make<void>()
      provider.resumeGate = Deferred.await(resumeGate)
      const prompts = yield* Effect.forkChild(Effect.all([
        t.registry.prompt("agent-resuming", "one", { clientMessageId: "c1", wait: true }),
        t.registry.prompt("agent-resuming", "two", { clientMessageId: "c2", wait: true })
      ], { concurrency: "unbounded" }))
      yield* TestClock.adjust("10 millis")
      const stopping = yield* Effect.forkChild(t.stopCluster)
      yield* TestClock.adjust("10 millis")
      yield* Deferred.succeed(resumeGate, undefined)
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(stopping)
      const receipts = yield* Fiber.join(prompts)
      assert.deepStrictEqual(receipts.map((receipt) => receipt.state), ["accepted", "accepted"])
      assert.isFalse((yield* t.registry.get("agent-resuming")).resident)
      assert.deepStrictEqual(provider.deliveries, [])
      assert.deepStrictEqual(yield* t.registry.retirementBlockers, [])
    }))
})
