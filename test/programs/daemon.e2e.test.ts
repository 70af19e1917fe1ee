/**
 * The daemon as a user runs it: a real process on a free loopback port, driven only through its
 * HTTP API and the CLI. Time is real, so every wait polls with a bound.
 */
import { afterEach, describe, expect, it } from "vitest"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

const cli = join(import.meta.dirname, "../../src/programs/cli.ts")

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const until = async (condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await condition()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`timed out waiting until ${what}`)
}

const groupAlive = (pid: number) => {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

interface Daemon {
  readonly home: string
  readonly port: number
  readonly process: ChildProcess
  readonly output: () => string
  readonly token: () => string
}

const started: Array<ChildProcess> = []
const homes: Array<string> = []

afterEach(() => {
  for (const child of started.splice(0)) if (child.pid !== undefined && groupAlive(child.pid)) process.kill(-child.pid, "SIGKILL")
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true })
})

const newHome = () => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-e2e-"))
  homes.push(home)
  return home
}

const startDaemon = (home: string, port: number, flags: ReadonlyArray<string> = []): Daemon => {
  const child = spawn(process.execPath, [cli, "--home", home, "daemon", "--port", String(port), ...flags], {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"]
  })
  started.push(child)
  let output = ""
  child.stdout?.on("data", (chunk) => (output += String(chunk)))
  child.stderr?.on("data", (chunk) => (output += String(chunk)))
  return {
    home,
    port,
    process: child,
    output: () => output,
    token: () => readFileSync(join(home, "token"), "utf8").trim()
  }
}

const ready = (daemon: Daemon) => until(() => daemon.output().includes("Quiesce ready"), "the daemon is ready")

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode)
    else child.once("exit", (code) => resolve(code))
  })

const api = async (daemon: Daemon, method: string, route: string, body?: unknown, token = daemon.token()) => {
  const response = await fetch(`http://127.0.0.1:${daemon.port}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
}

// The CLI finds the daemon through the address it wrote into the home (it listens on --port).
const runCli = (daemon: Daemon, ...args: Array<string>) => {
  const result = spawnSync(process.execPath, [cli, "--home", daemon.home, ...args], { encoding: "utf8", timeout: 20_000 })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

describe("the daemon end to end", () => {
  it("quick start: a background job keeps the runtime, then it is released and resumed", async () => {
    const daemon = startDaemon(newHome(), await freePort(), ["--idle-period", "2s", "--sweep-interval", "500ms"])
    await ready(daemon)
    const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: daemon.home })
    expect(created.status).toBe(201)
    const { agentId, sessionId } = created.body
    const first = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "echo remembered", wait: true })
    expect(first.body.output).toContain("remembered")
    await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "sleep 3 &", wait: true })

    const table = runCli(daemon, "runtimes")
    expect(table.status).toBe(0)
    expect(table.stdout).toContain(agentId)
    expect(table.stdout).toMatch(/vetoed|blocked/)
    const pid: number = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pid
    expect(groupAlive(pid)).toBe(true)

    await until(async () => (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.resident === false, "the runtime is released", 20_000)
    await until(() => !groupAlive(pid), "its process group is gone")
    const metrics = await (await fetch(`http://127.0.0.1:${daemon.port}/metrics`)).text()
    expect(metrics).toMatch(/quiesce_collections_total\{provider="shell"\} [1-9]/)
    const released = Number(/quiesce_released_bytes_total (\d+)/.exec(metrics)?.[1])
    expect(released).toBeGreaterThan(10 * 1024 * 1024)

    const again = runCli(daemon, "prompt", agentId, "echo back", "--wait")
    expect(again.status).toBe(0)
    expect(again.stdout).toContain("back")
    const shown = await api(daemon, "GET", `/v1/agents/${agentId}`)
    expect(shown.body).toMatchObject({ resident: true, sessionId })
    const transcript = readFileSync(join(daemon.home, "plugins", "shell", `${sessionId}.json`), "utf8")
    expect(transcript).toContain("echo remembered")
    expect(transcript).toContain("echo back")
  }, 60_000)

  it("requests without the token get 401; health needs none", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    expect((await api(daemon, "GET", "/v1/agents", undefined, "wrong")).status).toBe(401)
    expect((await fetch(`http://127.0.0.1:${daemon.port}/v1/health`)).status).toBe(200)
  }, 30_000)

  it("a bad configuration exits with a clear message before anything listens", async () => {
    const home = newHome()
    writeFileSync(join(home, "config.json"), JSON.stringify({ agents: { idlePeriod: "-5m" } }))
    const daemon = startDaemon(home, await freePort())
    expect(await exited(daemon.process)).toBe(1)
    expect(daemon.output()).toContain(`["agents"]["idlePeriod"]`)
    expect(daemon.output()).not.toContain("Quiesce ready")
  }, 30_000)

  it("a second daemon on the same home is refused, naming the first", async () => {
    const home = newHome()
    const first = startDaemon(home, await freePort())
    await ready(first)
    const second = startDaemon(home, await freePort())
    expect(await exited(second.process)).toBe(1)
    expect(second.output()).toContain(`pid ${first.process.pid}`)
  }, 30_000)

  it("daemons started at once on one home: exactly one runs", async () => {
    const home = newHome()
    const daemons = await Promise.all(Array.from({ length: 4 }, async () => startDaemon(home, await freePort())))
    await until(() => daemons.some((daemon) => daemon.output().includes("Quiesce ready")), "one daemon is ready")
    const losers = daemons.filter((daemon) => !daemon.output().includes("Quiesce ready"))
    expect(losers).toHaveLength(3)
    for (const loser of losers) {
      expect(await exited(loser.process)).toBe(1)
      expect(loser.output()).toContain("in use by another Quiesce daemon")
    }
  }, 30_000)

  it("SIGTERM releases every runtime resumable, leaves no process, and a restart resumes", async () => {
    const home = newHome()
    const port = await freePort()
    const daemon = startDaemon(home, port)
    await ready(daemon)
    const { agentId, sessionId } = (await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: home })).body
    await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "sleep 30 &", wait: true })
    const pid: number = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pid
    daemon.process.kill("SIGTERM")
    expect(await exited(daemon.process)).toBe(0)
    await until(() => !groupAlive(pid), "the runtime's process group is gone")

    const restarted = startDaemon(home, port)
    await ready(restarted)
    const shown = await api(restarted, "GET", `/v1/agents/${agentId}`)
    expect(shown.body).toMatchObject({ resident: false, lifecycle: "closed", sessionId })
    const resumed = await api(restarted, "POST", `/v1/agents/${agentId}/prompts`, { text: "echo after restart", wait: true })
    expect(resumed.body).toMatchObject({ resumed: true, sessionId })
    expect(resumed.body.output).toContain("after restart")
  }, 60_000)
})
