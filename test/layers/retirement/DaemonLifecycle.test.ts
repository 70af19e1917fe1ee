/**
 * The daemon's idle timer and its retirement attempts (R1, R2, R4, R6, R7), under TestClock, over
 * a daemon's real services and the in-memory provider.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { AgentStoreError, RuntimeProbeFailed } from "../../../src/domain/errors.ts"
import { type StopAnswer, stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import type { EffectiveIdleTimeout } from "../../../src/domain/retirement.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as FinishStoreMemory from "../../../src/layers/store/FinishStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { DaemonLifecycle } from "../../../src/services/DaemonLifecycle.ts"
import { FinishSubscriptions } from "../../../src/services/FinishSubscriptions.ts"
import { InFlightRequests } from "../../../src/services/InFlightRequests.ts"
import { MessageDelivery } from "../../../src/services/MessageDelivery.ts"
import { RuntimeCollector } from "../../../src/services/RuntimeCollector.ts"
import { TurnJournal } from "../../../src/services/TurnJournal.ts"
import { type LogEntry, recordingLogs } from "../../support/logs.ts"
import { memoryDaemon, type MemoryDaemonOptions, noTimer } from "../../support/memoryDaemon.ts"

const hour: EffectiveIdleTimeout = { value: "1h0m0s", millis: 3_600_000, source: "config" }
const minutes = (n: number) => `${n} minutes` as const

const daemon = Effect.fnUntraced(function*(options: MemoryDaemonOptions & { readonly logs?: Array<LogEntry> } = {}) {
  const provider = options.provider ?? new MemoryProvider("codex")
  const build = Layer.build(memoryDaemon({ ...options, provider, idleTimeout: options.idleTimeout ?? hour }))
  const context = yield* (options.logs === undefined ? build : recordingLogs(options.logs)(build))
  // Until the stored finish subscriptions are recovered, every caller counts as owed something.
  yield* Context.get(context, FinishSubscriptions).recovered
  const lifecycle = Context.get(context, DaemonLifecycle)
  const registry = Context.get(context, AgentRegistry)
  return {
    provider,
    lifecycle,
    registry,
    delivery: Context.get(context, MessageDelivery),
    finish: Context.get(context, FinishSubscriptions),
    collector: Context.get(context, RuntimeCollector),
    requests: Context.get(context, InFlightRequests),
    retired: Effect.map(Effect.exit(lifecycle.retired.pipe(Effect.timeoutOption("1 millis"))), (exit) =>
      Exit.isSuccess(exit) && Option.isSome(exit.value)),
    create: () => registry.create({ provider: provider.provider, cwd: "/work" })
  }
})

type Daemon = Effect.Success<ReturnType<typeof daemon>>

/** Whether the daemon has retired by now (the clock moves the 1 ms the check needs). */
const hasRetired = (d: Daemon) =>
  Effect.gen(function*() {
    const check = yield* Effect.forkChild(d.retired)
    yield* TestClock.adjust("1 millis")
    return yield* Fiber.join(check)
  })

const storesWith = (journal: TurnJournal["Service"]) =>
  Layer.mergeAll(AgentStoreMemory.layer, FinishStoreMemory.layer, RuntimeLedgerMemory.layer, Layer.succeed(TurnJournal, journal))

/** `journal`, whose updates fail (the disk is full) while `failing()` says so. */
const updatesFailingWhile = (journal: TurnJournal["Service"], failing: () => boolean) =>
  TurnJournal.of({
    ...journal,
    update: (record) =>
      failing() ? Effect.fail(new AgentStoreError({ operation: "journal.update", message: "disk full" })) : journal.update(record),
    claim: (record) =>
      failing() ? Effect.fail(new AgentStoreError({ operation: "journal.claim", message: "disk full" })) : journal.claim(record)
  })

/** A provider whose first safety query waits for `answer` (announcing itself on `probing`); later ones permit. */
const slowFirstProbe = Effect.gen(function*() {
  const provider = new MemoryProvider("codex")
  const probing = yield* Deferred.make<void>()
  const answer = yield* Deferred.make<StopAnswer>()
  let asks = 0
  provider.probe = () =>
    ++asks === 1 ? Deferred.succeed(probing, undefined).pipe(Effect.andThen(Deferred.await(answer))) : Effect.succeed(stopPermitted)
  return { provider, probing, answer }
})

describe("the daemon's idle timer (R1, R2)", () => {
  it.effect("an idle daemon retires after its timeout, releasing every runtime resumably", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const agent = yield* d.create()
      yield* TestClock.adjust(minutes(59))
      assert.isFalse(yield* hasRetired(d))
      assert.strictEqual((yield* d.lifecycle.status).phase, "resident")
      yield* TestClock.adjust(minutes(2))
      assert.isTrue(yield* hasRetired(d))
      const view = yield* d.registry.get(agent.agentId)
      assert.isFalse(view.resident)
      assert.deepStrictEqual(view.record.persistence, agent.persistence)
      assert.strictEqual((yield* d.lifecycle.status).lastAttempt?.outcome, "committed")
    }))

  it.effect("without a timer (omitted or 0s) the daemon never retires on its own", () =>
    Effect.gen(function*() {
      for (const idleTimeout of [noTimer, { value: "0s", millis: null, source: "flag" } satisfies EffectiveIdleTimeout]) {
        const d = yield* daemon({ idleTimeout })
        yield* d.create()
        yield* TestClock.adjust("48 hours")
        assert.isFalse(yield* hasRetired(d))
        const status = yield* d.lifecycle.status
        assert.isNull(status.deadline)
        assert.deepStrictEqual(status.idleTimeout, idleTimeout)
      }
    }))

  const activities: ReadonlyArray<readonly [string, (d: Daemon, agentId: string) => Effect.Effect<unknown, unknown>]> = [
    ["a prompt (a turn)", (d, agentId) => d.registry.prompt(agentId, "work", { wait: true })],
    ["an out-of-band command", (d, agentId) => d.registry.prompt(agentId, "/maintenance")],
    ["a session event of the runtime's own", (d, agentId) => Effect.sync(() => d.provider.emit(agentId, { _tag: "Activity" }))],
    ["a permission asked and answered", (d, agentId) =>
      Effect.gen(function*() {
        d.provider.emit(agentId, { _tag: "PermissionRequested", id: "p1" })
        yield* d.registry.respondToPermission(agentId, "p1", true)
      })],
    ["a message delivered", (d, agentId) => Effect.flatten(d.delivery.enqueue({ recipientId: agentId, text: "hello" }))],
    ["a lifecycle operation (create)", (d) => d.create()],
    ["a lifecycle operation (close and resume)", (d, agentId) =>
      d.registry.close(agentId).pipe(Effect.andThen(d.registry.prompt(agentId, "back", { wait: true })))],
    ["a finish subscription registered", (d, agentId) =>
      Effect.flatMap(d.create(), (caller) => d.finish.register({ callerAgentId: caller.agentId, targetAgentId: agentId }))]
  ]
  for (const [kind, act] of activities) {
    it.effect(`${kind} restarts the full interval`, () =>
      Effect.gen(function*() {
        const d = yield* daemon()
        const agent = yield* d.create()
        yield* TestClock.adjust(minutes(50))
        const acting = yield* Effect.forkChild(act(d, agent.agentId))
        yield* TestClock.adjust("2 seconds")
        yield* Fiber.join(acting)
        yield* TestClock.adjust(minutes(59))
        assert.isFalse(yield* hasRetired(d), `still resident an hour after ${kind}`)
        yield* TestClock.adjust(minutes(2))
        assert.isTrue(yield* hasRetired(d))
      }))
  }

  it.effect("passive use does not: reads, listings, turns, explanations and status", () =>
    Effect.gen(function*() {
      const d = yield* daemon()
      const agent = yield* d.create()
      const receipt = yield* d.registry.prompt(agent.agentId, "work", { clientMessageId: "m-1", wait: true })
      yield* TestClock.adjust(minutes(50))
      yield* d.registry.get(agent.agentId)
      yield* d.registry.list
      yield* d.registry.turn(agent.agentId, receipt.turnId)
      // A repeat of a recorded client message id is answered from the journal: nothing new.
      assert.deepStrictEqual(yield* d.registry.prompt(agent.agentId, "work", { clientMessageId: "m-1", wait: true }), receipt)
      yield* d.collector.explain(agent.agentId)
      yield* d.lifecycle.status
      yield* TestClock.adjust(minutes(11))
      assert.isTrue(yield* hasRetired(d))
    }))
})

describe("retirement attempts (R4, R6, R7)", () => {
  it.effect("a refusal re-arms a full interval, records its blockers and logs each kind of refusal once", () =>
    Effect.gen(function*() {
      const logs: Array<LogEntry> = []
      const d = yield* daemon({ logs })
      const agent = yield* d.create()
      d.provider.emit(agent.agentId, { _tag: "PermissionRequested", id: "p1" })
      yield* TestClock.adjust(minutes(61))
      const first = (yield* d.lifecycle.status).lastAttempt
      assert.strictEqual(first?.outcome, "refused")
      assert.deepStrictEqual(first?.blockers, [{ category: "pending-permission", agentId: agent.agentId }])
      assert.strictEqual((yield* d.lifecycle.status).phase, "resident")
      // Refused again an hour later, not before; the same reason is not logged twice.
      yield* TestClock.adjust(minutes(30))
      assert.strictEqual((yield* d.lifecycle.status).lastAttempt?.at, first?.at)
      yield* TestClock.adjust(minutes(31))
      assert.isAbove((yield* d.lifecycle.status).lastAttempt!.at, first!.at)
      // Nor is the same kind of refusal held by another agent: the log names kinds, boundedly.
      const other = yield* d.create()
      d.provider.emit(other.agentId, { _tag: "PermissionRequested", id: "p2" })
      yield* d.registry.respondToPermission(agent.agentId, "p1", true)
      yield* TestClock.adjust(minutes(61))
      assert.deepStrictEqual((yield* d.lifecycle.status).lastAttempt?.blockers, [{ category: "pending-permission", agentId: other.agentId }])
      const refusals = logs.filter((entry) => entry.message.startsWith("daemon retirement refused"))
      assert.deepStrictEqual(refusals.map((entry) => entry.message), [
        `daemon retirement refused: pending-permission (${agent.agentId})`
      ])
      // Answered: that is activity; a full interval later the daemon retires.
      yield* d.registry.respondToPermission(other.agentId, "p2", true)
      yield* TestClock.adjust(minutes(59))
      assert.isFalse(yield* hasRetired(d))
      yield* TestClock.adjust(minutes(2))
      assert.isTrue(yield* hasRetired(d))
    }))

  it.effect("a provider's veto refuses the retirement, with the probe's word", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const reason = "background task bash-3 `sleep 600`"
      provider.probe = () => Effect.succeed(stopVetoed(reason))
      const d = yield* daemon({ provider, idleTimeout: noTimer })
      const agent = yield* d.create()
      const refused = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(refused._tag, "RetirementRefused")
      if (refused._tag === "RetirementRefused") {
        assert.deepStrictEqual(refused.blockers, [
          { category: "veto", agentId: agent.agentId, detail: reason, since: new Date(0).toISOString() }
        ])
      }
      assert.isTrue((yield* d.registry.get(agent.agentId)).resident)
    }))

  it.effect("retire now works without a timer, keeps every check, and reports fresh blockers when refused", () =>
    Effect.gen(function*() {
      const d = yield* daemon({ idleTimeout: noTimer })
      const agent = yield* d.create()
      const gate = yield* Deferred.make<void>()
      d.provider.turnGate = Deferred.await(gate)
      yield* d.registry.prompt(agent.agentId, "long work")
      const refused = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(refused._tag, "RetirementRefused")
      if (refused._tag === "RetirementRefused") {
        assert.deepInclude(refused.blockers, { category: "foreground-turn", agentId: agent.agentId })
      }
      yield* Deferred.succeed(gate, undefined)
      yield* d.registry.awaitIdle(agent.agentId)
      const committed = yield* d.lifecycle.retireNow
      assert.strictEqual(committed.outcome, "committed")
      assert.isTrue(yield* hasRetired(d))
      assert.isFalse((yield* d.registry.get(agent.agentId)).resident)
    }))

  it.effect("while the evidence is read, new work is refused DaemonRetiring; a repeat is still answered; a refusal reopens", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const probing = yield* Deferred.make<void>()
      const answer = yield* Deferred.make<StopAnswer>()
      provider.probe = () => Deferred.succeed(probing, undefined).pipe(Effect.andThen(Deferred.await(answer)))
      const d = yield* daemon({ provider, idleTimeout: noTimer })
      const agent = yield* d.create()
      const done = yield* d.registry.prompt(agent.agentId, "earlier", { clientMessageId: "m-1", wait: true })
      const attempt = yield* Effect.forkChild(d.lifecycle.retireNow)
      yield* Deferred.await(probing)
      assert.strictEqual((yield* d.lifecycle.status).phase, "retiring")
      const refused = yield* Effect.flip(d.registry.prompt(agent.agentId, "new"))
      assert.strictEqual(refused._tag, "DaemonRetiring")
      assert.strictEqual((yield* Effect.flip(d.create()))._tag, "DaemonRetiring")
      assert.strictEqual((yield* Effect.flip(d.lifecycle.admit("a request")))._tag, "DaemonRetiring")
      assert.deepStrictEqual(yield* d.registry.prompt(agent.agentId, "earlier", { clientMessageId: "m-1", wait: true }), done)
      yield* Deferred.succeed(answer, stopVetoed("test veto"))
      assert.strictEqual((yield* Effect.flip(Fiber.join(attempt)))._tag, "RetirementRefused")
      assert.strictEqual((yield* d.lifecycle.status).phase, "resident")
      assert.strictEqual((yield* d.registry.prompt(agent.agentId, "now", { wait: true })).state, "completed")
    }))

  it.effect("a finish subscription on a local target does not block; one on a remote target does", () =>
    Effect.gen(function*() {
      const d = yield* daemon({ idleTimeout: noTimer })
      const caller = yield* d.create()
      const target = yield* d.create()
      yield* d.finish.recovered
      yield* d.finish.register({ callerAgentId: caller.agentId, targetAgentId: target.agentId })
      const remote = yield* d.finish.register({ callerAgentId: caller.agentId, targetAgentId: "far", serverId: "server-2" })
      const refused = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(refused._tag, "RetirementRefused")
      if (refused._tag === "RetirementRefused") {
        assert.deepStrictEqual(refused.blockers.map((b) => b.category), ["finish-remote-watch"])
      }
      yield* remote.reject
      assert.strictEqual((yield* d.lifecycle.retireNow).outcome, "committed")
    }))
})

describe("store writes (R2)", () => {
  it.effect("a turn journal whose writes fail keeps the daemon resident until a write succeeds", () =>
    Effect.gen(function*() {
      const journal = yield* TurnJournalMemory.make
      let failing = true
      const d = yield* daemon({ idleTimeout: noTimer, stores: storesWith(updatesFailingWhile(journal, () => failing)) })
      const agent = yield* d.create()
      const lost = yield* d.registry.prompt(agent.agentId, "work", { wait: true })
      assert.strictEqual(lost.state, "failed")
      const refused = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(refused._tag, "RetirementRefused")
      if (refused._tag === "RetirementRefused") {
        // The store fails, and the journal still holds the turn as accepted (its end was refused).
        assert.deepStrictEqual(refused.blockers.map((b) => b.category).sort(), ["store-failing", "turn-accepted"])
      }
      failing = false
      assert.strictEqual((yield* d.registry.prompt(agent.agentId, "again", { wait: true })).state, "completed")
      // The refused write was made again: the journal says what the caller was told.
      assert.strictEqual(Option.getOrThrow(yield* journal.get(agent.agentId, lost.turnId)).state, "failed")
      assert.strictEqual((yield* d.lifecycle.retireNow).outcome, "committed")
    }))

  it.effect("an idle daemon writes them again at its next attempt, and retires once they are written", () =>
    Effect.gen(function*() {
      const inner = yield* TurnJournalMemory.make
      let failing = true
      const d = yield* daemon({ stores: storesWith(updatesFailingWhile(inner, () => failing)) })
      const agent = yield* d.create()
      const lost = yield* d.registry.prompt(agent.agentId, "work", { wait: true })
      assert.strictEqual(lost.state, "failed")
      // The disk has room again; nothing else happens on this daemon.
      failing = false
      yield* TestClock.adjust(minutes(61))
      assert.isTrue(yield* hasRetired(d))
      assert.strictEqual(Option.getOrThrow(yield* inner.get(agent.agentId, lost.turnId)).state, "failed")
    }))

  it.effect("a retry the caller was told failed is not written later: it stays failed, and a repeat runs it once", () =>
    Effect.gen(function*() {
      const inner = yield* TurnJournalMemory.make
      let failNext = 0
      const journal = TurnJournal.of({
        ...inner,
        update: (record) =>
          Effect.suspend(() => {
            if (failNext === 0) return inner.update(record)
            failNext--
            return Effect.fail(new AgentStoreError({ operation: "journal.update", message: "busy" }))
          }),
        claim: (record) =>
          Effect.suspend(() => {
            if (failNext === 0) return inner.claim(record)
            failNext--
            return Effect.fail(new AgentStoreError({ operation: "journal.claim", message: "busy" }))
          })
      })
      const d = yield* daemon({ idleTimeout: noTimer, stores: storesWith(journal) })
      const agent = yield* d.create()
      d.provider.failingTurnStarts = 1 // refused: it never ran, so a repeat may run it
      const first = yield* d.registry.prompt(agent.agentId, "work", { clientMessageId: "m", wait: true })
      assert.strictEqual(first.state, "failed")
      failNext = 1 // the retry's acceptance is refused: its caller hears so
      assert.strictEqual((yield* Effect.flip(d.registry.prompt(agent.agentId, "work", { clientMessageId: "m", wait: true })))._tag, "AgentStoreError")
      // A later write that succeeds does not bring the abandoned retry back.
      yield* d.registry.prompt(agent.agentId, "other", { wait: true })
      assert.strictEqual(Option.getOrThrow(yield* inner.get(agent.agentId, first.turnId)).state, "failed")
      const again = yield* d.registry.prompt(agent.agentId, "work", { clientMessageId: "m", wait: true })
      assert.strictEqual(again.state, "completed")
      assert.deepStrictEqual(d.provider.deliveries.map((delivery) => delivery.prompt), ["other", "work"])
      assert.strictEqual((yield* d.lifecycle.retireNow).outcome, "committed")
    }))

  it.effect("an agent record the store refused keeps the daemon resident; written again, the daemon retires resumably", () =>
    Effect.gen(function*() {
      const inner = yield* AgentStoreMemory.make
      let failing = false
      const store = AgentStore.of({
        ...inner,
        put: (record) => failing ? Effect.fail(new AgentStoreError({ operation: "agents.put", message: "disk full" })) : inner.put(record)
      })
      const journal = yield* TurnJournalMemory.make
      const stores = Layer.mergeAll(Layer.succeed(AgentStore, store), FinishStoreMemory.layer, RuntimeLedgerMemory.layer, Layer.succeed(TurnJournal, journal))
      const provider = new MemoryProvider("codex")
      provider.reportsSessionAfterTurn = true // the session is named after the first turn
      const d = yield* daemon({ provider, idleTimeout: noTimer, stores })
      const agent = yield* d.create()
      failing = true
      yield* d.registry.prompt(agent.agentId, "first", { wait: true })
      const saved = (yield* d.registry.get(agent.agentId)).record.persistence
      assert.isNotNull(saved)
      const refused = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(refused._tag, "RetirementRefused")
      if (refused._tag === "RetirementRefused") {
        assert.deepStrictEqual(refused.blockers.map((b) => [b.category, b.agentId]), [["store-failing", agent.agentId]])
      }
      assert.isTrue((yield* d.registry.get(agent.agentId)).resident)
      failing = false
      assert.strictEqual((yield* d.lifecycle.retireNow).outcome, "committed")
      assert.deepStrictEqual(Option.getOrThrow(yield* inner.get(agent.agentId)).persistence, saved, "the next daemon resumes it")
    }))
})

describe("retirement failures (R7)", () => {
  it.effect("prepare_failed: an unreadable journal releases nothing, and the daemon serves on", () =>
    Effect.gen(function*() {
      const journal = yield* TurnJournalMemory.make
      const d = yield* daemon({ idleTimeout: noTimer, stores: failingLater(journal) })
      const agent = yield* d.create()
      const failed = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(failed._tag, "RetirementFailed")
      if (failed._tag === "RetirementFailed") assert.strictEqual(failed.failure.kind, "prepare_failed")
      const status = yield* d.lifecycle.status
      assert.strictEqual(status.phase, "resident")
      assert.strictEqual(status.lastAttempt?.failure?.kind, "prepare_failed")
      assert.isTrue((yield* d.registry.get(agent.agentId)).resident)
      assert.strictEqual((yield* d.registry.prompt(agent.agentId, "still here", { wait: true })).state, "completed")
    }))

  it.effect("release_failed: a close that fails after the commit holds the daemon retiring, admission closed", () =>
    Effect.gen(function*() {
      const d = yield* daemon({ idleTimeout: noTimer })
      const agent = yield* d.create()
      d.provider.closeFailure = "the provider would not close"
      const failed = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(failed._tag, "RetirementFailed")
      if (failed._tag === "RetirementFailed") assert.strictEqual(failed.failure.kind, "release_failed")
      const status = yield* d.lifecycle.status
      assert.strictEqual(status.phase, "retiring")
      assert.strictEqual(status.failure?.kind, "release_failed")
      const refused = yield* Effect.flip(d.registry.prompt(agent.agentId, "new"))
      assert.strictEqual(refused._tag, "DaemonRetiring")
      // Retrying does not help here: the refusal says so, and what failed.
      assert.include(refused.message, "until an operator restarts the daemon")
      assert.include(refused.message, "the provider would not close")
      assert.include((yield* Effect.flip(d.lifecycle.admit("a request"))).message, "release_failed")
      assert.strictEqual((yield* Effect.flip(d.lifecycle.retireNow))._tag, "RetirementFailed")
      assert.isFalse(yield* hasRetired(d))
      assert.isTrue((yield* d.registry.get(agent.agentId)).resident, "nothing is killed")
    }))

  it.effect("reader_drain_failed: a request that does not leave holds the daemon retiring", () =>
    Effect.gen(function*() {
      const d = yield* daemon({ idleTimeout: noTimer })
      yield* d.create()
      yield* Effect.forkChild(d.requests.track(Effect.never))
      yield* Effect.yieldNow
      assert.strictEqual((yield* d.lifecycle.retireNow).outcome, "committed")
      yield* TestClock.adjust("6 seconds")
      const status = yield* d.lifecycle.status
      assert.strictEqual(status.failure?.kind, "reader_drain_failed")
      assert.strictEqual(status.phase, "retiring")
      assert.isFalse(yield* hasRetired(d))
    }))
})

/** A journal that works while the registry starts, and whose reads fail afterwards. */
const failingLater = (journal: TurnJournal["Service"]) => {
  let reads = 0
  const failing = TurnJournal.of({
    ...journal,
    unfinished: Effect.suspend(() =>
      reads++ === 0
        ? journal.unfinished
        : Effect.fail(new AgentStoreError({ operation: "journal.recover", message: "disk on fire" }))
    )
  })
  return Layer.mergeAll(
    AgentStoreMemory.layer,
    FinishStoreMemory.layer,
    RuntimeLedgerMemory.layer,
    Layer.succeed(TurnJournal, failing)
  )
}

describe("attempts that race the daemon's work", () => {
  it.effect("a retire request whose caller goes away (a client abort) still ends: committed once the provider answers", () =>
    Effect.gen(function*() {
      const { provider, probing, answer } = yield* slowFirstProbe
      const d = yield* daemon({ provider, idleTimeout: noTimer })
      const agent = yield* d.create()
      const caller = yield* Effect.forkChild(d.lifecycle.retireNow)
      yield* Deferred.await(probing)
      yield* Fiber.interrupt(caller)
      assert.strictEqual((yield* d.lifecycle.status).phase, "retiring")
      yield* Deferred.succeed(answer, stopPermitted)
      // Nobody waits for the attempt any more; it ends all the same (a hang here fails the test).
      yield* d.lifecycle.retired
      assert.strictEqual((yield* d.lifecycle.status).lastAttempt?.outcome, "committed")
      assert.isFalse((yield* d.registry.get(agent.agentId)).resident)
    }))

  it.effect("a prompt past admission whose acceptance is still being written is seen: the attempt refuses, the prompt runs", () =>
    Effect.gen(function*() {
      const inner = yield* TurnJournalMemory.make
      let acceptGate: Deferred.Deferred<void> | undefined
      // The latency of a group commit: the prompt is admitted, then waits for its acceptance to be durable.
      const journal = TurnJournal.of({
        ...inner,
        accept: (input) => acceptGate === undefined ? inner.accept(input) : Effect.andThen(Deferred.await(acceptGate), inner.accept(input))
      })
      const d = yield* daemon({ idleTimeout: noTimer, stores: storesWith(journal) })
      const agent = yield* d.create()
      acceptGate = yield* Deferred.make<void>()
      const prompt = yield* Effect.forkChild(d.registry.prompt(agent.agentId, "important work", { wait: true }))
      yield* Effect.yieldNow
      const refused = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(refused._tag, "RetirementRefused")
      if (refused._tag === "RetirementRefused") assert.deepStrictEqual(refused.blockers.map((b) => b.category), ["prompt-accepting"])
      yield* Deferred.succeed(acceptGate, undefined)
      assert.strictEqual((yield* Fiber.join(prompt)).state, "completed")
      assert.deepStrictEqual(d.provider.deliveries.map((delivery) => delivery.prompt), ["important work"])
      assert.isFalse(yield* hasRetired(d))
    }))

  it.effect("an agent being created when the attempt begins is seen: the attempt refuses, the agent is made", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const starting = yield* Deferred.make<void>()
      provider.createGate = Deferred.await(starting)
      const d = yield* daemon({ provider, idleTimeout: noTimer })
      const creating = yield* Effect.forkChild(d.create())
      yield* Effect.yieldNow
      const refused = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(refused._tag, "RetirementRefused")
      if (refused._tag === "RetirementRefused") assert.include(refused.blockers.map((b) => b.category), "agent-creating")
      yield* Deferred.succeed(starting, undefined)
      const agent = yield* Fiber.join(creating)
      assert.isTrue((yield* d.registry.get(agent.agentId)).resident)
    }))

  it.effect("activity while the evidence is read (a runtime's own work) refuses the attempt; a full interval later it retires", () =>
    Effect.gen(function*() {
      const { provider, probing, answer } = yield* slowFirstProbe
      const d = yield* daemon({ provider })
      const agent = yield* d.create()
      const timer = yield* Effect.forkChild(TestClock.adjust(minutes(61)))
      yield* Deferred.await(probing)
      d.provider.emit(agent.agentId, { _tag: "Activity" })
      yield* Effect.yieldNow
      yield* Deferred.succeed(answer, stopPermitted)
      yield* Fiber.join(timer)
      assert.isFalse(yield* hasRetired(d))
      const refused = (yield* d.lifecycle.status).lastAttempt
      assert.strictEqual(refused?.outcome, "refused")
      assert.deepStrictEqual(refused?.blockers.map((b) => b.category), ["activity"])
      assert.isTrue((yield* d.registry.get(agent.agentId)).resident)
      yield* TestClock.adjust(minutes(61))
      assert.isTrue(yield* hasRetired(d))
    }))

  it.effect("a probe that fails when asked again at the release refuses (nothing was closed); the daemon serves on", () =>
    Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      let asked = 0
      provider.probe = (sessionId) =>
        Effect.suspend(() =>
          ++asked === 1 ? Effect.succeed(stopPermitted) : Effect.fail(new RuntimeProbeFailed({ agentId: sessionId, message: "busy, ask later" }))
        )
      const d = yield* daemon({ provider, idleTimeout: noTimer })
      const agent = yield* d.create()
      const refused = yield* Effect.flip(d.lifecycle.retireNow)
      assert.strictEqual(refused._tag, "RetirementRefused")
      if (refused._tag === "RetirementRefused") {
        assert.deepStrictEqual(refused.blockers.map((b) => [b.category, b.agentId]), [["probe-failed", agent.agentId]])
      }
      const status = yield* d.lifecycle.status
      assert.strictEqual(status.phase, "resident")
      assert.isNull(status.failure)
      assert.isTrue((yield* d.registry.get(agent.agentId)).resident)
      assert.strictEqual(d.provider.closes, 0)
      assert.strictEqual((yield* d.registry.prompt(agent.agentId, "still here", { wait: true })).state, "completed")
    }))
})
