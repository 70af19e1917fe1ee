/**
 * The turn owner on its own: `makePrompts` driven through its port (`ResidencyPort`) by a small
 * stand-in residency, over the in-memory journal, under the test clock. Each runtime here is a
 * scripted session whose turns end when the test says.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Option, Scope } from "effect"
import type { AgentRecord } from "../../../src/domain/agent.ts"
import { AgentNotFound, ShuttingDown } from "../../../src/domain/errors.ts"
import type { FinishKind } from "../../../src/domain/finish.ts"
import type { AgentSession, TurnEnd } from "../../../src/domain/provider.ts"
import type { TurnRecord } from "../../../src/domain/turn.ts"
import { type LiveAgent, makeLiveAgent } from "../../../src/layers/registry/LiveAgent.ts"
import { makePrompts } from "../../../src/layers/registry/prompts.ts"
import type { ResidencyPort } from "../../../src/layers/registry/residencyPort.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"

/** One scripted runtime: every turn it starts waits for the test to end it. */
interface Runtime {
  readonly agent: LiveAgent
  /** The turns started on it, in order, each with the deferred that ends it. */
  readonly started: Array<{ readonly text: string; readonly turnId: string; readonly end: Deferred.Deferred<TurnEnd> }>
  /** The prompts steered into its running turn. */
  readonly steered: Array<string>
  readonly interrupts: () => number
}

const runtime = (agentId: string, steers: boolean): Runtime => {
  const started: Runtime["started"] = []
  const steered: Array<string> = []
  let interrupts = 0
  const session: AgentSession = {
    persistence: Effect.succeed({ provider: "fake", sessionId: `session-${agentId}` }),
    startTurn: (text, turnId) =>
      Effect.sync(() => {
        const end = Deferred.makeUnsafe<TurnEnd>()
        started.push({ text, turnId, end })
        return Deferred.await(end)
      }),
    steer: steers ? (text) => Effect.sync(() => steered.push(text) > 0) : undefined,
    outOfBand: () => undefined,
    respondToPermission: () => Effect.void,
    interrupt: Effect.sync(() => void interrupts++),
    close: Effect.void
  }
  const agent: LiveAgent = makeLiveAgent({
    agentId,
    session,
    parentAgentId: undefined,
    internal: false,
    provider: "fake",
    marker: "marker",
    sessionId: `session-${agentId}`,
    lastActivityAt: 0
  })

  return { agent, started, steered, interrupts: () => interrupts }
}

const record = (agentId: string): AgentRecord => ({
  agentId,
  provider: "fake",
  cwd: "/work",
  labels: {},
  persistence: { provider: "fake", sessionId: `session-${agentId}` },
  lifecycle: "active",
  createdAt: 0,
  lastActivityAt: 0,
  closedAt: null
})

/**
 * The turn owner over a stand-in residency: `agents` are known, and resident when `resident`;
 * a released agent is resumed (a new runtime) by `ensureResident`.
 */
const turnOwner = Effect.fnUntraced(function*(options: { readonly steers?: boolean; readonly resident?: boolean } = {}) {
  const journal = yield* TurnJournalMemory.make
  const scope = yield* Effect.scope
  const records = new Map<string, AgentRecord>([["a", record("a")]])
  const runtimes: Array<Runtime> = []
  const live = new Map<string, LiveAgent>()
  const resumeRuntime = (agentId: string) => {
    const made = runtime(agentId, options.steers ?? false)
    runtimes.push(made)
    live.set(agentId, made.agent)
    return made
  }
  if (options.resident !== false) resumeRuntime("a")
  const state = { shuttingDown: false, resumes: 0, turnsEnded: 0 }
  const finishes: Array<{ readonly agentId: string; readonly kind: FinishKind }> = []
  const port: ResidencyPort = {
    recordOf: (agentId) => records.get(agentId),
    liveOf: (agentId) => live.get(agentId),
    refusal: (agentId) =>
      state.shuttingDown ? ShuttingDown.of(`a prompt to ${agentId}`) : records.has(agentId) ? undefined : AgentNotFound.of(agentId),
    requireRunnable: () => Effect.void,
    admit: (agentId) => state.shuttingDown ? undefined : live.get(agentId),
    accepts: (agent) => live.get(agent.agentId) === agent && !state.shuttingDown,
    hostedElsewhere: () => false,
    // As the residency's lane would: whoever comes second finds the runtime the first resumed.
    ensureResident: (agentId) =>
      Effect.andThen(
        Effect.yieldNow,
        Effect.sync(() => {
          if (live.has(agentId)) return
          state.resumes++
          resumeRuntime(agentId)
        })
      ),
    turnEnded: () => Effect.sync(() => void state.turnsEnded++),
    turnSettled: () => {}
  }
  const prompts = makePrompts({
    journal,
    carryScope: yield* Scope.fork(scope),
    turnScope: yield* Scope.fork(scope),
    maxPromptBytes: 1024,
    residency: port,
    announceFinish: (agentId, kind) => void finishes.push({ agentId, kind }),
    publish: () => {}
  })
  return { prompts, journal, runtimes, live, state, finishes, records }
})

/** Lets every fiber that can run, run. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow
})

const end = (started: Runtime["started"][number], reply: string) => Deferred.succeed(started.end, { reply })

describe("the turn owner, through its port", () => {
  it.effect("prompts it cannot steer in queue behind the running turn and run one at a time, in admission order", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner()
      const [runtime] = t.runtimes
      const fibers = yield* Effect.forEach(["one", "two", "three"], (text) =>
        Effect.forkChild(t.prompts.prompt("a", text, { wait: true }), { startImmediately: true }))
      yield* settle
      // One turn runs; the other two wait in its slot, and keep the runtime busy.
      assert.deepStrictEqual(runtime!.started.map((turn) => turn.text), ["one"])
      assert.strictEqual(runtime!.agent.slot.queued, 1)
      assert.strictEqual(runtime!.agent.slot.foregroundMutations, 2)
      assert.strictEqual(runtime!.agent.slot.turn?.turnId, runtime!.started[0]!.turnId)
      yield* end(runtime!.started[0]!, "r1")
      yield* settle
      assert.deepStrictEqual(runtime!.started.map((turn) => turn.text), ["one", "two"])
      yield* end(runtime!.started[1]!, "r2")
      yield* settle
      yield* end(runtime!.started[2]!, "r3")
      const receipts = yield* Effect.forEach(fibers, Fiber.join)
      assert.deepStrictEqual(receipts.map((receipt) => receipt.output), ["r1", "r2", "r3"])
      assert.isTrue(receipts.every((receipt) => receipt.state === "completed" && receipt.disposition === "turn"))
      assert.strictEqual(new Set(receipts.map((receipt) => receipt.turnId)).size, 3)
      // The slot is free again, and each turn's end was announced and reported to the residency.
      assert.isUndefined(runtime!.agent.slot.turn)
      assert.strictEqual(runtime!.agent.slot.queued, 0)
      assert.strictEqual(runtime!.agent.slot.foregroundMutations, 0)
      assert.deepStrictEqual(t.finishes.map((finish) => finish.kind), ["finished", "finished", "finished"])
      assert.strictEqual(t.state.turnsEnded, 3)
      assert.deepStrictEqual(t.prompts.carried(), [])
    }))

  it.effect("concurrent prompts to a runtime that steers join the running turn and share its outcome", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner({ steers: true })
      const [runtime] = t.runtimes
      const first = yield* Effect.forkChild(t.prompts.prompt("a", "first", { wait: true }), { startImmediately: true })
      yield* settle
      const joined = yield* Effect.forEach(["second", "third"], (text) =>
        Effect.forkChild(t.prompts.prompt("a", text, { wait: true }), { startImmediately: true }))
      yield* settle
      assert.strictEqual(runtime!.started.length, 1)
      assert.deepStrictEqual(runtime!.steered, ["second", "third"])
      yield* end(runtime!.started[0]!, "all done")
      const head = yield* Fiber.join(first)
      const rest = yield* Effect.forEach(joined, Fiber.join)
      assert.strictEqual(head.disposition, "turn")
      for (const receipt of rest) {
        assert.strictEqual(receipt.disposition, "steer")
        assert.strictEqual(receipt.joinedTurnId, head.turnId)
        assert.strictEqual(receipt.output, "all done")
        assert.strictEqual(receipt.state, "completed")
      }
      assert.strictEqual(new Set([head, ...rest].map((receipt) => receipt.turnId)).size, 3)
    }))

  it.effect("repeats of one client message id, concurrent or later, get the first one's turn and never a new one", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner()
      const [runtime] = t.runtimes
      const repeats = yield* Effect.forEach(Array.from({ length: 5 }), () =>
        Effect.forkChild(t.prompts.prompt("a", "once", { clientMessageId: "m-1", wait: true }), { startImmediately: true }))
      yield* settle
      assert.strictEqual(runtime!.started.length, 1)
      yield* end(runtime!.started[0]!, "only reply")
      const receipts = yield* Effect.forEach(repeats, Fiber.join)
      assert.strictEqual(new Set(receipts.map((receipt) => receipt.turnId)).size, 1)
      assert.isTrue(receipts.every((receipt) => receipt.output === "only reply"))
      // Once ended, a repeat is answered from the journal.
      const later = yield* t.prompts.prompt("a", "once", { clientMessageId: "m-1", wait: true })
      assert.strictEqual(later.turnId, receipts[0]!.turnId)
      assert.strictEqual(later.output, "only reply")
      assert.strictEqual(runtime!.started.length, 1)
      assert.strictEqual((yield* t.journal.recent("a", 10)).length, 1)
    }))

  it.effect("awaitIdle waits for the turn and the queue behind it; the shutdown answers waiting callers", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner()
      const [runtime] = t.runtimes
      yield* t.prompts.prompt("a", "one")
      const second = yield* Effect.forkChild(t.prompts.prompt("a", "two", { wait: true }), { startImmediately: true })
      const idle = yield* Effect.forkChild(t.prompts.awaitIdle("a"), { startImmediately: true })
      yield* end(runtime!.started[0]!, "r1")
      yield* settle
      // The queued prompt took the slot as the first turn ended: not idle yet.
      assert.isUndefined(idle.pollUnsafe())
      assert.deepStrictEqual(runtime!.started.map((turn) => turn.text), ["one", "two"])
      yield* t.prompts.stopWaiting
      const stopped = yield* Fiber.await(second)
      assert.isTrue(Exit.isFailure(stopped))
      assert.isUndefined(idle.pollUnsafe())
      yield* end(runtime!.started[1]!, "r2")
      yield* Fiber.join(idle)
      assert.strictEqual(Option.getOrThrow(yield* t.journal.get("a", runtime!.started[1]!.turnId)).state, "completed")
    }))

  it.effect("an interrupt asked for while a turn runs makes its end an interruption", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner()
      const [runtime] = t.runtimes
      const turn = yield* Effect.forkChild(t.prompts.prompt("a", "long", { wait: true }), { startImmediately: true })
      yield* settle
      yield* t.prompts.interrupt(runtime!.agent)
      assert.strictEqual(runtime!.interrupts(), 1)
      yield* end(runtime!.started[0]!, "partial")
      const receipt = yield* Fiber.join(turn)
      assert.strictEqual(receipt.state, "interrupted")
      assert.strictEqual(receipt.error?._tag, "TurnInterrupted")
    }))

  it.effect("a prompt to a released agent has it resumed, once for all the prompts that race", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner({ resident: false, steers: true })
      const receipts = yield* Effect.forEach(["x", "y"], (text) => t.prompts.prompt("a", text), { concurrency: "unbounded" })
      assert.strictEqual(t.state.resumes, 1)
      assert.isTrue(receipts.every((receipt) => receipt.resumed))
      assert.strictEqual(t.runtimes.length, 1)
    }))

  it.effect("refused prompts are never accepted: an unknown agent, a prompt too large, a shutdown", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner()
      assert.strictEqual((yield* Effect.flip(t.prompts.prompt("b", "hi")))._tag, "AgentNotFound")
      assert.strictEqual((yield* Effect.flip(t.prompts.prompt("a", "x".repeat(2000))))._tag, "PromptTooLarge")
      t.state.shuttingDown = true
      assert.strictEqual((yield* Effect.flip(t.prompts.prompt("a", "hi")))._tag, "ShuttingDown")
      assert.deepStrictEqual(yield* t.journal.recent("a", 10), [])
      assert.strictEqual(t.prompts.accepting(), 0)
    }))

  it.effect("recovery: a turn left running is recorded interrupted and never run again; one left accepted is dispatched", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner()
      const [runtime] = t.runtimes
      const left = (turnId: string, text: string, acceptedAt: number): TurnRecord => ({
        turnId,
        agentId: "a",
        clientMessageId: null,
        text,
        state: "accepted",
        disposition: null,
        joinedTurnId: null,
        resumed: false,
        reply: null,
        error: null,
        acceptedAt,
        dispatchedAt: null,
        endedAt: null
      })
      yield* t.journal.accept({ record: left("t-running", "was running", 1), messageIds: [] })
      yield* t.journal.update({ ...left("t-running", "was running", 1), state: "running", disposition: "turn", dispatchedAt: 2 })
      yield* t.journal.accept({ record: left("t-accepted", "never handed over", 3), messageIds: [] })
      yield* t.prompts.recover()
      yield* settle
      const running = Option.getOrThrow(yield* t.journal.get("a", "t-running"))
      assert.strictEqual(running.state, "interrupted")
      assert.strictEqual(running.error?._tag, "DaemonStopped")
      assert.deepStrictEqual(runtime!.started.map((turn) => turn.turnId), ["t-accepted"])
      assert.deepStrictEqual(t.prompts.carried().map((turn) => turn.turnId), ["t-accepted"])
      // The recovered turn can be found and waited for like any other.
      yield* end(runtime!.started[0]!, "done late")
      yield* settle
      assert.strictEqual((yield* t.prompts.turn("a", "t-accepted")).state, "completed")
      // A second recovery finds nothing left to do.
      yield* t.prompts.recover()
      assert.strictEqual(runtime!.started.length, 1)
    }))

  it.effect("a delete is refused while a turn of the agent is in flight", () =>
    Effect.gen(function*() {
      const t = yield* turnOwner()
      const [runtime] = t.runtimes
      yield* t.prompts.prompt("a", "busy")
      const refused = yield* Effect.flip(t.prompts.refuseDelete("a"))
      assert.strictEqual(refused._tag, "AgentBusy")
      yield* end(runtime!.started[0]!, "done")
      yield* settle
      yield* t.prompts.refuseDelete("a")
    }))
})
