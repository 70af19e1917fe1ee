import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ProviderFailed } from "../../../src/domain/errors.ts"
import type { AgentClient, SessionConfig, WarmProcess } from "../../../src/domain/provider.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as WarmReserveLive from "../../../src/layers/reserve/WarmReserveLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { WarmReserve } from "../../../src/services/WarmReserve.ts"

interface FakeProcess {
  readonly pid: number
  readonly marker: string
  readonly exited: Deferred.Deferred<void>
  closed: boolean
  boundTo: SessionConfig | undefined
}

/**
 * A provider whose processes can start warm: a memory provider's sessions behind fake processes
 * the test can hold while starting, fail, or end.
 */
class WarmProvider {
  readonly memory = new MemoryProvider("warm")
  readonly processes: Array<FakeProcess> = []
  /** Held while set: every start waits on it. */
  startGate: Effect.Effect<void> = Effect.void
  /** How many of the next starts fail. */
  failingStarts = 0
  /** How many of the next binds refuse the session. */
  refusingBinds = 0
  /** How many of the next binds find their process dead. */
  dyingBinds = 0
  /** Held while set: every bind waits on it. */
  bindGate: Effect.Effect<void> = Effect.void
  startAttempts = 0
  /** Sessions opened on a process of their own, without the reserve. */
  coldOpens = 0
  private nextPid = 1000

  readonly client: AgentClient = {
    provider: "warm",
    create: (config) => Effect.suspend(() => {
      this.coldOpens++
      return this.memory.client.create(config)
    }),
    resume: (handle, config) => Effect.suspend(() => {
      this.coldOpens++
      return this.memory.client.resume(handle, config)
    }),
    startWarm: (marker) =>
      Effect.gen({ self: this }, function*() {
        this.startAttempts++
        yield* this.startGate
        if (this.failingStarts > 0) {
          this.failingStarts--
          return yield* new ProviderFailed({ provider: "warm", operation: "spawn", message: "command not found" })
        }
        const fake: FakeProcess = { pid: this.nextPid++, marker, exited: Deferred.makeUnsafe(), closed: false, boundTo: undefined }
        this.processes.push(fake)
        const bind = (config: SessionConfig) =>
          Effect.andThen(this.bindGate, Effect.suspend(() => {
            assert.strictEqual(config.runtimeMarker, marker, "a warm process binds under its own marker")
            if (this.dyingBinds > 0) {
              this.dyingBinds--
              Deferred.doneUnsafe(fake.exited, Exit.void)
              return Effect.fail(new ProviderFailed({ provider: "warm", operation: "session.open", message: "exited", refused: true }))
            }
            if (this.refusingBinds > 0) {
              this.refusingBinds--
              return Effect.fail(new ProviderFailed({ provider: "warm", operation: "session.open", message: "gone", refused: true }))
            }
            fake.boundTo = config
            return Effect.void
          }))
        const process: WarmProcess = {
          pid: fake.pid,
          exited: Deferred.await(fake.exited),
          running: () => !Deferred.isDoneUnsafe(fake.exited),
          create: (config) => Effect.andThen(bind(config), this.memory.client.create(config)),
          resume: (handle, config) => Effect.andThen(bind(config), this.memory.client.resume(handle, config)),
          close: Effect.sync(() => {
            fake.closed = true
            Deferred.doneUnsafe(fake.exited, Exit.void)
          })
        }
        return process
      })
  }

  readonly layer = ProviderRegistry.register(Effect.succeed(this.client))

  get live() {
    return this.processes.filter((process) => !process.closed && !Deferred.isDoneUnsafe(process.exited))
  }
}

const providersWith = (warm: WarmProvider) =>
  Layer.mergeAll(warm.layer, new MemoryProvider("cold").layer).pipe(Layer.provideMerge(ProviderRegistry.layer))

/** A reserve over the warm provider, opened; the test moves the clock. */
const reserveOf = Effect.fnUntraced(function*(warm: WarmProvider, options: WarmReserveLive.WarmReserveOptions = {}) {
  const context = yield* Layer.build(
    WarmReserveLive.layer(options).pipe(Layer.provide([providersWith(warm), RuntimeLedgerMemory.layer]))
  )
  return Context.get(context, WarmReserve)
})

const existingCwd = tmpdir()

/** A registry over a reserve of one warm process, opened. */
const registryOver = Effect.fnUntraced(function*(warm: WarmProvider) {
  const reserve = WarmReserveLive.layer({ targets: { warm: 1 } }).pipe(
    Layer.provideMerge(Layer.mergeAll(providersWith(warm), RuntimeLedgerMemory.layer))
  )
  const context = yield* Layer.build(
    WarmReserveLive.opened.pipe(
      Layer.provideMerge(AgentRegistryLive.layer),
      Layer.provide([AgentStoreMemory.layer, TurnJournalMemory.layer]),
      Layer.provideMerge(reserve)
    )
  )
  return Context.get(context, AgentRegistry)
})

/** A reserve over the warm provider, opened, its first starts done. */
const openedReserve = Effect.fnUntraced(function*(warm: WarmProvider, options: WarmReserveLive.WarmReserveOptions = {}) {
  const reserve = yield* reserveOf(warm, options)
  yield* reserve.open
  yield* settle
  return reserve
})

/** Holds every start of the provider until the returned deferred is completed. */
const holdStarts = Effect.fnUntraced(function*(warm: WarmProvider) {
  const gate = yield* Deferred.make<void>()
  warm.startGate = Deferred.await(gate)
  return gate
})

/** Lets forked starts and closes run. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 10; i++) yield* Effect.yieldNow
})

describe("WarmReserve (H4)", () => {
  it.effect("starts nothing until opened, then fills each configured target", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const reserve = yield* reserveOf(warm, { targets: { warm: 2 } })
      yield* settle
      assert.strictEqual(warm.startAttempts, 0)
      yield* reserve.open
      yield* settle
      assert.strictEqual(warm.live.length, 2)
      const [view] = yield* reserve.reserves
      assert.strictEqual(view?.target, 2)
      assert.deepStrictEqual(view?.ready.map((process) => process.pid), [1000, 1001])
      assert.strictEqual(view?.starting, 0)
    }))

  it.effect("a take hands over a ready process with its marker and starts its replacement at once", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const reserve = yield* openedReserve(warm, { targets: { warm: 1 } })
      const taken = yield* reserve.take("warm")
      assert.isTrue(Option.isSome(taken))
      if (Option.isNone(taken)) return
      assert.strictEqual(taken.value.process.pid, 1000)
      assert.strictEqual(taken.value.marker, warm.processes[0]!.marker)
      yield* settle
      const [view] = yield* reserve.reserves
      assert.deepStrictEqual(view?.ready.map((process) => process.pid), [1001])
      // Another provider, or an empty reserve, gives none: the caller starts a process itself.
      assert.isTrue(Option.isNone(yield* reserve.take("cold")))
    }))

  it.effect("growing starts at once; shrinking closes idle processes, and a surplus still starting when it is ready", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const reserve = yield* reserveOf(warm)
      yield* reserve.open
      yield* reserve.resize("warm", 3)
      yield* settle
      assert.strictEqual(warm.live.length, 3)
      yield* reserve.resize("warm", 1)
      yield* settle
      assert.strictEqual(warm.live.length, 1)
      // The oldest go first.
      assert.deepStrictEqual(warm.live.map((process) => process.pid), [1002])

      const gate = yield* holdStarts(warm)
      yield* reserve.resize("warm", 3)
      yield* settle
      assert.strictEqual((yield* reserve.reserves)[0]?.starting, 2)
      yield* reserve.resize("warm", 1)
      yield* Deferred.succeed(gate, undefined)
      yield* settle
      assert.strictEqual(warm.live.length, 1)
      assert.strictEqual(warm.processes.length, 5)
      const [view] = yield* reserve.reserves
      assert.strictEqual(view?.ready.length, 1)
      assert.strictEqual(view?.starting, 0)
    }))

  it.effect("shrinking keeps ready processes over ones still starting", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const reserve = yield* openedReserve(warm, { targets: { warm: 2 } })
      const gate = yield* holdStarts(warm)
      yield* reserve.take("warm")
      yield* settle
      yield* reserve.resize("warm", 1)
      yield* settle
      const [view] = yield* reserve.reserves
      assert.deepStrictEqual(view?.ready.map((process) => process.pid), [1001])
      // Once the surplus is ready, one of the two closes: the oldest, as always.
      yield* Deferred.succeed(gate, undefined)
      yield* settle
      assert.deepStrictEqual((yield* reserve.reserves)[0]?.ready.map((process) => process.pid), [1002])
      assert.deepStrictEqual(warm.live.map((process) => process.pid), [1000, 1002])
    }))

  it.effect("starts that fail together are one round of back-off", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      warm.failingStarts = 6
      const reserve = yield* openedReserve(warm, { targets: { warm: 3 }, retryDelay: "1 second" })
      assert.strictEqual(warm.startAttempts, 3)
      assert.strictEqual((yield* reserve.reserves)[0]?.retryAt, 1000)
      // The second round fails whole too: its wait is the second one (2 s), not the sixth.
      yield* TestClock.setTime(1000)
      yield* settle
      assert.strictEqual(warm.startAttempts, 6)
      assert.strictEqual((yield* reserve.reserves)[0]?.retryAt, 3000)
      yield* TestClock.setTime(3000)
      yield* settle
      assert.strictEqual((yield* reserve.reserves)[0]?.ready.length, 3)
    }))

  it.effect("refuses an unknown provider, one that cannot start warm, and a size out of range", () =>
    Effect.gen(function*() {
      const reserve = yield* reserveOf(new WarmProvider())
      const unknown = yield* Effect.flip(reserve.resize("nope", 1))
      assert.strictEqual(unknown._tag, "ProviderNotFound")
      const cold = yield* Effect.flip(reserve.resize("cold", 1))
      assert.strictEqual(cold._tag, "WarmReserveUnsupported")
      assert.include(cold.message, "cold")
      const tooMany = yield* Effect.flip(reserve.resize("warm", 65))
      assert.strictEqual(tooMany._tag, "InvalidWarmReserveSize")
      const fraction = yield* Effect.flip(reserve.resize("warm", 1.5))
      assert.strictEqual(fraction._tag, "InvalidWarmReserveSize")
    }))

  it.effect("a failing start backs off, doubling up to the limit, and says why; a success clears it", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      warm.failingStarts = 4
      const reserve = yield* openedReserve(warm, { targets: { warm: 1 }, retryDelay: "1 second", maxRetryDelay: "3 seconds" })
      assert.strictEqual(warm.startAttempts, 1)
      const [failing] = yield* reserve.reserves
      assert.strictEqual(failing?.lastFailure, "command not found")
      assert.strictEqual(failing?.retryAt, 1000)
      // Nothing starts during a back-off, whatever asks.
      yield* reserve.resize("warm", 2)
      yield* reserve.take("warm")
      yield* settle
      assert.strictEqual(warm.startAttempts, 1)
      yield* reserve.resize("warm", 1)
      // Waits of 1 s, 2 s, then 3 s (the limit), 3 s.
      for (const [at, attempts] of [[999, 1], [1000, 2], [2999, 2], [3000, 3], [5999, 3], [6000, 4], [9000, 5]] as const) {
        yield* TestClock.setTime(at)
        yield* settle
        assert.strictEqual(warm.startAttempts, attempts, `attempts at ${at} ms`)
      }
      const [view] = yield* reserve.reserves
      assert.strictEqual(view?.ready.length, 1)
      assert.isNull(view?.lastFailure)
      assert.isNull(view?.retryAt)
    }))

  it.effect("a ready process that dies on its own is replaced after a back-off, never in a loop", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const reserve = yield* openedReserve(warm, { targets: { warm: 1 }, retryDelay: "1 second" })
      yield* Deferred.succeed(warm.processes[0]!.exited, undefined)
      yield* settle
      const [dead] = yield* reserve.reserves
      assert.strictEqual(dead?.ready.length, 0)
      assert.include(dead?.lastFailure ?? "", "exited on its own")
      assert.strictEqual(warm.startAttempts, 1)
      yield* TestClock.adjust("1 second")
      yield* settle
      assert.strictEqual(warm.startAttempts, 2)
      assert.strictEqual((yield* reserve.reserves)[0]?.ready.length, 1)
    }))

  it.effect("an idle process past the limit is replaced first, stands in meanwhile, then closes", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const reserve = yield* openedReserve(warm, { targets: { warm: 1 }, maxIdle: "10 minutes" })
      const gate = yield* holdStarts(warm)
      yield* TestClock.adjust("10 minutes")
      yield* settle
      const [expiring] = yield* reserve.reserves
      assert.deepStrictEqual(expiring?.ready, [{ pid: 1000, readyAt: 0, expiring: true }])
      assert.strictEqual(expiring?.starting, 1)
      yield* Deferred.succeed(gate, undefined)
      yield* settle
      assert.isTrue(warm.processes[0]!.closed)
      const [replaced] = yield* reserve.reserves
      assert.deepStrictEqual(replaced?.ready.map((process) => [process.pid, process.expiring]), [[1001, false]])
    }))

  it.effect("a take gives the oldest process, one past the idle limit first: it was going anyway", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const reserve = yield* openedReserve(warm, { targets: { warm: 1 }, maxIdle: "10 minutes" })
      yield* TestClock.adjust("5 minutes")
      yield* reserve.resize("warm", 2)
      yield* settle
      yield* holdStarts(warm)
      yield* TestClock.adjust("5 minutes")
      yield* settle
      const taken = yield* reserve.take("warm")
      assert.strictEqual(Option.getOrUndefined(taken)?.process.pid, 1000)
    }))

  it.effect("close ends every idle process, and a start that finishes later ends its process at once", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const reserve = yield* openedReserve(warm, { targets: { warm: 2 } })
      const gate = yield* holdStarts(warm)
      yield* reserve.resize("warm", 3)
      yield* settle
      yield* reserve.close
      assert.strictEqual(warm.live.length, 0)
      yield* Deferred.succeed(gate, undefined)
      yield* settle
      assert.strictEqual(warm.processes.length, 3)
      assert.strictEqual(warm.live.length, 0)
      assert.isTrue(Option.isNone(yield* reserve.take("warm")))
    }))

  it.effect("the registry binds a new agent and a resume to warm processes, under their markers", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const registry = yield* registryOver(warm)
      yield* settle
      const created = yield* registry.create({ provider: "warm", cwd: existingCwd })
      assert.strictEqual(warm.processes[0]!.boundTo?.agentId, created.agentId)
      assert.strictEqual(warm.processes[0]!.boundTo?.cwd, existingCwd)
      yield* settle
      yield* registry.close(created.agentId)
      yield* registry.prompt(created.agentId, "again")
      assert.strictEqual(warm.processes[1]!.boundTo?.agentId, created.agentId)
      assert.strictEqual(warm.memory.resumes, 1)
      // Neither went through the provider's own create or resume: both were warm.
      assert.strictEqual(warm.coldOpens, 0)
      yield* settle
      assert.strictEqual(warm.processes.length, 3)
      // A provider without a reserve starts its own process as before.
      const cold = yield* registry.create({ provider: "cold", cwd: existingCwd })
      assert.strictEqual((yield* registry.get(cold.agentId)).resident, true)
    }))

  it.effect("a warm process that died before it took the session is replaced by a process of its own", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const registry = yield* registryOver(warm)
      yield* settle
      warm.dyingBinds = 1
      const created = yield* registry.create({ provider: "warm", cwd: existingCwd })
      assert.isTrue((yield* registry.get(created.agentId)).resident)
      assert.isUndefined(warm.processes[0]!.boundTo)
      assert.strictEqual(warm.coldOpens, 1)
    }))

  it.effect("a session the provider refuses fails the create, on a warm process as on a new one", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const registry = yield* registryOver(warm)
      yield* settle
      warm.refusingBinds = 1
      const refused = yield* Effect.flip(registry.create({ provider: "warm", cwd: existingCwd }))
      assert.strictEqual(refused._tag, "ProviderFailed")
      assert.isTrue(warm.processes[0]!.closed)
      assert.strictEqual(warm.coldOpens, 0)
      assert.deepStrictEqual(yield* registry.list, [])
    }))

  it.effect("a create interrupted while a warm process binds leaves no agent and no process", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const registry = yield* registryOver(warm)
      yield* settle
      const gate = yield* Deferred.make<void>()
      warm.bindGate = Deferred.await(gate)
      const creating = yield* Effect.forkChild(registry.create({ provider: "warm", cwd: existingCwd }), { startImmediately: true })
      yield* settle
      yield* Fiber.interrupt(creating)
      assert.isTrue(warm.processes[0]!.closed)
      assert.deepStrictEqual(yield* registry.list, [])
    }))

  it.effect("an agent whose cwd is gone is not given a warm process: its own start says what is wrong", () =>
    Effect.gen(function*() {
      const warm = new WarmProvider()
      const registry = yield* registryOver(warm)
      yield* settle
      yield* registry.create({ provider: "warm", cwd: join(existingCwd, "quiesce-no-such-folder") })
      assert.strictEqual(warm.coldOpens, 1)
      assert.isUndefined(warm.processes[0]!.boundTo)
    }))
})
