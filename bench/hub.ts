/**
 * The hub, with real hub and daemon processes and the reference shell provider: what a prompt to a
 * retired home costs (the daemon's start and the session's resume), and what routing through the
 * hub adds to a request against calling the daemon directly.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { until } from "../test/support/daemonProcess.ts"
import {
  cleanUpHubs,
  daemonRecord,
  hubApi,
  inventoryRow,
  newHubRoot,
  processAlive,
  startHub,
  writeHubConfig
} from "../test/support/hubProcess.ts"
import { type BenchRow, median } from "./table.ts"

const ms = (value: number) => `${value.toFixed(value < 10 ? 3 : 1)} ms`

export const hubBench = async (resumes: number, requests: number): Promise<ReadonlyArray<BenchRow>> => {
  try {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    const dir = join(root, "work")
    writeHubConfig(hubHome, [{ name: "work", dir }], "0s")
    const hub = await startHub(hubHome)
    const created = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "shell", cwd: root })
    const agentId: string = created.body.agentId
    await hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, { text: "true", wait: true })

    // Routing overhead: the same read through the hub and straight to the daemon, interleaved, after
    // a warm-up long enough for all three processes' code to be compiled.
    daemonRecord(dir)
    const daemonToken = readFileSync(join(dir, "token"), "utf8").trim()
    const daemonUrl = `http://127.0.0.1:${JSON.parse(readFileSync(join(dir, "daemon.json"), "utf8")).port}/v1/agents/${agentId}`
    const direct = async () => {
      const response = await fetch(daemonUrl, { headers: { authorization: `Bearer ${daemonToken}` } })
      JSON.parse(await response.text())
    }
    const routed = () => hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)
    const directTimes: Array<number> = []
    const routedTimes: Array<number> = []
    for (let i = 0; i < 500; i++) await Promise.all([direct(), routed()])
    for (let i = 0; i < requests; i++) {
      for (const [run, times] of [[direct, directTimes], [routed, routedTimes]] as const) {
        const start = performance.now()
        await run()
        times.push(performance.now() - start)
      }
    }
    const overhead = median(routedTimes) - median(directTimes)

    // A prompt that resumes a retired home: retire now, then one prompt through the hub.
    const resumeTimes: Array<number> = []
    let failures = 0
    for (let i = 0; i < resumes; i++) {
      const row = await inventoryRow(hub, "work")
      const retired = await hubApi(hub, "POST", "/v1/daemons/work/retire", {
        pid: row.pid,
        startTime: row.startTime,
        instanceId: row.instanceId
      })
      if (retired.status !== 202) throw new Error(`retire now: ${JSON.stringify(retired.body)}`)
      await until(() => !processAlive(row.pid), "the retired daemon exits", 20_000)
      const start = performance.now()
      const answer = await hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, { text: `echo ${i}`, wait: true })
      resumeTimes.push(performance.now() - start)
      if (answer.body?.state !== "completed" || answer.body?.resumed !== true) failures++
    }
    return [
      {
        name: `prompt to a retired home through the hub (daemon start + session resume), shell, median of ${resumes}`,
        value: `${ms(median(resumeTimes))} (min ${ms(Math.min(...resumeTimes))}, max ${ms(Math.max(...resumeTimes))}), ${failures} failed`,
        target: "",
        ok: failures === 0 ? undefined : false
      },
      {
        name: `hub routing overhead per request (GET an agent, p50 of ${requests}, hub vs direct)`,
        value: `+${ms(overhead)} (${ms(median(routedTimes))} vs ${ms(median(directTimes))})`,
        target: "< 1 ms p50",
        ok: overhead < 1
      }
    ]
  } finally {
    await cleanUpHubs()
  }
}

if (import.meta.main) {
  const { printTable } = await import("./table.ts")
  printTable([...(await hubBench(20, 500))])
}
