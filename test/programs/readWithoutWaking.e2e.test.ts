/**
 * Reading a home without waking it, as a user does: a real daemon (alone, or a hub's) creates
 * agents with labels and runs their turns with the reference shell provider, then stops or
 * retires; the CLI and the hub then list the agents, their sessions, labels and turns from the
 * home's saved SQLite file, read-only, and no daemon starts. While a process holds the home's
 * lock, the saved store is not read. Time is real, so every wait polls with a bound; every process
 * started is stopped by group after each test.
 */
import { spawn, spawnSync } from "node:child_process"
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { liveLockHolder } from "../../src/layers/host/Home.ts"
import { cleanUpDaemons, freePort, newHome, ready, startDaemon, until } from "../support/daemonProcess.ts"
import {
  cleanUpHubs,
  daemonRecord,
  hubApi,
  inventoryRow,
  newHubRoot,
  processAlive,
  runHubCli,
  startHub,
  writeHubConfig
} from "../support/hubProcess.ts"

const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")

afterEach(async () => {
  await cleanUpHubs()
  await cleanUpDaemons()
})

/**
 * The CLI on the daemon home `home` (`--home`), with no hub of the user's own in sight: the
 * default hub home is `hubHome` (a test's, or one that does not exist).
 */
const quiesce = (home: string, hubHome: string, ...args: Array<string>) => {
  const result = spawnSync(process.execPath, [cli, "--home", home, ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env: { ...process.env, QUIESCE_HUB_HOME: hubHome, QUIESCE_HUB: "" }
  })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

const ok = (result: { readonly status: number | null; readonly stdout: string; readonly stderr: string }) => {
  expect(result.status, result.stderr).toBe(0)
  return result
}

const idOf = (created: { readonly stdout: string }): string => JSON.parse(created.stdout).agentId

/** How many times a daemon became ready in the home (each start appends to its log). */
const readyCount = (home: string) => {
  const file = join(home, "daemon.log")
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((line) => line.includes("Quiesce ready")).length : 0
}

/** No daemon runs for the home: no record, no live holder of its lock. */
const noDaemon = (home: string) => {
  expect(daemonRecord(home)).toBeUndefined()
  expect(liveLockHolder(home)).toBeUndefined()
}

describe("reading a home without its daemon", () => {
  it("the CLI lists agents, sessions, labels and turns from the saved store, read-only, in the daemon's shape, and starts no daemon", async () => {
    const home = newHome()
    const nowhere = join(home, "no-hub")
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const web = idOf(ok(quiesce(home, nowhere, "agents", "create", "--json", "--cwd", home, "--label", "team=web", "--label", "tier=1")))
    const ops = idOf(ok(quiesce(home, nowhere, "agents", "create", "--json", "--cwd", home, "--label", "team=ops")))
    expect(ok(quiesce(home, nowhere, "prompt", web, "--wait", "echo saved reply")).stdout).toBe("saved reply\n")
    const live = JSON.parse(ok(quiesce(home, nowhere, "agents", "show", web, "--json")).stdout)
    expect(live.sessionId).toMatch(/^shell-/)
    ok(quiesce(home, nowhere, "stop"))
    await until(() => daemon.process.exitCode !== null, "the daemon exits")
    noDaemon(home)
    const database = join(home, "quiesce.sqlite")
    const before = { size: statSync(database).size, mtime: statSync(database).mtimeMs, starts: readyCount(home) }

    const note = `No daemon is running for ${home}: read from its saved store (read-only).`
    const listed = ok(quiesce(home, nowhere, "agents", "list"))
    expect(listed.stderr.trim()).toBe(note)
    const rows = listed.stdout.trim().split("\n")
    expect(rows[0]).toMatch(/^AGENT\s+PROVIDER\s+STATE\s+LAST ACTIVE\s+LABELS\s+CWD$/)
    expect(rows.find((row) => row.startsWith(web))).toMatch(new RegExp(`^${web}\\s+shell\\s+released\\s+.+ago\\s+team=web,tier=1\\s+${home}$`))
    expect(rows.find((row) => row.startsWith(ops))).toMatch(/released .*team=ops/)

    const shown = JSON.parse(ok(quiesce(home, nowhere, "agents", "show", web, "--json")).stdout)
    expect(shown).toMatchObject({ agentId: web, sessionId: live.sessionId, labels: { team: "web", tier: "1" }, resident: false, pid: null })
    const turns = ok(quiesce(home, nowhere, "turns", "list", web))
    expect(turns.stderr.trim()).toBe(note)
    expect(turns.stdout).toMatch(/turn-\S+\s+completed\s+.+\s+echo saved reply/)
    const [turn] = JSON.parse(ok(quiesce(home, nowhere, "turns", "list", web, "--json")).stdout)
    expect(JSON.parse(ok(quiesce(home, nowhere, "turns", "show", web, turn.turnId, "--json")).stdout))
      .toMatchObject({ turnId: turn.turnId, text: "echo saved reply", reply: "saved reply\n", state: "completed" })
    expect(ok(quiesce(home, nowhere, "turns", "list", ops)).stdout).toContain(`no turn yet: ${ops} has not been prompted`)
    const unknown = quiesce(home, nowhere, "agents", "show", "agent-nope")
    expect(unknown.status).toBe(1)
    expect(unknown.stderr).toContain("quiesce: No agent with id agent-nope")
    const savedJson = JSON.parse(ok(quiesce(home, nowhere, "agents", "list", "--json")).stdout)

    // A command that needs the daemon still says it does not run.
    const status = quiesce(home, nowhere, "status")
    expect(status.status).toBe(1)
    expect(status.stderr.trim()).toBe(`quiesce: No daemon is running for ${home}. Start one with: quiesce --home ${home} daemon`)

    // None of it started a daemon, wrote the store, or counted as activity.
    noDaemon(home)
    expect(readyCount(home)).toBe(before.starts)
    expect({ size: statSync(database).size, mtime: statSync(database).mtimeMs }).toEqual({ size: before.size, mtime: before.mtime })

    // A running daemon answers for itself (the reader is not used), in the same shape.
    const again = startDaemon(home, await freePort())
    await ready(again)
    const fromDaemon = ok(quiesce(home, nowhere, "agents", "list", "--json"))
    expect(fromDaemon.stderr).toBe("")
    expect(JSON.parse(fromDaemon.stdout)).toEqual(savedJson)
    ok(quiesce(home, nowhere, "prompt", web, "--wait", "echo live"))
    const resident = ok(quiesce(home, nowhere, "agents", "list"))
    expect(resident.stderr).toBe("")
    expect(resident.stdout).toMatch(new RegExp(`${web}\\s+shell\\s+resident \\(pid \\d+\\)`))
  }, 120_000)

  it("while a live process holds the home's lock without a record, the saved store is not read", async () => {
    const home = newHome()
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    ok(quiesce(home, join(home, "no-hub"), "agents", "create", "--cwd", home))
    ok(quiesce(home, join(home, "no-hub"), "stop"))
    await until(() => daemon.process.exitCode !== null, "the daemon exits")
    // A process of the test's own holds the lock, as a daemon does while it starts or exits.
    const holder = spawn("sleep", ["300"], { detached: true, stdio: "ignore" })
    try {
      writeFileSync(join(home, "daemon.lock"), JSON.stringify({ pid: holder.pid, startedAt: Date.now() }))
      const held = quiesce(home, join(home, "no-hub"), "agents", "list")
      expect(held.status).toBe(1)
      expect(held.stdout).toBe("")
      expect(held.stderr.trim()).toBe(
        `quiesce: A daemon (pid ${holder.pid}) holds ${home}, so it answers for its agents, not its saved store: ask it again in a moment`
      )
    } finally {
      process.kill(-holder.pid!, "SIGKILL")
    }
    await until(() => !processAlive(holder.pid!), "the lock's holder is gone")
    // A stale lock does not stand in the way.
    expect(ok(quiesce(home, join(home, "no-hub"), "agents", "list")).stdout).toContain("released")
  }, 60_000)

  it("reads racing a daemon's start neither block nor break it", async () => {
    const home = newHome()
    const first = startDaemon(home, await freePort())
    await ready(first)
    const agent = idOf(ok(quiesce(home, join(home, "no-hub"), "agents", "create", "--json", "--cwd", home)))
    ok(quiesce(home, join(home, "no-hub"), "stop"))
    await until(() => first.process.exitCode !== null, "the daemon exits")
    // Readers keep the store open while a daemon opens, migrates and serves it.
    let reading = true
    const reads: Array<{ readonly status: number | null; readonly stderr: string }> = []
    const readers = (async () => {
      while (reading) {
        reads.push(await new Promise((resolve) => {
          const child = spawn(process.execPath, [cli, "--home", home, "agents", "list"], {
            stdio: ["ignore", "ignore", "pipe"],
            env: { ...process.env, QUIESCE_HUB_HOME: join(home, "no-hub"), QUIESCE_HUB: "" }
          })
          let stderr = ""
          child.stderr.on("data", (chunk) => (stderr += String(chunk)))
          child.on("exit", (status) => resolve({ status, stderr }))
        }))
      }
    })()
    await new Promise((resolve) => setTimeout(resolve, 300))
    const second = startDaemon(home, await freePort())
    await ready(second)
    expect(ok(quiesce(home, join(home, "no-hub"), "prompt", agent, "--wait", "echo served")).stdout).toBe("served\n")
    reading = false
    await readers
    expect(reads.length).toBeGreaterThan(0)
    // Each read was answered (by the store, or by the daemon), or told the daemon holds the home.
    for (const read of reads) expect(read.status === 0 || read.stderr.includes("holds"), read.stderr).toBe(true)
  }, 90_000)
})

describe("reading a retired or stopped home through the hub", () => {
  it("the hub answers agents and turns from the saved store without starting the daemon; the CLI says so", async () => {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    const dir = join(root, "work")
    writeHubConfig(hubHome, [{ name: "work", dir }], "1h")
    const hub = await startHub(hubHome)
    const agent = idOf(ok(runHubCli(hubHome, "--hub", "work", "agents", "create", "--json", "--cwd", root, "--label", "team=web")))
    expect(ok(runHubCli(hubHome, "--hub", "work", "prompt", agent, "--wait", "echo kept")).stdout).toBe("kept\n")
    const { sessionId } = JSON.parse(ok(runHubCli(hubHome, "--hub", "work", "agents", "show", agent, "--json")).stdout)
    const first = daemonRecord(dir)!
    const retired = await hubApi(hub, "POST", "/v1/daemons/work/retire", { pid: first.pid, startTime: first.startTime, instanceId: first.instanceId })
    expect(retired.status, JSON.stringify(retired.body)).toBe(202)
    await until(() => !processAlive(first.pid), "the daemon retires")
    await until(() => daemonRecord(dir) === undefined && liveLockHolder(dir) === undefined, "the home is free")

    // Through the CLI: exit 0, the agent released with its session and labels, and one line on stderr.
    const retiredNote = "The home work is retired: the hub read this from its saved store (read-only); its next prompt starts its daemon"
    const listed = ok(runHubCli(hubHome, "--hub", "work", "agents", "list"))
    expect(listed.stderr.trim()).toBe(retiredNote)
    expect(listed.stdout).toMatch(new RegExp(`${agent}\\s+shell\\s+released\\s+.+\\s+team=web`))
    expect(JSON.parse(ok(runHubCli(hubHome, "--hub", "work", "agents", "show", agent, "--json")).stdout))
      .toMatchObject({ agentId: agent, sessionId, labels: { team: "web" }, resident: false })
    expect(ok(runHubCli(hubHome, "--hub", "work", "turns", "list", agent)).stdout).toMatch(/completed\s+.+\s+echo kept/)

    // Over HTTP: the daemon's shapes and problems, with the header that says why.
    const read = await fetch(`http://127.0.0.1:${hub.port}/v1/homes/work/agents/${agent}/turns?limit=1`, {
      headers: { authorization: `Bearer ${hub.token}` }
    })
    expect(read.status).toBe(200)
    expect(read.headers.get("quiesce-saved-store")).toBe("retired")
    const [turn] = await read.json()
    expect(turn).toMatchObject({ agentId: agent, text: "echo kept", reply: "kept\n", state: "completed" })
    expect((await hubApi(hub, "GET", `/v1/homes/work/agents/${agent}/turns/${turn.turnId}`)).body).toEqual(turn)
    const missing = await hubApi(hub, "GET", "/v1/homes/work/agents/agent-nope")
    expect(missing).toMatchObject({ status: 404, body: { _tag: "AgentNotFound", status: 404, type: "urn:quiesce:error:AgentNotFound" } })
    const noTurn = await hubApi(hub, "GET", `/v1/homes/work/agents/${agent}/turns/turn-nope`)
    expect(noTurn).toMatchObject({ status: 404, body: { _tag: "TurnNotFound" } })
    const badLimit = await hubApi(hub, "GET", `/v1/homes/work/agents/${agent}/turns?limit=0`)
    expect(badLimit).toMatchObject({ status: 400, body: { _tag: "InvalidRequest", errors: [{ path: ["query", "limit"] }] } })
    // What only a live daemon knows still says the home is retired.
    expect((await hubApi(hub, "GET", "/v1/homes/work/runtimes")).body._tag).toBe("HomeRetired")
    const row = await inventoryRow(hub, "work")
    expect(row.state).toBe("retired")
    // Its memory is all released: what its release gave back, from its saved store, in the row and the hub's totals.
    expect(row.memoryTotals).toMatchObject({ residentRuntimes: 0, releasedAgents: 1, unmeasuredReleased: 0 })
    expect(row.memoryTotals.releasedBytes).toBeGreaterThan(1024 * 1024)
    expect(row.memoryTotals.byLabel).toEqual([expect.objectContaining({ label: "team=web", releasedAgents: 1 })])
    const inventory = (await hubApi(hub, "GET", "/v1/daemons")).body
    expect(inventory.memoryTotals).toMatchObject({ releasedAgents: 1, releasedBytes: row.memoryTotals.releasedBytes })
    const daemonsListed = ok(runHubCli(hubHome, "daemons"))
    expect(daemonsListed.stdout).toMatch(/^work +retired .*MiB by 1 agent/m)
    expect(daemonsListed.stdout).toMatch(/^all homes +0 B in 0 runtimes +[\d.]+ MiB by 1 agent/m)
    noDaemon(dir)

    // Force-stopped: read the same way, said so.
    ok(runHubCli(hubHome, "daemons", "resume", "work"))
    const second = daemonRecord(dir)!
    ok(runHubCli(hubHome, "daemons", "stop", "work", "--confirm", `work:${second.pid}`))
    await until(() => daemonRecord(dir) === undefined && liveLockHolder(dir) === undefined, "the stopped home is free")
    const stopped = ok(runHubCli(hubHome, "--hub", "work", "agents", "list"))
    expect(stopped.stderr.trim()).toBe(
      "The home work is force-stopped: the hub read this from its saved store (read-only); quiesce daemons resume work starts it again"
    )
    expect(stopped.stdout).toContain(agent)
    noDaemon(dir)

    // Without the hub, the CLI reads the home itself; a command that needs the daemon names the hub way.
    process.kill(-hub.process.pid!, "SIGTERM")
    await until(() => !processAlive(hub.process.pid!), "the hub stops")
    const direct = ok(quiesce(dir, hubHome, "agents", "list"))
    expect(direct.stderr.trim()).toBe(`No daemon is running for ${dir}: read from its saved store (read-only).`)
    expect(direct.stdout).toContain(agent)
    const needsDaemon = quiesce(dir, hubHome, "runtimes")
    expect(needsDaemon.status).toBe(1)
    expect(needsDaemon.stderr.trim()).toBe(
      `quiesce: No daemon is running for ${dir}. Start one with: quiesce --home ${dir} daemon; or, as it is the home work of a hub, ` +
        "which starts its daemon when needed, start the hub (quiesce hub) and go through it: quiesce --hub work …"
    )
    noDaemon(dir)
  }, 120_000)
})
