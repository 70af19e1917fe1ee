import * as RuntimeCollectorLive from "../src/layers/collector/RuntimeCollectorLive.ts"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FakeCallerProtection } from "../src/testing/FakeRuntimes.ts"
import * as PluginProvider from "../src/layers/providers/plugin/PluginProvider.ts"
import * as AgentRegistryLive from "../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../src/layers/store/TurnJournalMemory.ts"
import * as WarmReserveLive from "../src/layers/reserve/WarmReserveLive.ts"
import { AgentRegistry } from "../src/services/AgentRegistry.ts"
import { WarmReserve, type WarmReserveService } from "../src/services/WarmReserve.ts"
import { ProviderRegistry } from "../src/services/ProviderRegistry.ts"
import { RuntimeCollector } from "../src/services/RuntimeCollector.ts"
import { type BenchRow, median, run } from "./table.ts"

const shellPlugin = join(import.meta.dirname, "../plugins/shell/main.ts")

/** Resident set size of one process in KiB, from procfs. */
const rssKiB = (pid: number): number => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
  return line === undefined ? Number.NaN : Number(line.replace(/\D+/g, ""))
}

/** Waits (polling, bounded) until the reserve has a ready shell process. */
const warmReady = (reserve: WarmReserveService) =>
  Effect.gen(function*() {
    for (let i = 0; i < 500; i++) {
      const row = (yield* reserve.reserves).find((view) => view.provider === "shell")
      if (row !== undefined && row.ready.length >= row.target && row.starting === 0) return
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.die(new Error("the warm reserve did not fill within 5 s"))
  })

/**
 * Twenty agents created, released and resumed by a prompt; with `warmReserve`, each create and
 * resume finds a warm process ready (the bench waits for the refill between them, untimed).
 */
const createAndResume = async (home: string, warmReserve: number) => {
  const pids: Array<number> = []
  const plugin = PluginProvider.layer({
    provider: "shell",
    plugin: { command: process.execPath, args: [shellPlugin] },
    home,
    onSpawn: (pid) => pids.push(pid)
  })
  const reserveLayer = WarmReserveLive.layer({ targets: { shell: warmReserve } }).pipe(
    Layer.provideMerge(Layer.mergeAll(RuntimeLedgerMemory.layer, plugin.pipe(Layer.provideMerge(ProviderRegistry.layer))))
  )
  const registryLayer = WarmReserveLive.opened.pipe(
    Layer.provideMerge(AgentRegistryLive.layer),
    Layer.provide([AgentStoreMemory.layer, TurnJournalMemory.layer]),
    Layer.provideMerge(reserveLayer)
  )
  const collectorLayer = RuntimeCollectorLive.layer({ tickInterval: "3650 days" }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, new FakeCallerProtection().layer])
  )
  const scope = Effect.runSync(Scope.make())
  try {
    const context = await run(Layer.buildWithScope(collectorLayer.pipe(Layer.provideMerge(registryLayer)), scope))
    const registry = Context.get(context, AgentRegistry)
    const collector = Context.get(context, RuntimeCollector)
    const reserve = Context.get(context, WarmReserve)
    const create: Array<number> = []
    const resume: Array<number> = []
    const rss: Array<number> = []
    for (let i = 0; i < 20; i++) {
      if (warmReserve > 0) await run(warmReady(reserve))
      let start = performance.now()
      const agent = await run(registry.create({ provider: "shell", cwd: home }))
      create.push(performance.now() - start)
      await run(Effect.gen(function*() {
        yield* registry.prompt(agent.agentId, "true")
        yield* registry.awaitIdle(agent.agentId)
      }))
      const pid = (await run(registry.get(agent.agentId))).pid
      if (pid !== null) rss.push(rssKiB(pid))
      const released = await run(collector.collectNow(agent.agentId))
      if (released._tag !== "Collected") throw new Error(`not released: ${JSON.stringify(released)}`)
      if (warmReserve > 0) await run(warmReady(reserve))
      start = performance.now()
      await run(registry.prompt(agent.agentId, "true"))
      resume.push(performance.now() - start)
      await run(Effect.andThen(registry.awaitIdle(agent.agentId), registry.close(agent.agentId)))
    }
    return { create: median(create), resume: median(resume), rssMiB: median(rss) / 1024, processes: pids.length }
  } finally {
    await run(Scope.close(scope, Exit.void))
  }
}

export const shellBench = async (): Promise<ReadonlyArray<BenchRow>> => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-bench-shell-"))
  try {
    const cold = await createAndResume(home, 0)
    const warm = await createAndResume(home, 1)
    const ratio = warm.resume / cold.resume
    return [
      { name: "shell runtime cold start (spawn, connect, open), median of 20", value: `${cold.create.toFixed(1)} ms`, target: "", ok: undefined },
      { name: "shell runtime resume on a prompt after release, median of 20", value: `${cold.resume.toFixed(1)} ms`, target: "", ok: undefined },
      { name: "shell create with a warm reserve of 1, median of 20", value: `${warm.create.toFixed(1)} ms`, target: "", ok: undefined },
      {
        name: "shell resume with a warm reserve of 1, median of 20",
        value: `${warm.resume.toFixed(1)} ms (${(ratio * 100).toFixed(0)} % of cold)`,
        target: "< 25 % of cold",
        ok: ratio < 0.25
      },
      { name: "RSS of an idle shell runtime (plugin process)", value: `${cold.rssMiB.toFixed(1)} MiB`, target: "", ok: undefined }
    ]
  } finally {
    rmSync(home, { recursive: true, force: true })
  }
}
