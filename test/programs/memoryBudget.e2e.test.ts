/**
 * The memory budget end to end: a real daemon, 30 real shell runtimes each holding real memory (a
 * test-only wrapper of the shell plugin fills QUIESCE_TEST_BALLAST_MIB MiB), a budget well under
 * their sum. Time is real, so every wait polls with a bound.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { api, cleanUpDaemons, exited, freePort, groupRuns, newHome, ready, runCli, startDaemon, until } from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

const ballastPlugin = join(import.meta.dirname, "../fixtures/ballastShellPlugin.mjs")
const mib = 1024 * 1024
const low = 1000 * mib

describe("memory budget (issue 28)", () => {
  it("releases the safest runtimes first until under the low watermark; vetoed ones stay, released ones resume", async () => {
    const home = newHome()
    writeFileSync(join(home, "config.json"), JSON.stringify({
      agents: { memory: { high: "1400MiB", low: "1000MiB", minIdle: "3s", sampleInterval: "1s" } },
      providers: {
        shell: {
          kind: "plugin",
          command: process.execPath,
          args: [ballastPlugin],
          env: { QUIESCE_TEST_BALLAST_MIB: "48" }
        }
      }
    }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)

    // 30 runtimes of about 100 MiB each (Node.js and 48 MiB of ballast); every sixth has a background job.
    const agents: Array<{ readonly agentId: string; readonly sessionId: string; readonly vetoed: boolean }> = []
    const pids = new Set<number>()
    const notePids = async () => {
      for (const agent of (await api(daemon, "GET", "/v1/agents")).body) if (agent.pid !== null) pids.add(agent.pid)
    }
    for (let i = 0; i < 30; i++) {
      const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: home })
      expect(created.status).toBe(201)
      const vetoed = i % 6 === 0
      const first = await api(daemon, "POST", `/v1/agents/${created.body.agentId}/prompts`, {
        text: vetoed ? "sleep 600 &" : `echo hello-${i}`,
        wait: true
      })
      expect(first.body.state).toBe("completed")
      agents.push({ agentId: created.body.agentId, sessionId: created.body.sessionId, vetoed })
      await notePids()
    }
    const vetoed = agents.filter((agent) => agent.vetoed)
    const others = agents.filter((agent) => !agent.vetoed)

    await until(async () => (await api(daemon, "GET", "/v1/memory")).body.episodes >= 1, "a pressure episode begins", 60_000)

    // 20 prompts at once while the pressure sweeps run: each is answered, once.
    const burst = others.slice(0, 20)
    const answers = await Promise.all(burst.map((agent, i) =>
      api(daemon, "POST", `/v1/agents/${agent.agentId}/prompts`, {
        text: `echo once-${i}`,
        clientMessageId: `burst-${i}`,
        wait: true
      })
    ))
    answers.forEach((answer, i) => {
      expect(answer.status).toBe(200)
      expect(answer.body).toMatchObject({ state: "completed", sessionId: burst[i]!.sessionId })
      expect(answer.body.output).toContain(`once-${i}`)
    })
    for (const [i, agent] of burst.entries()) {
      const turns = (await api(daemon, "GET", `/v1/agents/${agent.agentId}/turns?limit=100`)).body
      expect(turns.filter((turn: { clientMessageId: string | null }) => turn.clientMessageId === `burst-${i}`)).toHaveLength(1)
    }
    await notePids()

    // The burst resumed runtimes; the next sweeps bring the total under the low watermark again.
    let memory = (await api(daemon, "GET", "/v1/memory")).body
    await until(async () => {
      memory = (await api(daemon, "GET", "/v1/memory")).body
      return memory.pressure === null && memory.residentBytes < low
    }, "usage is under the low watermark and the episode is over", 90_000)
    const rows: Array<{ agentId: string; rssBytes: number | null; evictionRank?: number | null }> =
      (await api(daemon, "GET", "/v1/runtimes")).body
    expect(rows.reduce((sum, row) => sum + (row.rssBytes ?? 0), 0)).toBeLessThan(low)
    expect(rows.length, JSON.stringify({ ...memory, order: undefined })).toBeLessThan(30)
    for (const agent of vetoed) {
      expect((await api(daemon, "GET", `/v1/agents/${agent.agentId}`)).body.resident).toBe(true)
    }
    expect(memory.budget).toMatchObject({ high: 1400 * mib, low })
    expect(rows.every((row) => row.evictionRank === null || typeof row.evictionRank === "number")).toBe(true)

    const status = runCli(daemon, "status")
    expect(status.status).toBe(0)
    expect(status.stdout).toMatch(/^memory +\d+\.\d MiB of 1\.4 GiB \(release down to 1000\.0 MiB\); no pressure/m)
    const table = runCli(daemon, "runtimes")
    expect(table.stdout).toMatch(/EVICT/)
    expect(table.stdout).toMatch(/^budget \d+\.\d MiB of 1\.4 GiB/m)
    const explained = runCli(daemon, "explain", vetoed[0]!.agentId)
    expect(explained.stdout).toMatch(/^pressure +#\d+ in the eviction order/m)
    expect(explained.stdout).toMatch(/^budget +\d+\.\d MiB of 1\.4 GiB/m)

    const metrics = await (await fetch(`http://127.0.0.1:${daemon.port}/metrics`)).text()
    expect(metrics).toMatch(/quiesce_memory_releases_total\{cause="pressure"\} [1-9]/)
    expect(metrics).toMatch(/quiesce_memory_pressure_episodes_total [1-9]/)
    expect(Number(/quiesce_memory_released_bytes_total\{cause="pressure"\} (\d+)/.exec(metrics)?.[1])).toBeGreaterThan(50 * mib)

    // Every released runtime resumes its own session on its next prompt.
    const released = []
    for (const agent of others) {
      if ((await api(daemon, "GET", `/v1/agents/${agent.agentId}`)).body.resident === false) released.push(agent)
    }
    expect(released.length).toBeGreaterThan(10)
    for (const agent of released) {
      const again = await api(daemon, "POST", `/v1/agents/${agent.agentId}/prompts`, { text: "echo back", wait: true })
      expect(again.body).toMatchObject({ state: "completed", resumed: true, sessionId: agent.sessionId })
      await notePids()
    }

    daemon.process.kill("SIGTERM")
    await exited(daemon.process)
    for (const pid of pids) expect(groupRuns(pid)).toBe(false)
  }, 240_000)
})
