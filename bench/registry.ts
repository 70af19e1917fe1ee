import * as RuntimeCollectorLive from "../src/layers/collector/RuntimeCollectorLive.ts"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { FakeCallerProtection } from "../src/testing/FakeRuntimes.ts"
import { MemoryProvider, providerRegistryWith } from "../src/testing/MemoryProvider.ts"
import * as AgentRegistryLive from "../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../src/services/AgentRegistry.ts"
import { RuntimeCollector } from "../src/services/RuntimeCollector.ts"
import { type BenchRow, median, run } from "./table.ts"

/** A registry over the in-memory provider and store, with a collector over it (no ticks). */
const build = async () => {
  const provider = new MemoryProvider("bench")
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([AgentStoreMemory.layer, TurnJournalMemory.layer, RuntimeLedgerMemory.layer, providerRegistryWith(provider)])
  )
  const collectorLayer = RuntimeCollectorLive.layer({ tickInterval: "3650 days" }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, new FakeCallerProtection().layer])
  )
  const scope = Effect.runSync(Scope.make())
  const context = await run(
    Layer.buildWithScope(collectorLayer.pipe(Layer.provideMerge(registryLayer)), scope)
  )
  return {
    provider,
    registry: Context.get(context, AgentRegistry),
    collector: Context.get(context, RuntimeCollector),
    close: () => run(Scope.close(scope, Exit.void))
  }
}

const releaseAndResume = async (): Promise<BenchRow> => {
  const { registry, collector, close } = await build()
  const agent = await run(registry.create({ provider: "bench", cwd: "/bench" }))
  const cycle = Effect.gen(function*() {
    const outcome = yield* collector.collectNow(agent.agentId)
    if (outcome._tag !== "Collected") return yield* Effect.die(new Error(`not released: ${outcome._tag}`))
    yield* registry.prompt(agent.agentId, "resume")
    yield* registry.awaitIdle(agent.agentId)
  })
  const times: Array<number> = []
  await run(Effect.gen(function*() {
    for (let i = 0; i < 200; i++) yield* cycle
    for (let i = 0; i < 1000; i++) {
      const start = performance.now()
      yield* cycle
      times.push(performance.now() - start)
    }
  }))
  await close()
  const ms = median(times)
  return { name: "release + resume of one agent (in-memory provider)", value: `${ms.toFixed(3)} ms`, target: "< 2 ms median", ok: ms < 2 }
}

const concurrentPrompts = async (): Promise<BenchRow> => {
  const { provider, registry, collector, close } = await build()
  const agent = await run(registry.create({ provider: "bench", cwd: "/bench" }))
  await run(collector.collectNow(agent.agentId))
  const prompts = Array.from({ length: 1000 }, (_, i) => `prompt ${i}`)
  const start = performance.now()
  await run(
    Effect.forEach(prompts, (text) => registry.prompt(agent.agentId, text), { concurrency: "unbounded", discard: true })
  )
  const ms = performance.now() - start
  const delivered = provider.deliveredTo(agent.persistence!.sessionId)
  const inOrder = delivered.length === prompts.length && delivered.every((text, i) => text === prompts[i])
  await close()
  return {
    name: "1,000 concurrent prompts to one released agent",
    value: `${ms.toFixed(1)} ms, ${provider.resumes} resume, ${delivered.length} delivered${inOrder ? " in order" : " OUT OF ORDER"}`,
    target: "one resume, all delivered once",
    ok: provider.resumes === 1 && inOrder
  }
}

const heapPerAgent = async (): Promise<BenchRow> => {
  const count = 10_000
  const { registry, close } = await build()
  globalThis.gc?.()
  const before = process.memoryUsage().heapUsed
  await run(
    Effect.forEach(Array.from({ length: count }), () => registry.create({ provider: "bench", cwd: "/bench" }), {
      discard: true
    })
  )
  globalThis.gc?.()
  const bytes = (process.memoryUsage().heapUsed - before) / count
  await close()
  return {
    name: "heap per registered idle agent at 10k agents",
    value: `${(bytes / 1024).toFixed(2)} KiB`,
    target: "< 4 KiB",
    ok: bytes < 4096
  }
}

export const registryBench = async (): Promise<ReadonlyArray<BenchRow>> => [
  await releaseAndResume(),
  await concurrentPrompts(),
  await heapPerAgent()
]
