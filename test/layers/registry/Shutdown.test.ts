/**
 * The registry at shutdown (H3), under TestClock: every live runtime closes at once (so the
 * host's deadline is one close, not one per runtime), each close that interrupts work says so by
 * name, a close the provider did not permit without naming work is said apart, and the shutdown
 * ends with one summary line.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Scope } from "effect"
import { TestClock } from "effect/testing"
import { stopPermitted, stopVetoed, stopWorkUnknown } from "../../../src/domain/provider.ts"
import { missingSettlement } from "../../../src/layers/providers/pi/safety.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import { type LogEntry, recordingLogs } from "../../support/logs.ts"
import { harness } from "./harness.ts"

describe("AgentRegistry at shutdown (H3)", () => {
  it.effect("closes every runtime at once and names the background work each close interrupts", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const scope = yield* Scope.make()
      const h = yield* harness({ provider }).pipe(Scope.provide(scope))
      // Read by each session as it opens.
      let busySession: string | undefined
      provider.probe = (sessionId) => Effect.succeed(sessionId === busySession ? stopVetoed("background job 1 `sleep 600`") : stopPermitted)
      const agents = yield* Effect.forEach([0, 1, 2], () => h.create())
      const busy = agents[1]!.agentId
      yield* Effect.forEach(agents, (agent) => h.registry.prompt(agent.agentId, "start", { wait: true }))
      busySession = (yield* h.registry.list).find((view) => view.record.agentId === busy)?.record.persistence?.sessionId
      assert.isDefined(busySession)
      provider.closeGate = Effect.sleep("2 seconds")

      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* TestClock.adjust("1 second") // the providers are asked what their runtimes still run
      yield* TestClock.adjust("2 seconds") // one close grace, not three
      assert.isDefined(closing.pollUnsafe(), "all three closes ran at once")
      yield* Fiber.join(closing)
      assert.strictEqual(provider.closes, 3)

      const messages = entries.map((entry) => entry.message)
      assert.include(messages, `Stopping agent ${busy} interrupts: background job 1 \`sleep 600\``)
      assert.include(messages, `Shutdown released 3 runtimes resumable; interrupted: ${busy} (background job 1 \`sleep 600\`)`)
      assert.isFalse(messages.some((message) => message.startsWith("Stopping agent") && !message.includes(busy)))
    }).pipe(recordingLogs(entries))
  })

  it.effect("a provider that does not answer is said to be unknown, not taken as idle", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const provider = new MemoryProvider("codex")
      const scope = yield* Scope.make()
      const h = yield* harness({ provider }).pipe(Scope.provide(scope))
      provider.probe = () => Effect.never
      const agent = yield* h.create()
      yield* h.registry.prompt(agent.agentId, "start", { wait: true })
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(closing)
      const messages = entries.map((entry) => entry.message)
      assert.include(
        messages,
        `Stopping agent ${agent.agentId} without its provider's permission: background work unknown (the provider did not answer in time)`
      )
      assert.include(
        messages,
        `Shutdown released 1 runtime resumable; no work was interrupted; closed without the provider's permission: ${agent.agentId} (background work unknown (the provider did not answer in time))`
      )
    }).pipe(recordingLogs(entries))
  })

  // An OMP before 18.3 never permits a stop: its veto says only that async work cannot be ruled out.
  it.effect("a provider whose veto never permits and names no work: closed without its permission, apart from interrupted work", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const provider = new MemoryProvider("omp")
      const scope = yield* Scope.make()
      const h = yield* harness({ provider }).pipe(Scope.provide(scope))
      provider.probe = () => Effect.succeed(stopWorkUnknown(missingSettlement))
      const idle = yield* h.create()
      const working = yield* h.create()
      yield* h.registry.prompt(idle.agentId, "start", { wait: true })
      // A turn that is still running when the daemon stops: work the stop really ends.
      provider.turnGate = Effect.never
      const running = yield* h.registry.prompt(working.agentId, "long job")

      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(closing)

      const messages = entries.map((entry) => entry.message)
      assert.include(messages, `Stopping agent ${idle.agentId} without its provider's permission: ${missingSettlement}`)
      assert.include(messages, `Stopping agent ${working.agentId} interrupts: turn ${running.turnId} was running`)
      assert.isFalse(messages.some((message) => message.startsWith(`Stopping agent ${idle.agentId} interrupts`)))
      assert.include(
        messages,
        `Shutdown released 2 runtimes resumable; interrupted: ${working.agentId} (turn ${running.turnId} was running); ` +
          `closed without the provider's permission: ${idle.agentId} (${missingSettlement})`
      )
    }).pipe(recordingLogs(entries))
  })
})

