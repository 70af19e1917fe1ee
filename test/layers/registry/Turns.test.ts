/**
 * Turns with identity: every accepted prompt is a journal record, carried by the registry (never
 * by its caller) to an honest outcome, one turn at a time per runtime.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import { TestClock } from "effect/testing"
import { ProviderFailed } from "../../../src/domain/errors.ts"
import type { TurnRecord } from "../../../src/domain/turn.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"
import { harness } from "./harness.ts"

/** A gate every turn waits on until it is opened (then turns end at once). */
const gated = Effect.fnUntraced(function*(provider: MemoryProvider) {
  const gate = yield* Deferred.make<void>()
  provider.turnGate = Deferred.await(gate)
  return { open: Deferred.succeed(gate, undefined) }
})

/** Shared store and journal, so one test can run two registries in turn over the same state. */
const durableState = Effect.gen(function*() {
  const store = yield* AgentStoreMemory.make
  const journal = yield* TurnJournalMemory.make
  return {
    journal,
    store: Layer.succeed(AgentStore, store),
    journalLayer: Layer.succeed(TurnJournal, journal)
  }
})

const blockersOf = (h: Effect.Success<ReturnType<typeof harness>>, agentId: string) =>
  Effect.map(h.collector.explain(agentId), (residency) => residency.blockers.map((blocker) => blocker.kind))

describe("turns: one at a time, each its own", () => {
  it.effect("prompts a runtime cannot steer into run as turns of their own, in order, each with its own reply", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("shellish")
      provider.steers = false
      provider.turnEnd = (prompt) => Effect.succeed({ reply: `out: ${prompt}` })
      const h = yield* harness({ provider })
      const agent = yield* h.create()
      const prompts = Array.from({ length: 100 }, (_, i) => `echo ${i}`)
      const receipts = yield* Effect.forEach(prompts, (text) => h.registry.prompt(agent.agentId, text, { wait: true }), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(receipts.map((receipt) => receipt.output), prompts.map((text) => `out: ${text}`))
      assert.isTrue(receipts.every((receipt) => receipt.state === "completed" && receipt.disposition === "turn"))
      assert.strictEqual(new Set(receipts.map((receipt) => receipt.turnId)).size, prompts.length)
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), prompts)
      assert.isTrue(provider.deliveries.every((delivery) => delivery.via === "turn"))
      // Nothing is left holding the runtime.
      assert.deepStrictEqual(yield* blockersOf(h, agent.agentId), [])
      assert.strictEqual((yield* h.collector.collectNow(agent.agentId))._tag, "Collected")
    }))

  it.effect("a prompt arriving during a turn waits, queued, and keeps the runtime until it ran", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("shellish")
      provider.steers = false
      const h = yield* harness({ provider })
      const gate = yield* gated(provider)
      const agent = yield* h.create()
      const first = yield* h.registry.prompt(agent.agentId, "first")
      assert.strictEqual(first.state, "running")
      const second = yield* h.registry.prompt(agent.agentId, "second").pipe(Effect.forkChild)
      yield* Effect.yieldNow
      assert.isUndefined(second.pollUnsafe(), "answered once it reached the provider, not before")
      assert.deepStrictEqual(yield* blockersOf(h, agent.agentId), ["foreground-turn", "queued-prompt", "foreground-mutation"])
      assert.strictEqual((yield* h.collector.collectNow(agent.agentId))._tag, "Retained")
      yield* gate.open
      const receipt = yield* Fiber.join(second)
      assert.strictEqual(receipt.disposition, "turn")
      assert.strictEqual((yield* h.registry.turn(agent.agentId, first.turnId)).state, "completed")
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["first", "second"])
    }))

  it.effect("lists the agent's recent turns newest first, in flight or ended, as `turn` reports them", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("shellish")
      provider.steers = false
      const h = yield* harness({ provider })
      const gate = yield* gated(provider)
      const agent = yield* h.create()
      const first = yield* h.registry.prompt(agent.agentId, "first")
      const second = yield* h.registry.prompt(agent.agentId, "second", { wait: true }).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      const during = yield* h.registry.turns(agent.agentId, 10)
      assert.deepStrictEqual(during.map((record) => [record.text, record.state]), [["second", "accepted"], ["first", "running"]])
      assert.deepStrictEqual(during[1], yield* h.registry.turn(agent.agentId, first.turnId))
      yield* gate.open
      yield* Fiber.join(second)
      const after = yield* h.registry.turns(agent.agentId, 1)
      assert.deepStrictEqual(after.map((record) => [record.text, record.state]), [["second", "completed"]])
      const unknown = yield* Effect.flip(h.registry.turns("nobody", 10))
      assert.strictEqual(unknown._tag, "AgentNotFound")
    }))

  it.effect("a provider that steers takes the prompt into the running turn; it shares that turn's outcome", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      h.provider.turnEnd = () => Effect.succeed({ reply: "both done" })
      const gate = yield* gated(h.provider)
      const agent = yield* h.create()
      const first = yield* h.registry.prompt(agent.agentId, "first")
      const steered = yield* h.registry.prompt(agent.agentId, "more", { wait: true }).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      yield* gate.open
      const receipt = yield* Fiber.join(steered)
      assert.strictEqual(receipt.disposition, "steer")
      assert.strictEqual(receipt.joinedTurnId, first.turnId)
      assert.notStrictEqual(receipt.turnId, first.turnId)
      assert.strictEqual(receipt.state, "completed")
      assert.strictEqual(receipt.output, "both done")
    }))
})

describe("turns: races found in review", () => {
  it.effect("a turn that ends while a prompt is being steered into it wakes that prompt (no lost wake-up)", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const turnGate = yield* Deferred.make<void>()
      h.provider.turnGate = Deferred.await(turnGate)
      const agent = yield* h.create()
      yield* h.registry.prompt(agent.agentId, "first")
      // The steer is held while the running turn ends; the provider then refuses it (no turn runs).
      const steerGate = yield* Deferred.make<void>()
      h.provider.dispatchGate = Deferred.await(steerGate)
      const second = yield* h.registry.prompt(agent.agentId, "second", { wait: true }).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      yield* Deferred.succeed(turnGate, undefined)
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      h.provider.dispatchGate = Effect.void
      yield* Deferred.succeed(steerGate, undefined)
      const receipt = yield* Fiber.join(second)
      assert.strictEqual(receipt.state, "completed")
      assert.strictEqual(receipt.disposition, "turn")
      assert.deepStrictEqual(h.provider.deliveries.map((delivery) => delivery.prompt), ["first", "second"])
      assert.deepStrictEqual(yield* blockersOf(h, agent.agentId), [])
    }))

  it.effect("a prompt still queued when the shutdown begins is never started: it stays accepted for the next start", () =>
    Effect.gen(function*() {
      const state = yield* durableState
      const provider = new MemoryProvider("shellish")
      provider.steers = false
      const scope = yield* Scope.make()
      const h = yield* harness({ provider, store: state.store, journal: state.journalLayer }).pipe(Scope.provide(scope))
      const gate = yield* Deferred.make<void>()
      provider.turnGate = Deferred.await(gate)
      const agent = yield* h.create()
      yield* h.registry.prompt(agent.agentId, "first")
      yield* h.registry.prompt(agent.agentId, "second", { clientMessageId: "q-1" }).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      yield* h.registry.stopAdmission
      // The running turn ends after the shutdown began: the queued prompt must not start.
      provider.turnGate = Effect.never
      yield* Deferred.succeed(gate, undefined)
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["first"])
      assert.strictEqual(Option.getOrThrow(yield* state.journal.byClientMessageId(agent.agentId, "q-1")).state, "accepted")
    }))

  it.effect("a start that fails without an answer may have run: a repeat never runs it again", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      h.provider.unansweredTurnStarts = 1
      const failed = yield* h.registry.prompt(agent.agentId, "deploy", { clientMessageId: "m-7", wait: true })
      assert.strictEqual(failed.state, "failed")
      const repeat = yield* h.registry.prompt(agent.agentId, "deploy", { clientMessageId: "m-7", wait: true })
      assert.deepStrictEqual(repeat, failed)
      assert.deepStrictEqual(h.provider.deliveries.map((delivery) => delivery.prompt), ["deploy"])
    }))

  it.effect("a close that comes while a completed turn's end is processed leaves it completed", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const memory = yield* AgentStoreMemory.make
      let holdPuts = false
      // A store whose writes the test holds: the turn's end waits on one (a new session handle).
      const store = Layer.succeed(AgentStore, AgentStore.of({
        ...memory,
        put: (record) =>
          holdPuts
            ? Deferred.succeed(entered, undefined).pipe(Effect.andThen(Deferred.await(release)), Effect.andThen(memory.put(record)))
            : memory.put(record)
      }))
      const h = yield* harness({ store })
      h.provider.reportsSessionAfterTurn = true
      h.provider.turnEnd = () => Effect.succeed({ reply: "all done" })
      const agent = yield* h.create()
      holdPuts = true
      const waiting = yield* h.registry.prompt(agent.agentId, "work", { wait: true }).pipe(Effect.forkChild)
      yield* Deferred.await(entered)
      holdPuts = false
      const closing = yield* h.registry.close(agent.agentId).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(closing)
      const receipt = yield* Fiber.join(waiting)
      assert.strictEqual(receipt.state, "completed")
      assert.strictEqual(receipt.output, "all done")
    }))
})

describe("turns: honest outcomes", () => {
  it.effect("a failed turn is reported failed with the provider's message, never with an older reply", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      h.provider.turnEnd = () => Effect.succeed({ reply: "an earlier reply" })
      yield* h.registry.prompt(agent.agentId, "fine", { wait: true })
      h.provider.turnEnd = () => Effect.fail(new ProviderFailed({ provider: "codex", operation: "turn", message: "exit 3" }))
      const receipt = yield* h.registry.prompt(agent.agentId, "broken", { wait: true })
      assert.strictEqual(receipt.state, "failed")
      assert.deepStrictEqual(receipt.error, { _tag: "ProviderFailed", message: "exit 3" })
      assert.isNull(receipt.output)
      const recorded = yield* h.registry.turn(agent.agentId, receipt.turnId)
      assert.strictEqual(recorded.state, "failed")
      assert.isNotNull(recorded.endedAt)
    }))

  it.effect("a turn that ends after an interrupt was asked for is interrupted, however the provider ends it", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const gate = yield* gated(h.provider)
      const agent = yield* h.create()
      const waiting = yield* h.registry.prompt(agent.agentId, "long", { wait: true }).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      yield* h.registry.interrupt(agent.agentId)
      h.provider.turnEnd = () => Effect.fail(new ProviderFailed({ provider: "codex", operation: "turn", message: "aborted" }))
      yield* gate.open
      const receipt = yield* Fiber.join(waiting)
      assert.strictEqual(receipt.state, "interrupted")
      assert.strictEqual(receipt.error?.message, "aborted")
    }))

  it.effect("closing the runtime during a turn records it interrupted, and queued prompts run on the resumed one", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("shellish")
      provider.steers = false
      const h = yield* harness({ provider })
      yield* gated(provider)
      const agent = yield* h.create()
      const cut = yield* h.registry.prompt(agent.agentId, "long", { wait: true }).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      const queued = yield* h.registry.prompt(agent.agentId, "next").pipe(Effect.forkChild)
      yield* Effect.yieldNow
      provider.turnGate = undefined
      yield* h.registry.close(agent.agentId)
      const receipt = yield* Fiber.join(cut)
      assert.strictEqual(receipt.state, "interrupted")
      assert.strictEqual(receipt.error?.message, "the runtime was closed during the turn")
      const next = yield* Fiber.join(queued)
      assert.isTrue(next.resumed)
      assert.strictEqual(provider.resumes, 1)
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["long", "next"])
    }))
})

describe("turns: client message ids", () => {
  it.effect("concurrent duplicates share one turn; a caller that gives up changes nothing for it", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      h.provider.turnEnd = () => Effect.succeed({ reply: "once" })
      const gate = yield* gated(h.provider)
      const agent = yield* h.create()
      const impatient = yield* h.registry.prompt(agent.agentId, "work", { clientMessageId: "m-1", wait: true }).pipe(
        Effect.forkChild
      )
      const patient = yield* h.registry.prompt(agent.agentId, "work", { clientMessageId: "m-1", wait: true }).pipe(
        Effect.forkChild
      )
      yield* Effect.yieldNow
      yield* Fiber.interrupt(impatient)
      yield* gate.open
      const receipt = yield* Fiber.join(patient)
      assert.strictEqual(receipt.state, "completed")
      const retried = yield* h.registry.prompt(agent.agentId, "work", { clientMessageId: "m-1", wait: true })
      assert.deepStrictEqual(retried, receipt)
      assert.deepStrictEqual(h.provider.deliveries.map((delivery) => delivery.prompt), ["work"])
    }))

  it.effect("a caller that gives up while the runtime is being released still gets its prompt run, once", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      h.provider.closeGate = Deferred.succeed(entered, undefined).pipe(Effect.andThen(Deferred.await(release)))
      const collecting = yield* h.collector.collectNow(agent.agentId).pipe(Effect.forkChild)
      yield* Deferred.await(entered)
      const aborted = yield* h.registry.prompt(agent.agentId, "during release", { clientMessageId: "m-2", wait: true }).pipe(
        Effect.forkChild
      )
      yield* Effect.yieldNow
      yield* Fiber.interrupt(aborted)
      h.provider.closeGate = Effect.void
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(collecting)
      const retried = yield* h.registry.prompt(agent.agentId, "during release", { clientMessageId: "m-2", wait: true })
      assert.strictEqual(retried.state, "completed")
      assert.isTrue(retried.resumed)
      assert.deepStrictEqual(h.provider.deliveries.map((delivery) => delivery.prompt), ["during release"])
    }))

  it.effect("a turn that failed before reaching the provider is run again by a repeat, under the same id", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const sessionId = agent.persistence!.sessionId
      assert.strictEqual((yield* h.collector.collectNow(agent.agentId))._tag, "Collected")
      const transcript = h.provider.transcripts.get(sessionId)!
      h.provider.transcripts.delete(sessionId)
      const failed = yield* h.registry.prompt(agent.agentId, "after a failed resume", { clientMessageId: "m-3", wait: true })
      assert.strictEqual(failed.state, "failed")
      assert.isNull(failed.disposition)
      assert.strictEqual(failed.error?._tag, "ProviderFailed")
      h.provider.transcripts.set(sessionId, transcript)
      const retried = yield* h.registry.prompt(agent.agentId, "after a failed resume", { clientMessageId: "m-3", wait: true })
      assert.strictEqual(retried.turnId, failed.turnId)
      assert.strictEqual(retried.state, "completed")
      assert.deepStrictEqual(h.provider.deliveredTo(sessionId), ["after a failed resume"])
    }))

  it.effect("a turn that failed in the provider is not run again: the repeat gets the failure", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      h.provider.turnEnd = () => Effect.fail(new ProviderFailed({ provider: "codex", operation: "turn", message: "no" }))
      const failed = yield* h.registry.prompt(agent.agentId, "once only", { clientMessageId: "m-4", wait: true })
      h.provider.turnEnd = () => Effect.succeed({ reply: null })
      const repeat = yield* h.registry.prompt(agent.agentId, "once only", { clientMessageId: "m-4", wait: true })
      assert.deepStrictEqual(repeat, failed)
      assert.strictEqual(h.provider.deliveries.length, 1)
    }))
})

describe("turns: shutdown and restart", () => {
  it.effect("stopping admission answers waiting callers ShuttingDown naming their turn; the journal still answers repeats", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const done = yield* h.registry.prompt(agent.agentId, "before", { clientMessageId: "m-5", wait: true })
      yield* gated(h.provider)
      const waiting = yield* h.registry.prompt(agent.agentId, "long", { clientMessageId: "m-6", wait: true }).pipe(
        Effect.forkChild
      )
      yield* Effect.yieldNow
      yield* h.registry.stopAdmission
      const refused = yield* Effect.flip(Fiber.join(waiting))
      assert.strictEqual(refused._tag, "ShuttingDown")
      assert.isString(refused._tag === "ShuttingDown" ? refused.turnId : undefined)
      assert.deepStrictEqual(yield* h.registry.prompt(agent.agentId, "before", { clientMessageId: "m-5", wait: true }), done)
      const fresh = yield* Effect.flip(h.registry.prompt(agent.agentId, "new"))
      assert.strictEqual(fresh._tag, "ShuttingDown")
    }))

  it.effect("an orderly stop records the cut turn interrupted; the queued one runs after the restart, once", () =>
    Effect.gen(function*() {
      const state = yield* durableState
      const provider = new MemoryProvider("shellish")
      provider.steers = false
      let agentId = ""
      let queuedTurn: TurnRecord | undefined
      yield* Effect.scoped(Effect.gen(function*() {
        const h = yield* harness({ provider, store: state.store, journal: state.journalLayer })
        yield* gated(provider)
        agentId = (yield* h.create()).agentId
        yield* h.registry.prompt(agentId, "cut", { clientMessageId: "cut" })
        yield* h.registry.prompt(agentId, "queued", { clientMessageId: "queued" }).pipe(Effect.forkChild)
        yield* Effect.yieldNow
        queuedTurn = Option.getOrThrow(yield* state.journal.byClientMessageId(agentId, "queued"))
        assert.strictEqual(queuedTurn.state, "accepted")
      }))
      assert.strictEqual(Option.getOrThrow(yield* state.journal.byClientMessageId(agentId, "cut")).state, "interrupted")
      assert.strictEqual(Option.getOrThrow(yield* state.journal.byClientMessageId(agentId, "queued")).state, "accepted")
      provider.turnGate = undefined
      const h = yield* harness({ provider, store: state.store, journal: state.journalLayer })
      const receipt = yield* h.registry.prompt(agentId, "queued", { clientMessageId: "queued", wait: true })
      assert.strictEqual(receipt.turnId, queuedTurn!.turnId)
      assert.strictEqual(receipt.state, "completed")
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["cut", "queued"])
    }))

  it.effect("after a crash, a turn that was running is recorded interrupted and never re-run; an accepted one runs", () =>
    Effect.gen(function*() {
      const state = yield* durableState
      const provider = new MemoryProvider("shellish")
      const first = yield* harness({ provider, store: state.store, journal: state.journalLayer })
      const agentId = (yield* first.create()).agentId
      // What a process killed mid-turn leaves behind.
      const base: TurnRecord = {
        turnId: "turn-running",
        agentId,
        clientMessageId: "was-running",
        text: "ran already",
        state: "running",
        disposition: "turn",
        joinedTurnId: null,
        resumed: false,
        reply: null,
        error: null,
        acceptedAt: 0,
        dispatchedAt: 0,
        endedAt: null
      }
      yield* state.journal.accept({ record: base })
      yield* state.journal.accept({
        record: { ...base, turnId: "turn-accepted", clientMessageId: "was-accepted", text: "not yet run", state: "accepted", disposition: null, dispatchedAt: null }
      })
      const h = yield* harness({ provider, store: state.store, journal: state.journalLayer })
      const interrupted = yield* h.registry.prompt(agentId, "ran already", { clientMessageId: "was-running", wait: true })
      assert.strictEqual(interrupted.turnId, "turn-running")
      assert.strictEqual(interrupted.state, "interrupted")
      assert.strictEqual(interrupted.error?._tag, "DaemonStopped")
      const ran = yield* h.registry.prompt(agentId, "not yet run", { clientMessageId: "was-accepted", wait: true })
      assert.strictEqual(ran.turnId, "turn-accepted")
      assert.strictEqual(ran.state, "completed")
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["not yet run"])
    }))

  it.effect("ended turns are forgotten after the retention", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const receipt = yield* h.registry.prompt(agent.agentId, "old", { wait: true })
      yield* TestClock.adjust("167 hours")
      assert.strictEqual((yield* h.registry.turn(agent.agentId, receipt.turnId)).state, "completed")
      yield* TestClock.adjust("2 hours")
      const gone = yield* Effect.flip(h.registry.turn(agent.agentId, receipt.turnId))
      assert.strictEqual(gone._tag, "TurnNotFound")
    }))
})

describe("turns: hostile input", () => {
  it.effect("a prompt too large for any provider line is refused before it is accepted", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const refused = yield* Effect.flip(h.registry.prompt(agent.agentId, "x".repeat(600 * 1024)))
      assert.strictEqual(refused._tag, "PromptTooLarge")
      // Escaping counts: a string of control characters is six bytes a character on the wire.
      const escaped = yield* Effect.flip(h.registry.prompt(agent.agentId, "\u0001".repeat(100 * 1024)))
      assert.strictEqual(escaped._tag, "PromptTooLarge")
      assert.deepStrictEqual(h.provider.deliveries, [])
    }))

  it.effect("an answer to a permission nobody asked for is PermissionNotPending", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const unknown = yield* Effect.flip(h.registry.respondToPermission(agent.agentId, "never-asked", true))
      assert.strictEqual(unknown._tag, "PermissionNotPending")
      h.provider.emit(agent.agentId, { _tag: "PermissionRequested", id: "p1" })
      const answered = yield* Effect.exit(h.registry.respondToPermission(agent.agentId, "p1", true))
      assert.isTrue(Exit.isSuccess(answered))
      const twice = yield* Effect.flip(h.registry.respondToPermission(agent.agentId, "p1", true))
      assert.strictEqual(twice._tag, "PermissionNotPending")
    }))
})
