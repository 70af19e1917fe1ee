/**
 * Daemon retirement, through a real daemon and the reference shell provider: how long from the
 * end of the idle interval until the process has exited, with released and resident agents.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { api, createShellAgent, exited, freePort, groupAlive, ready, startDaemon, until } from "../test/support/daemonProcess.ts"
import type { BenchRow } from "./table.ts"

const retiredExitCode = 75

export const retirementBench = async (released: number, resident: number): Promise<ReadonlyArray<BenchRow>> => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-bench-retire-"))
  const daemon = startDaemon(home, await freePort(), ["--daemon-idle-timeout", "4s"])
  const groups: Array<number> = []
  try {
    await ready(daemon)
    // Every agent runs a turn (so it has a saved session); the released ones are then closed.
    const ids: Array<string> = []
    while (ids.length < released + resident) {
      const batch = await Promise.all(Array.from({ length: Math.min(10, released + resident - ids.length) }, async () => {
        const agentId = await createShellAgent(daemon)
        const turn = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "true", wait: true })
        if (turn.body?.state !== "completed") throw new Error(`warm-up turn: ${JSON.stringify(turn.body)}`)
        groups.push((await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pid)
        if (ids.length + 10 <= released) await api(daemon, "POST", `/v1/agents/${agentId}/close`)
        return agentId
      }))
      ids.push(...batch)
    }
    const residentCount = (await api(daemon, "GET", "/v1/runtimes")).body.length
    // Activity restarts the interval: the deadline is read once everything has settled.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const { deadline } = (await api(daemon, "GET", "/v1/daemon")).body
    const code = await exited(daemon.process)
    const exitedAt = Date.now()
    await until(() => groups.every((pid) => !groupAlive(pid)), "every runtime's process group is gone", 10_000)
    const ms = exitedAt - Date.parse(deadline)
    return [{
      name: `retirement: interval end to process exit, ${released} released + ${residentCount} resident idle shell agents`,
      value: `${ms} ms (exit code ${code})`,
      target: "",
      ok: code === retiredExitCode && residentCount === resident ? undefined : false
    }]
  } finally {
    if (daemon.process.exitCode === null && daemon.process.pid !== undefined) {
      process.kill(-daemon.process.pid, "SIGTERM")
      await exited(daemon.process)
    }
    rmSync(home, { recursive: true, force: true })
  }
}
