import { Context, Effect, Exit, Layer, Scope } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FakeCallerProtection } from "../src/layers/collector/RuntimeCandidatesTest.ts"
import * as PluginProvider from "../src/layers/providers/plugin/PluginProvider.ts"
import * as AgentRegistryLive from "../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../src/services/AgentRegistry.ts"
import { ProviderRegistry } from "../src/services/ProviderRegistry.ts"
import { RuntimeCollector } from "../src/services/RuntimeCollector.ts"
import { type BenchRow, median, run } from "./table.ts"

const shellPlugin = join(import.meta.dirname, "../plugins/shell/main.ts")

/** Resident set size of one process in KiB, from procfs. */
const rssKiB = (pid: number): number => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
  return line === undefined ? Number.NaN : Number(line.replace(/\D+/g, ""))
}

export const shellBench = async (): Promise<ReadonlyArray<BenchRow>> => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-bench-shell-"))
  const pids: Array<number> = []
  const plugin = PluginProvider.layer({
    provider: "shell",
    plugin: { command: process.execPath, args: [shellPlugin] },
    home,
    onSpawn: (pid) => pids.push(pid)
  })
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([AgentStoreMemory.layer, TurnJournalMemory.layer, RuntimeLedgerMemory.layer, plugin.pipe(Layer.provideMerge(ProviderRegistry.layer))])
  )
  const collectorLayer = RuntimeCollector.layer({ tickInterval: "3650 days" }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, new FakeCallerProtection().layer])
  )
  const scope = Effect.runSync(Scope.make())
  try {
    const context = await run(Layer.buildWithScope(collectorLayer.pipe(Layer.provideMerge(registryLayer)), scope))
    const registry = Context.get(context, AgentRegistry)
    const collector = Context.get(context, RuntimeCollector)
    const cold: Array<number> = []
    const resume: Array<number> = []
    const rss: Array<number> = []
    for (let i = 0; i < 20; i++) {
      let start = performance.now()
      const agent = await run(registry.create({ provider: "shell", cwd: home }))
      cold.push(performance.now() - start)
      await run(Effect.gen(function*() {
        yield* registry.prompt(agent.agentId, "true")
        yield* registry.awaitIdle(agent.agentId)
      }))
      rss.push(rssKiB(pids[pids.length - 1]!))
      const released = await run(collector.collectNow(agent.agentId))
      if (released._tag !== "Collected") throw new Error(`not released: ${JSON.stringify(released)}`)
      start = performance.now()
      await run(registry.prompt(agent.agentId, "true"))
      resume.push(performance.now() - start)
      await run(Effect.andThen(registry.awaitIdle(agent.agentId), registry.close(agent.agentId)))
    }
    const rssMiB = median(rss) / 1024
    return [
      { name: "shell runtime cold start (spawn, connect, open), median of 20", value: `${median(cold).toFixed(1)} ms`, target: "", ok: undefined },
      { name: "shell runtime resume on a prompt after release, median of 20", value: `${median(resume).toFixed(1)} ms`, target: "", ok: undefined },
      { name: "RSS of an idle shell runtime (plugin process)", value: `${rssMiB.toFixed(1)} MiB`, target: "", ok: undefined }
    ]
  } finally {
    await run(Scope.close(scope, Exit.void))
    rmSync(home, { recursive: true, force: true })
  }
}
