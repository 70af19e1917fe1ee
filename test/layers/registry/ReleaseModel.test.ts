/**
 * X5: random interleavings of everything that touches a runtime, checked after every step
 * against the safety invariants:
 *  - nothing is released while its family had a blocker or veto when the release was decided;
 *  - no scheduled release before a full idle period after the last activity or retention;
 *  - every prompt is delivered exactly once;
 *  - a resumed agent keeps its session id.
 * A failure prints the seed and a replay token; set QUIESCE_PROPERTY_SEED to rerun one seed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Clock, Deferred, Effect, Fiber, Schema } from "effect"
import { TestClock } from "effect/testing"
import { RuntimeProbeFailed } from "../../../src/domain/errors.ts"
import { stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import type { SweepReport } from "../../../src/domain/sweep.ts"
import { FakeCallerProtection } from "../../../src/testing/FakeRuntimes.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import { harness, minutes } from "./harness.ts"

const ProbeMode = Schema.Literals(["permit", "veto", "fail", "hang"])
type ProbeMode = typeof ProbeMode.Type

const Step = Schema.Union([
  Schema.TaggedStruct("Prompt", { agent: Schema.Int, text: Schema.Literals(["work", "/maintenance"]) }),
  Schema.TaggedStruct("EndTurns", {}),
  Schema.TaggedStruct("Spawn", { parent: Schema.Int }),
  Schema.TaggedStruct("Exit", { agent: Schema.Int }),
  Schema.TaggedStruct("Probe", { agent: Schema.Int, mode: ProbeMode }),
  Schema.TaggedStruct("Protect", { agent: Schema.Int, on: Schema.Boolean }),
  Schema.TaggedStruct("Permission", { agent: Schema.Int, open: Schema.Boolean }),
  Schema.TaggedStruct("Advance", { minutes: Schema.Literals([1, 10, 30, 59, 60, 61, 125]) }),
  Schema.TaggedStruct("Sweep", {}),
  Schema.TaggedStruct("CollectNow", { agent: Schema.Int }),
  Schema.TaggedStruct("PromptRacingSweep", { agent: Schema.Int })
])
type Step = typeof Step.Type

const Steps = Arbitrary.array(Arbitrary.schema(Step), { minLength: 10, maxLength: 60 })

interface ModelAgent {
  readonly id: string
  readonly sessionId: string
  readonly parent: string | undefined
  lastActivity: number
  turnRunning: boolean
  protected: boolean
  probe: ProbeMode
  permissions: number
  /** The last time a sweep or collect-now decided this agent's family while it was blocked or vetoed. */
  lastRetention: number
}

const runScenario = Effect.fnUntraced(function*(steps: ReadonlyArray<Step>) {
  const provider = new MemoryProvider("model")
  const protection = new FakeCallerProtection()
  // The model's hung probes would hold the shutdown's question on a clock nobody advances once
  // the scenario ends; that question is tested in Shutdown.test.ts.
  const h = yield* harness({ provider, protection, registry: { shutdownProbeTimeout: 0 } })
  const agents: Array<ModelAgent> = []
  const bySession = new Map<string, ModelAgent>()
  const issued = new Map<string, ModelAgent>()
  let promptCount = 0
  let gate = yield* Deferred.make<void>()
  // Each turn waits on the gate that was current when it started.
  provider.turnGate = Deferred.await(gate)
  provider.probe = (sessionId) =>
    Effect.suspend(() => {
      switch (bySession.get(sessionId)?.probe ?? "permit") {
        case "permit":
          return Effect.succeed(stopPermitted)
        case "veto":
          return Effect.succeed(stopVetoed("test veto"))
        case "fail":
          return Effect.fail(new RuntimeProbeFailed({ agentId: sessionId, message: "probe failed" }))
        case "hang":
          return Effect.never
      }
    })

  const now = Clock.currentTimeMillis
  const pick = (n: number) => agents[Math.abs(n) % agents.length]!
  const resident = (agent: ModelAgent) => Effect.map(h.registry.get(agent.id), (view) => view.resident)

  const spawn = Effect.fnUntraced(function*(parent: ModelAgent | undefined) {
    const record = yield* h.create({ parentAgentId: parent?.id })
    const agent: ModelAgent = {
      id: record.agentId,
      sessionId: record.persistence!.sessionId,
      parent: parent?.id,
      lastActivity: yield* now,
      turnRunning: false,
      protected: false,
      probe: "permit",
      permissions: 0,
      lastRetention: -Infinity
    }
    agents.push(agent)
    bySession.set(agent.sessionId, agent)
  })

  /** The resident family of an agent, per the model's parent links. */
  const familyOf = Effect.fnUntraced(function*(root: ModelAgent) {
    const family = [root]
    for (let i = 0; i < family.length; i++) {
      for (const candidate of agents) {
        if (candidate.parent === family[i]!.id && (yield* resident(candidate)) && !family.includes(candidate)) {
          family.push(candidate)
        }
      }
    }
    return family
  })

  const blocked = (agent: ModelAgent) =>
    agent.turnRunning || agent.protected || agent.permissions > 0 || agent.probe !== "permit"

  const prompt = Effect.fnUntraced(function*(agent: ModelAgent, text: string) {
    const unique = `${text === "/maintenance" ? "/maintenance" : "work"}#${++promptCount}`
    if (text === "/maintenance") provider.commands.add(unique)
    issued.set(unique, agent)
    const receipt = yield* h.registry.prompt(agent.id, unique)
    assert.strictEqual(receipt.sessionId, agent.sessionId, "a resumed agent keeps its session id")
    agent.lastActivity = yield* now
    if (receipt.disposition !== "out-of-band") agent.turnRunning = true
    return receipt
  })

  /** Drives the clock until the effect completes: hung probes time out after 10 s. */
  const withClock = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(effect)
      for (let i = 0; i < 40 && fiber.pollUnsafe() === undefined; i++) yield* TestClock.adjust("1 second")
      return yield* Fiber.join(fiber)
    })

  /**
   * Before a decision: every family as it stands, and a retention for each decided root whose
   * family is blocked (a sweep decides every root, collect-now only its own).
   */
  const noteRetentions = Effect.fnUntraced(function*(decided?: ModelAgent) {
    const at = yield* now
    const before = new Map<string, ReadonlyArray<ModelAgent>>()
    for (const agent of agents) {
      if (!(yield* resident(agent))) continue
      const family = yield* familyOf(agent)
      before.set(agent.id, family)
      if ((decided === undefined || decided === agent) && family.some(blocked)) agent.lastRetention = at
    }
    return before
  })

  const checkReleases = Effect.fnUntraced(function*(
    report: SweepReport,
    families: ReadonlyMap<string, ReadonlyArray<ModelAgent>>,
    scheduled: boolean
  ) {
    const at = yield* now
    if (process.env["QUIESCE_PROPERTY_TRACE"] && report.collected.length > 0) {
      console.log(`released ${report.collected.length}${scheduled ? " by sweep" : " on request"}`)
    }
    for (const { agentId, sessionId } of report.collected) {
      const agent = agents.find((candidate) => candidate.id === agentId)!
      assert.strictEqual(sessionId, agent.sessionId)
      const family = families.get(agentId) ?? [agent]
      for (const member of family) {
        assert.isFalse(blocked(member), `released ${agentId} while ${member.id} was blocked or vetoing`)
      }
      if (scheduled) {
        // A retention restarts the idle period of the root it was decided for (C5, C7). A sweep
        // decides every root, so an ancestor's own retention covers its descendants'; a collect-now
        // decides only its own family and says nothing about its ancestors.
        const idleSince = Math.max(agent.lastActivity, agent.lastRetention)
        assert.isAtLeast(at - idleSince, minutes(60), `released ${agentId} before a full idle period`)
      }
      assert.isFalse(yield* resident(agent))
    }
  })

  const checkDeliveries = () => {
    const seen = new Map<string, number>()
    for (const delivery of provider.deliveries) {
      seen.set(delivery.prompt, (seen.get(delivery.prompt) ?? 0) + 1)
      const owner = issued.get(delivery.prompt)
      assert.isDefined(owner, `unexpected delivery ${delivery.prompt}`)
      assert.strictEqual(delivery.sessionId, owner!.sessionId, "delivered to the agent's own session")
    }
    for (const text of issued.keys()) assert.strictEqual(seen.get(text), 1, `${text} delivered exactly once`)
  }

  yield* spawn(undefined)
  for (const step of steps) {
    if (process.env["QUIESCE_PROPERTY_TRACE"]) console.log(JSON.stringify(step))
    switch (step._tag) {
      case "Prompt":
        yield* prompt(pick(step.agent), step.text)
        break
      case "EndTurns": {
        const ended = gate
        gate = yield* Deferred.make<void>()
        provider.turnGate = Deferred.await(gate)
        yield* Deferred.succeed(ended, undefined)
        for (const agent of agents) {
          yield* h.registry.awaitIdle(agent.id)
          if (agent.turnRunning) agent.lastActivity = yield* now
          agent.turnRunning = false
        }
        break
      }
      case "Spawn":
        if (agents.length < 5) yield* spawn(pick(step.parent))
        break
      case "Exit": {
        const agent = pick(step.agent)
        if (agent.parent === undefined || agent.turnRunning) break
        yield* h.registry.close(agent.id)
        // A pending permission dies with its runtime; a resumed runtime starts without one.
        agent.permissions = 0
        break
      }
      case "Probe":
        pick(step.agent).probe = step.mode
        break
      case "Protect": {
        const agent = pick(step.agent)
        agent.protected = step.on
        protection.protect(agent.id, step.on)
        break
      }
      case "Permission": {
        const agent = pick(step.agent)
        if (!(yield* resident(agent))) break
        if (step.open) {
          provider.emit(agent.id, { _tag: "PermissionRequested", id: `perm-${agent.permissions}` })
          agent.permissions++
        } else if (agent.permissions > 0) {
          agent.permissions--
          yield* h.registry.respondToPermission(agent.id, `perm-${agent.permissions}`, true)
        } else break
        yield* Effect.yieldNow
        agent.lastActivity = yield* now
        break
      }
      case "Advance":
        yield* TestClock.adjust(minutes(step.minutes))
        break
      case "Sweep": {
        const families = yield* noteRetentions()
        yield* checkReleases(yield* withClock(h.collector.sweep), families, true)
        break
      }
      case "CollectNow": {
        const agent = pick(step.agent)
        if (!(yield* resident(agent))) break
        const families = yield* noteRetentions(agent)
        const outcome = yield* withClock(h.collector.collectNow(agent.id))
        const report: SweepReport = outcome._tag === "Collected"
          ? { collected: [outcome.runtime], failures: [] }
          : { collected: [], failures: [] }
        yield* checkReleases(report, families, false)
        break
      }
      case "PromptRacingSweep": {
        const families = yield* noteRetentions()
        const agent = pick(step.agent)
        const sweep = yield* Effect.forkChild(withClock(h.collector.sweep))
        const receipt = yield* prompt(agent, "work")
        const report = yield* Fiber.join(sweep)
        // C9: a prompt that reached the runtime without waiting for a resume kept it resident.
        if (!receipt.resumed) {
          assert.isFalse(report.collected.some((c) => c.agentId === agent.id), "released a runtime a prompt was admitted to")
          assert.isTrue(yield* resident(agent))
        }
        // The prompt may have landed before or after the decision; only a release decided on a
        // clear family is allowed, and the prompt must still be delivered once to the same session.
        for (const { agentId } of report.collected) {
          const family = families.get(agentId) ?? []
          for (const member of family) assert.isFalse(member.protected || member.permissions > 0 || member.probe !== "permit")
        }
        break
      }
    }
    checkDeliveries()
  }
})

describe("release and resume under random interleavings (X5)", () => {
  const seed = process.env["QUIESCE_PROPERTY_SEED"]
  it.effect.prop(
    "the safety invariants hold after every step",
    [Steps],
    ([steps]) => Effect.scoped(runScenario(steps)),
    { timeout: 240_000, arbitrary: { runs: Number(process.env["QUIESCE_PROPERTY_RUNS"] ?? 2000), size: 60, ...(seed === undefined ? {} : { seed: Number(seed) }) } }
  )
})
