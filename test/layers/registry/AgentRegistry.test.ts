import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { internalAgentLabel, parentAgentIdLabel } from "../../../src/domain/agent.ts"
import { AgentStoreError } from "../../../src/domain/errors.ts"
import { type StopAnswer, stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as SqlAgentStore from "../../../src/layers/store/SqlAgentStore.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"
import { harness, minutes } from "./harness.ts"

/** A held close: the test sees it start and decides when it finishes. */
const holdCloses = Effect.fnUntraced(function*(provider: MemoryProvider) {
  const entered = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  provider.closeGate = Deferred.succeed(entered, undefined).pipe(Effect.andThen(Deferred.await(release)))
  return { entered, release }
})

const tempFile = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-registry-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir) => join(dir, "agents.sqlite")))

describe("AgentRegistry: release and resume (the seed scenarios)", () => {
  it.effect("honours a provider veto, then resumes the saved conversation (C2, C6)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      let safe = false
      h.provider.probe = () => Effect.sync(() => safe ? stopPermitted : stopVetoed("test veto"))
      const agent = yield* h.create()
      const sessionId = agent.persistence!.sessionId
      assert.deepStrictEqual(yield* h.sweepAt(61), { collected: [], failures: [] })
      safe = true
      assert.deepStrictEqual(yield* h.sweepAt(61), { collected: [], failures: [] })
      assert.deepStrictEqual((yield* h.sweepAt(122)).collected, [
        { agentId: agent.agentId, provider: "codex", sessionId }
      ])
      const released = yield* h.registry.get(agent.agentId)
      assert.isFalse(released.resident)
      assert.strictEqual(released.record.lifecycle, "closed")
      assert.deepStrictEqual(released.record.persistence, agent.persistence)

      const receipt = yield* h.registry.prompt(agent.agentId, "Continue the saved conversation")
      assert.deepStrictEqual(receipt, {
        agentId: agent.agentId,
        sessionId,
        state: "running",
        disposition: "turn",
        joinedTurnId: null,
        resumed: true,
        turnId: receipt.turnId,
        error: null
      })
      assert.match(receipt.turnId, /^turn-[0-9a-f]{16}$/)
      assert.strictEqual(h.provider.resumes, 1)
      assert.deepStrictEqual(h.provider.deliveredTo(sessionId), ["Continue the saved conversation"])
      const resumed = yield* h.registry.get(agent.agentId)
      assert.isTrue(resumed.resident)
      assert.deepStrictEqual(resumed.record.persistence, agent.persistence)
    }))

  it.effect("a prompt during the asynchronous probe prevents the release (C8, C9)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const entered = yield* Deferred.make<void>()
      const answer = yield* Deferred.make<StopAnswer>()
      h.provider.probe = () => Deferred.succeed(entered, undefined).pipe(Effect.andThen(Deferred.await(answer)))
      const agent = yield* h.create()
      yield* TestClock.setTime(minutes(61))
      const sweep = yield* h.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(entered)
      yield* h.registry.prompt(agent.agentId, "arrived during safety query")
      yield* Deferred.succeed(answer, stopPermitted)
      assert.deepStrictEqual((yield* Fiber.join(sweep)).collected, [])
      assert.strictEqual(h.provider.closes, 0)
    }))

  it.effect("an idle managed child with background work retains its parent (C5)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      // The child's session is the second the provider opens.
      h.provider.probe = (sessionId) =>
        Effect.succeed(sessionId === "codex-session-2" ? stopVetoed("background work in the child") : stopPermitted)
      const parent = yield* h.create()
      const child = yield* h.create({ parentAgentId: parent.agentId })
      assert.strictEqual(child.persistence!.sessionId, "codex-session-2")
      assert.deepStrictEqual((yield* h.sweepAt(61)).collected, [])
      assert.strictEqual(h.provider.closes, 0)
    }))

  it.effect("a delivery queued during the probe prevents the release (C4, C8)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      let agentId = ""
      h.provider.probe = () => Effect.sync(() => (h.protection.protect(agentId), stopPermitted))
      agentId = (yield* h.create()).agentId
      assert.deepStrictEqual((yield* h.sweepAt(61)).collected, [])
      assert.strictEqual(h.provider.closes, 0)
    }))

  it.effect("a prompt racing the close waits for it and resumes exactly once (C9)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      h.provider.probe = () => Effect.succeed(stopPermitted)
      const agent = yield* h.create()
      const sessionId = agent.persistence!.sessionId
      const close = yield* holdCloses(h.provider)
      yield* TestClock.setTime(minutes(61))
      const sweep = yield* h.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(close.entered)
      const run = yield* h.registry.prompt(agent.agentId, "arrived while closing").pipe(Effect.forkChild)
      yield* Effect.yieldNow
      assert.deepStrictEqual(h.provider.deliveredTo(sessionId), [], "nothing reaches the closing runtime")
      yield* Deferred.succeed(close.release, undefined)
      assert.strictEqual((yield* Fiber.join(sweep)).collected.length, 1)
      const receipt = yield* Fiber.join(run)
      assert.strictEqual(receipt.sessionId, sessionId)
      assert.isTrue(receipt.resumed)
      assert.strictEqual(h.provider.closes, 1)
      assert.strictEqual(h.provider.resumes, 1)
      assert.deepStrictEqual(h.provider.deliveries, [{ sessionId, prompt: "arrived while closing", via: "turn" }])
    }))

  it.effect("an out-of-band command racing the close waits for the resumed runtime (C9)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      h.provider.probe = () => Effect.succeed(stopPermitted)
      const agent = yield* h.create()
      const sessionId = agent.persistence!.sessionId
      const close = yield* holdCloses(h.provider)
      yield* TestClock.setTime(minutes(61))
      const sweep = yield* h.collector.sweep.pipe(Effect.forkChild)
      yield* Deferred.await(close.entered)
      const command = yield* h.registry.prompt(agent.agentId, "/maintenance").pipe(Effect.forkChild)
      yield* Effect.yieldNow
      const deliveredWhileClosing = [...h.provider.deliveries]
      yield* Deferred.succeed(close.release, undefined)
      yield* Fiber.join(sweep)
      assert.deepStrictEqual(deliveredWhileClosing, [])
      assert.strictEqual((yield* Fiber.join(command)).disposition, "out-of-band")
      assert.deepStrictEqual(h.provider.deliveries, [{ sessionId, prompt: "/maintenance", via: "out-of-band" }])
    }))
})

describe("AgentRegistry: exactly once, in order", () => {
  it.effect("many concurrent prompts to a released agent give one resume and each prompt once, in order", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const sessionId = agent.persistence!.sessionId
      h.provider.turnGate = Effect.never
      assert.strictEqual((yield* h.collector.collectNow(agent.agentId))._tag, "Collected")
      const prompts = Array.from({ length: 200 }, (_, i) => `prompt ${i}`)
      const receipts = yield* Effect.forEach(prompts, (text) => h.registry.prompt(agent.agentId, text), {
        concurrency: "unbounded"
      })
      assert.strictEqual(h.provider.resumes, 1)
      assert.deepStrictEqual(h.provider.deliveredTo(sessionId), prompts)
      assert.deepStrictEqual(receipts.map((receipt) => receipt.disposition), [
        "turn",
        ...prompts.slice(1).map(() => "steer" as const)
      ])
      // Each prompt is its own turn record; the steered ones joined the first.
      assert.strictEqual(new Set(receipts.map((receipt) => receipt.turnId)).size, prompts.length)
      assert.isTrue(receipts.slice(1).every((receipt) => receipt.joinedTurnId === receipts[0]!.turnId))
      assert.isTrue(receipts.every((receipt) => receipt.sessionId === sessionId))
    }))

  it.effect("a prompt admitted before the release begins keeps the runtime (C9)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      h.provider.turnGate = Effect.never
      yield* h.registry.prompt(agent.agentId, "long task")
      const outcome = yield* h.collector.collectNow(agent.agentId)
      assert.strictEqual(outcome._tag, "Retained")
      if (outcome._tag === "Retained") {
        assert.deepStrictEqual(outcome.residency.blockers, [{ agentId: agent.agentId, kind: "foreground-turn" }])
      }
      assert.strictEqual(h.provider.closes, 0)
    }))

  it.effect("a registry restarted on the same SQLite file resumes a released agent (C2)", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const provider = new MemoryProvider("codex")
      const store = SqlAgentStore.layer(file)
      const agent = yield* Effect.scoped(Effect.gen(function*() {
        const h = yield* harness({ provider, store })
        const agent = yield* h.create()
        yield* h.registry.prompt(agent.agentId, "first")
        yield* h.registry.awaitIdle(agent.agentId)
        assert.strictEqual((yield* h.collector.collectNow(agent.agentId))._tag, "Collected")
        return agent
      }))
      const h = yield* harness({ provider, store })
      const view = yield* h.registry.get(agent.agentId)
      assert.isFalse(view.resident)
      assert.strictEqual(view.record.lifecycle, "closed")
      const receipt = yield* h.registry.prompt(agent.agentId, "second")
      assert.isTrue(receipt.resumed)
      assert.strictEqual(receipt.sessionId, agent.persistence!.sessionId)
      assert.deepStrictEqual(provider.transcripts.get(agent.persistence!.sessionId), ["first", "second"])
    }))
})

describe("AgentRegistry: failures", () => {
  it.effect("a failed close keeps the runtime registered and resident (C10)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      h.provider.closeFailure = "process did not exit"
      const report = yield* h.sweepAt(61)
      assert.deepStrictEqual(report.collected, [])
      assert.strictEqual(report.failures[0]?.error._tag, "RuntimeCloseFailed")
      assert.isTrue((yield* h.registry.get(agent.agentId)).resident)
      h.provider.closeFailure = undefined
      const receipt = yield* h.registry.prompt(agent.agentId, "still here")
      assert.isFalse(receipt.resumed)
      assert.strictEqual(h.provider.resumes, 0)
    }))

  it.effect("a failed persist after a successful close is reported and the agent stays resumable (C10)", () =>
    Effect.gen(function*() {
      const failingClosedWrites = Layer.effect(AgentStore, Effect.map(AgentStoreMemory.make, (store) => ({
        ...store,
        put: (record) =>
          record.lifecycle === "closed"
            ? Effect.fail(new AgentStoreError({ operation: "put", agentId: record.agentId, message: "disk full" }))
            : store.put(record)
      })))
      const h = yield* harness({ store: failingClosedWrites })
      const agent = yield* h.create()
      const report = yield* h.sweepAt(61)
      assert.deepStrictEqual(report.collected, [])
      assert.deepStrictEqual(report.failures.map((failure) => failure.error._tag), ["RuntimePersistFailed"])
      assert.isFalse((yield* h.registry.get(agent.agentId)).resident)
      const receipt = yield* h.registry.prompt(agent.agentId, "resume anyway")
      assert.isTrue(receipt.resumed)
      assert.strictEqual(receipt.sessionId, agent.persistence!.sessionId)
    }))

  it.effect("prompting an unknown agent fails with AgentNotFound", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const error = yield* Effect.flip(h.registry.prompt("nobody", "hello"))
      assert.strictEqual(error._tag, "AgentNotFound")
    }))
})

describe("AgentRegistry: finish positions (D2)", () => {
  it.effect("a watch from a position is answered at once by a finish already journaled past it, and otherwise by the next", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      yield* h.registry.prompt(agent.agentId, "first", { wait: true })
      for (let i = 0; i < 3; i++) yield* Effect.yieldNow
      // Position 0 was seen before that finish: it is owed, though the watch comes after it.
      const owed = yield* h.registry.awaitFinish(agent.agentId, { after: 0 })
      assert.strictEqual(owed.kind, "finished")
      // Position 1 is that finish: the watch waits for the next one.
      const next = yield* Effect.forkChild(h.registry.awaitFinish(agent.agentId, { after: 1 }), { startImmediately: true })
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow
      assert.isUndefined(next.pollUnsafe())
      yield* h.registry.prompt(agent.agentId, "second", { wait: true })
      assert.strictEqual((yield* Fiber.join(next)).kind, "finished")
    }))
})

describe("AgentRegistry: the daemon baseline (C4)", () => {
  it.effect("names every blocker a live runtime can have", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const blockers = Effect.map(h.collector.explain(agent.agentId), (r) => r.blockers.map((b) => b.kind))
      assert.deepStrictEqual(yield* blockers, [])

      h.provider.emit(agent.agentId, { _tag: "PermissionRequested", id: "p1" })
      assert.deepStrictEqual(yield* blockers, ["undrained-events"], "before the event is processed")
      yield* Effect.yieldNow
      assert.deepStrictEqual(yield* blockers, ["pending-permission"])
      yield* h.registry.respondToPermission(agent.agentId, "p1", true)
      // The permission request's finish is being journaled meanwhile, by a fiber of its own.
      for (let i = 0; i < 3; i++) yield* Effect.yieldNow
      assert.deepStrictEqual(yield* blockers, [])

      h.provider.emit(agent.agentId, { _tag: "SubagentStarted", id: "s1" })
      yield* Effect.yieldNow
      assert.deepStrictEqual(yield* blockers, ["running-subagents"])
      h.provider.emit(agent.agentId, { _tag: "SubagentFinished", id: "s1" })
      yield* Effect.yieldNow
      assert.deepStrictEqual(yield* blockers, [])

      h.provider.turnGate = Effect.never
      yield* h.registry.prompt(agent.agentId, "work")
      assert.deepStrictEqual(yield* blockers, ["foreground-turn"])
    }))

  it.effect("two answers to one permission at once: one reaches the provider, the other is told it is not pending", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const answers: Array<boolean> = []
      h.provider.onPermissionAnswer = (_, allow) => answers.push(allow)
      h.provider.emit(agent.agentId, { _tag: "PermissionRequested", id: "p1" })
      // Both arrive before the request's event is processed (the page's Allow, the CLI's deny).
      const allow = yield* Effect.forkChild(Effect.result(h.registry.respondToPermission(agent.agentId, "p1", true)))
      const deny = yield* Effect.forkChild(Effect.result(h.registry.respondToPermission(agent.agentId, "p1", false)))
      const outcomes = [yield* Fiber.join(allow), yield* Fiber.join(deny)]
      assert.deepStrictEqual(answers, [true], "one answer reached the provider")
      assert.strictEqual(outcomes[0]!._tag, "Success")
      const second = outcomes[1]!
      assert.strictEqual(second._tag === "Failure" ? second.failure._tag : second._tag, "PermissionNotPending")
      yield* Effect.yieldNow
      assert.deepStrictEqual((yield* h.registry.get(agent.agentId)).pendingPermissions, [])
    }))

  it.effect("an internal agent is never released", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create({ internal: true })
      assert.deepStrictEqual((yield* h.sweepAt(600)).collected, [])
      assert.isTrue((yield* h.registry.get(agent.agentId)).resident)
    }))

  it.effect("the quiesce.* labels come only from their fields: set directly, the create is refused", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const parent = yield* h.create({ labels: { team: "core" } })
      const child = yield* h.create({ parentAgentId: parent.agentId, internal: true, labels: { team: "core" } })
      assert.deepStrictEqual(child.labels, { team: "core", [parentAgentIdLabel]: parent.agentId, [internalAgentLabel]: "true" })
      for (const label of [parentAgentIdLabel, internalAgentLabel, "quiesce.anything"]) {
        const refused = yield* Effect.flip(h.create({ labels: { team: "core", [label]: parent.agentId } }))
        assert.strictEqual(refused._tag, "ReservedLabel")
        assert.strictEqual(refused._tag === "ReservedLabel" && refused.label, label)
        assert.include(refused.message, `"${label}" is reserved`)
      }
      assert.strictEqual((yield* h.registry.list).length, 2, "a refused create opens and stores nothing")
    }))

  it.effect("session activity restarts the idle period", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      yield* TestClock.setTime(minutes(30))
      h.provider.emit(agent.agentId, { _tag: "Activity" })
      yield* Effect.yieldNow
      assert.deepStrictEqual((yield* h.sweepAt(89)).collected, [])
      assert.deepStrictEqual((yield* h.sweepAt(90)).collected.map((c) => c.agentId), [agent.agentId])
    }))

  it.effect("explicit close keeps the record resumable, and interrupt never resumes", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      yield* h.registry.close(agent.agentId)
      yield* h.registry.interrupt(agent.agentId)
      assert.isFalse((yield* h.registry.get(agent.agentId)).resident)
      assert.strictEqual(h.provider.resumes, 0)
      const stored = yield* h.registry.get(agent.agentId)
      assert.isNotNull(stored.record.closedAt)
      assert.isTrue((yield* h.registry.prompt(agent.agentId, "back")).resumed)
    }))

  it.effect("a close unless blocked checks in the lane: a running turn keeps the runtime and is named; a plain close ends it", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      h.provider.turnGate = Effect.never
      yield* h.registry.prompt(agent.agentId, "long job")
      assert.deepStrictEqual(yield* h.registry.close(agent.agentId, { unlessBlocked: true }), [{ kind: "foreground-turn" }])
      assert.isTrue((yield* h.registry.get(agent.agentId)).resident)
      assert.strictEqual(h.provider.closes, 0)
      assert.deepStrictEqual(yield* h.registry.close(agent.agentId), [{ kind: "foreground-turn" }], "a plain close answers what it ended")
      assert.isFalse((yield* h.registry.get(agent.agentId)).resident)
      assert.deepStrictEqual(yield* h.registry.close(agent.agentId, { unlessBlocked: true }), [], "nothing live: nothing keeps it")
    }))

  it.effect("reload closes and resumes the same session with a new runtime identity", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const before = yield* h.registry.candidates.captureFamily(agent.agentId)
      yield* h.registry.reload(agent.agentId)
      const after = yield* h.registry.candidates.captureFamily(agent.agentId)
      assert.notStrictEqual(after[0]!.identity, before[0]!.identity)
      assert.strictEqual(after[0]!.sessionId, before[0]!.sessionId)
      assert.strictEqual(h.provider.closes, 1)
      assert.strictEqual(h.provider.resumes, 1)
    }))

  it.effect("the same client message id twice gives one turn and the first receipt", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const first = yield* h.registry.prompt(agent.agentId, "once", { clientMessageId: "m-1" })
      const again = yield* h.registry.prompt(agent.agentId, "once", { clientMessageId: "m-1" })
      assert.deepStrictEqual(again, first)
      assert.deepStrictEqual(h.provider.deliveries.map((d) => d.prompt), ["once"])
      const other = yield* h.registry.prompt(agent.agentId, "twice", { clientMessageId: "m-2" })
      assert.notStrictEqual(other.turnId, null)
    }))

  it.effect("a waiting prompt returns its own turn's reply, not the last one reported", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      h.provider.turnEnd = (prompt) => Effect.succeed({ reply: `done: ${prompt}` })
      // A later reply (an autonomous notification, say) is not this turn's.
      h.provider.turnGate = Effect.sync(() => h.provider.emit(agent.agentId, { _tag: "Reply", text: "something else" }))
      const receipt = yield* h.registry.prompt(agent.agentId, "work", { wait: true })
      assert.strictEqual(receipt.state, "completed")
      assert.strictEqual(receipt.output, "done: work")
      assert.isNull(receipt.error)
    }))
})


describe("AgentRegistry: deleting agents", () => {
  it.effect("delete ends the runtime and forgets the agent and its turns; the lane map holds only lanes in use", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agents = yield* Effect.forEach([1, 2, 3], () => h.create())
      const turns = yield* Effect.forEach(agents, (agent) => h.registry.prompt(agent.agentId, "work", { wait: true }))
      yield* h.registry.close(agents[0]!.agentId)
      // Every operation has ended: no lane is held for an agent with nothing in progress.
      assert.strictEqual(yield* h.registry.laneCount, 0)

      for (const agent of agents) yield* h.registry.delete(agent.agentId)
      assert.deepStrictEqual(yield* h.registry.list, [])
      assert.strictEqual(h.provider.live.size, 0, "every runtime ended")
      assert.strictEqual(yield* h.registry.laneCount, 0)
      const gone = yield* Effect.flip(h.registry.turn(agents[1]!.agentId, turns[1]!.turnId))
      assert.strictEqual(gone._tag, "AgentNotFound")
      assert.strictEqual((yield* Effect.flip(h.registry.delete(agents[1]!.agentId)))._tag, "AgentNotFound")
    }))

  it.effect("a turn that has not ended refuses the delete, naming it; nothing is lost", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      h.provider.turnGate = Effect.never
      const agent = yield* h.create()
      const receipt = yield* h.registry.prompt(agent.agentId, "long work")
      const refused = yield* Effect.flip(h.registry.delete(agent.agentId))
      assert.strictEqual(refused._tag, "AgentBusy")
      assert.include(refused.message, receipt.turnId)
      assert.isTrue((yield* h.registry.get(agent.agentId)).resident)
      assert.strictEqual((yield* h.registry.turn(agent.agentId, receipt.turnId)).state, "running")
    }))

  it.effect("a prompt that raced a delete is either refused or refuses the delete: never accepted and lost", () =>
    Effect.gen(function*() {
      // A prompt still being accepted when the delete looks: the delete is refused.
      const accepting = yield* Deferred.make<void>()
      const proceed = yield* Deferred.make<void>()
      const journal = yield* TurnJournalMemory.make
      const held = Layer.succeed(TurnJournal, TurnJournal.of({
        ...journal,
        accept: (input) =>
          Deferred.succeed(accepting, undefined).pipe(Effect.andThen(Deferred.await(proceed)), Effect.andThen(journal.accept(input)))
      }))
      const h = yield* harness({ journal: held })
      const agent = yield* h.create()
      const prompt = yield* Effect.forkChild(h.registry.prompt(agent.agentId, "work", { wait: true }))
      yield* Deferred.await(accepting)
      const refused = yield* Effect.flip(h.registry.delete(agent.agentId))
      assert.deepInclude(refused, { _tag: "AgentBusy", turnId: null })
      yield* Deferred.succeed(proceed, undefined)
      assert.strictEqual((yield* Fiber.join(prompt)).state, "completed")

      // A prompt that arrives while the delete is closing the runtime: refused, nothing accepted.
      const { entered, release } = yield* holdCloses(h.provider)
      const deleting = yield* Effect.forkChild(h.registry.delete(agent.agentId))
      yield* Deferred.await(entered)
      const late = yield* Effect.flip(h.registry.prompt(agent.agentId, "too late"))
      assert.strictEqual(late._tag, "AgentNotFound")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(deleting)
      assert.deepStrictEqual(yield* journal.unfinished, [])
      assert.strictEqual((yield* Effect.flip(h.registry.close(agent.agentId)))._tag, "AgentNotFound")
    }))
})
