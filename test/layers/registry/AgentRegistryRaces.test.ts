import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { RuntimeProbeFailed } from "../../../src/domain/errors.ts"
import { type AgentClient, type AgentSession, stopPermitted } from "../../../src/domain/provider.ts"
import { harness } from "./harness.ts"

/**
 * A provider whose turns end on the provider's side before the registry hears of it, as a real
 * process's do: the test decides when.
 */
const detachedTurns = () => {
  let providerTurn = false
  let turnDone = Deferred.makeUnsafe<void>()
  const deliveries: Array<string> = []
  const session: AgentSession = {
    persistence: Effect.succeed({ provider: "detached", sessionId: "detached-1" }),
    startTurn: (prompt) =>
      Effect.sync(() => {
        providerTurn = true
        deliveries.push(prompt)
        const done = turnDone
        return Effect.as(Deferred.await(done), { reply: null })
      }),
    steer: (prompt) => Effect.sync(() => providerTurn && (deliveries.push(prompt), true)),
    outOfBand: () => undefined,
    respondToPermission: () => Effect.void,
    interrupt: Effect.void,
    close: Effect.void
  }
  const client: AgentClient = {
    provider: "detached",
    create: () => Effect.succeed(session),
    resume: () => Effect.succeed(session)
  }
  return {
    deliveries,
    layer: ProviderRegistry.register(Effect.succeed(client)),
    /** The provider ends the running turn; the registry learns of it only when its fiber runs. */
    endTurn: () => {
      providerTurn = false
      const done = turnDone
      turnDone = Deferred.makeUnsafe<void>()
      Deferred.doneUnsafe(done, Effect.void)
    }
  }
}

describe("AgentRegistry: races found in review", () => {
  it.effect("a turn that ends after a newer one started does not clear the running turn (C4)", () =>
    Effect.gen(function*() {
      const provider = detachedTurns()
      const h = yield* harness({ extraProviders: provider.layer })
      const agent = yield* h.registry.create({ provider: "detached", cwd: "/work" })
      yield* h.registry.prompt(agent.agentId, "first")
      provider.endTurn()
      // Before the registry's turn fiber runs, the next prompt starts a new turn.
      const receipt = yield* h.registry.prompt(agent.agentId, "second")
      assert.strictEqual(receipt.disposition, "turn")
      yield* Effect.yieldNow
      const residency = yield* h.collector.explain(agent.agentId)
      assert.deepStrictEqual(residency.blockers.map((b) => b.kind), ["foreground-turn"])
      assert.strictEqual((yield* h.collector.collectNow(agent.agentId))._tag, "Retained")
    }))

  it.effect("events a session reports while it opens are kept (C4)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      h.provider.onOpen = (config) => config.onEvent({ _tag: "SubagentStarted", id: "early" })
      const agent = yield* h.create()
      yield* Effect.yieldNow
      const residency = yield* h.collector.explain(agent.agentId)
      assert.deepStrictEqual(residency.blockers.map((b) => b.kind), ["running-subagents"])
    }))

  it.effect("a prompt racing a reload waits for the new runtime and is delivered once", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      h.provider.closeGate = Deferred.succeed(entered, undefined).pipe(Effect.andThen(Deferred.await(release)))
      const reloading = yield* h.registry.reload(agent.agentId).pipe(Effect.forkChild)
      yield* Deferred.await(entered)
      const prompt = yield* h.registry.prompt(agent.agentId, "during reload").pipe(Effect.forkChild)
      yield* Effect.yieldNow
      assert.deepStrictEqual(h.provider.deliveries, [], "nothing reaches the runtime being replaced")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(reloading)
      const receipt = yield* Fiber.join(prompt)
      assert.isTrue(receipt.resumed)
      assert.deepStrictEqual(h.provider.deliveries.map((d) => d.prompt), ["during reload"])
      assert.strictEqual(h.provider.resumes, 1)
    }))

  it.effect("a command admitted in the same millisecond as the capture prevents the release (C9)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      let agentId = ""
      h.provider.probe = () =>
        Effect.gen(function*() {
          yield* h.registry.prompt(agentId, "/maintenance")
          return stopPermitted
        }).pipe(Effect.mapError((error) => new RuntimeProbeFailed({ agentId, message: error.message })))
      agentId = (yield* h.create()).agentId
      const outcome = yield* h.collector.collectNow(agentId)
      assert.strictEqual(outcome._tag, "Retained")
      assert.strictEqual(h.provider.closes, 0)
    }))

  it.effect("a session id the provider reports later makes the agent resumable", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      h.provider.reportsSessionAfterTurn = true
      const agent = yield* h.create()
      assert.isNull(agent.persistence)
      assert.strictEqual((yield* h.collector.explain(agent.agentId)).state, "not-resumable")
      yield* h.registry.prompt(agent.agentId, "hello")
      yield* h.registry.awaitIdle(agent.agentId)
      const saved = yield* h.registry.get(agent.agentId)
      assert.strictEqual(saved.record.persistence?.sessionId, "codex-session-1")
      assert.strictEqual((yield* h.collector.collectNow(agent.agentId))._tag, "Collected")
      assert.isTrue((yield* h.registry.prompt(agent.agentId, "again")).resumed)
    }))
})
