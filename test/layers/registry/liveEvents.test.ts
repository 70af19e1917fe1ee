import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Queue, Stream } from "effect"
import { TestClock } from "effect/testing"
import type { AgentEvent, Gap } from "../../../src/domain/agentEvent.ts"
import { stopVetoed } from "../../../src/domain/provider.ts"
import * as RuntimeCollectorLive from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import * as AgentEventsLive from "../../../src/layers/events/AgentEventsLive.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentEvents } from "../../../src/services/AgentEvents.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { RuntimeCollector } from "../../../src/services/RuntimeCollector.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import { FakeCallerProtection } from "../../../src/testing/FakeRuntimes.ts"
import { minutes } from "./harness.ts"

/** A registry over memory stores and `provider`. */
const registryOf = (provider: MemoryProvider) =>
  AgentRegistryLive.layerWith({}).pipe(
    Layer.provide([
      AgentStoreMemory.layer,
      TurnJournalMemory.layer,
      RuntimeLedgerMemory.layer,
      provider.layer.pipe(Layer.provideMerge(ProviderRegistry.layer))
    ])
  )

describe("the registry's live events", () => {
  it.effect("an agent's stream shows its runtime resumed, its turn accepted, running and ended, a veto and its close", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const registryLayer = registryOf(provider)
      const collectorLayer = RuntimeCollectorLive.layer({ tickInterval: "3650 days" }).pipe(
        Layer.provide([AgentRegistryLive.candidatesLayer, new FakeCallerProtection().layer])
      )
      const context = yield* Layer.build(
        collectorLayer.pipe(Layer.provideMerge(registryLayer), Layer.provideMerge(AgentEventsLive.layer))
      )
      const registry = Context.get(context, AgentRegistry)
      const collector = Context.get(context, RuntimeCollector)
      const events = Context.get(context, AgentEvents)

      provider.probe = () => Effect.succeed(stopVetoed("test veto"))
      const agent = yield* registry.create({ provider: provider.provider, cwd: "/work" })
      const stream = yield* events.follow(agent.agentId, "not-an-id-of-this-daemon")
      const collected: Array<AgentEvent | Gap> = []
      const reading = yield* Effect.forkChild(Stream.runForEach(stream, (e) => Effect.sync(() => void collected.push(e.event))))
      const receipt = yield* registry.prompt(agent.agentId, "hello", { wait: true })
      // The collector asks the provider as the turn ends: let that answer come before time moves.
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      yield* TestClock.setTime(minutes(61))
      yield* collector.sweep
      yield* registry.close(agent.agentId)
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      yield* Fiber.interrupt(reading)
      // From an id this daemon did not issue: a gap, then every event of the agent kept, in order.
      const [gap, ...seen] = collected
      assert.strictEqual(gap?._tag, "gap")
      assert.deepStrictEqual(seen, [
        { _tag: "resumed" },
        { _tag: "turn-accepted", turnId: receipt.turnId, prompt: "hello" },
        { _tag: "turn-running", turnId: receipt.turnId },
        { _tag: "turn-ended", turnId: receipt.turnId, state: "completed", reply: null, error: null },
        { _tag: "vetoed", reason: "test veto" },
        { _tag: "released", reason: "close" }
      ])
    }))

  it.effect("a permission asked, then answered, shows on the stream as asked and no longer open", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const registryLayer = registryOf(provider)
      const context = yield* Layer.build(registryLayer.pipe(Layer.provideMerge(AgentEventsLive.layer)))
      const registry = Context.get(context, AgentRegistry)
      const events = Context.get(context, AgentEvents)
      const agent = yield* registry.create({ provider: provider.provider, cwd: "/work" })
      const stream = yield* events.follow(agent.agentId, yield* events.latestOf(agent.agentId))
      // Each event as it comes: the next is taken once it is there, however long that takes.
      const seen = yield* Queue.unbounded<AgentEvent | Gap>()
      yield* Effect.forkChild(Stream.runForEach(stream, (e) => Queue.offer(seen, e.event)))
      provider.emit(agent.agentId, { _tag: "PermissionRequested", id: "perm-1" })
      assert.deepStrictEqual(yield* Queue.take(seen), { _tag: "permission-asked", permissionId: "perm-1" })
      assert.deepStrictEqual((yield* registry.get(agent.agentId)).pendingPermissions, ["perm-1"])
      yield* registry.respondToPermission(agent.agentId, "perm-1", true)
      assert.deepStrictEqual(yield* Queue.take(seen), { _tag: "permission-resolved", permissionId: "perm-1" })
    }))
})
