/**
 * An ACP agent's permission requests through a real daemon (P6, C4): the daemon's `config.json`
 * names an `acp` provider running the fixture agent (`test/fixtures/acpAgent.mjs`), whose prompt
 * "permission" asks before it writes `notes.txt`. Time is real, so every wait polls with a bound.
 */
import { afterEach, describe, expect, it } from "vitest"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import {
  api,
  cleanUpDaemons,
  type Daemon,
  exited,
  freePort,
  groupAlive,
  newHome,
  prompt,
  ready,
  runCli,
  startDaemon,
  until
} from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

const acpAgent = join(import.meta.dirname, "../fixtures/acpAgent.mjs")

/** A daemon serving the fixture as provider `acp`, with an agent working in a folder of its own. */
const acpDaemon = async () => {
  const home = newHome()
  writeFileSync(join(home, "config.json"), JSON.stringify({
    providers: {
      acp: { kind: "acp", command: process.execPath, args: [acpAgent], env: { ACP_FIXTURE_HOME: join(home, "acp-sessions") } }
    }
  }))
  // A short idle period: only the pending permission keeps the runtime from a sweep.
  const daemon = startDaemon(home, await freePort(), ["--idle-period", "1s"])
  await ready(daemon)
  const cwd = join(home, "work")
  mkdirSync(cwd)
  const created = await api(daemon, "POST", "/v1/agents", { provider: "acp", cwd })
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  const agentId: string = created.body.agentId
  return { daemon, agentId, cwd }
}

/** The permission the agent lists as pending, once it does. */
const pendingPermission = async (daemon: Daemon, agentId: string) => {
  let permission = ""
  await until(async () => {
    permission = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pendingPermissions[0] ?? ""
    return permission !== ""
  }, "the agent lists the permission it waits on")
  return permission
}

/** Stops the daemon and proves the runtime's process group ended with it. */
const stopAndProveClean = async (daemon: Daemon, pid: number) => {
  daemon.process.kill("SIGTERM")
  expect(await exited(daemon.process)).toBe(0)
  await until(() => !groupAlive(pid), "the runtime's process group is gone")
}

describe("ACP permissions through the daemon", () => {
  it("a pending permission is listed, keeps its turn running and its runtime through sweeps, and `quiesce permit` lets the tool run", async () => {
    const { daemon, agentId, cwd } = await acpDaemon()
    const asked = await prompt(daemon, agentId, { text: "permission" })
    expect(asked.status, JSON.stringify(asked.body)).toBe(200)
    const turnId: string = asked.body.turnId
    const permission = await pendingPermission(daemon, agentId)

    expect((await api(daemon, "GET", `/v1/agents/${agentId}/turns/${turnId}`)).body.state).toBe("running")
    // Idle for longer than the idle period, and still nothing releases it.
    await until(
      async () => Date.parse((await api(daemon, "GET", `/v1/runtimes/${agentId}`)).body.idleSince) < Date.now() - 1_500,
      "the idle period has passed"
    )
    const swept = await api(daemon, "POST", "/v1/sweep")
    expect(swept.status).toBe(200)
    expect(swept.body.collected).toEqual([])
    const held = await api(daemon, "POST", `/v1/runtimes/${agentId}/collect`)
    expect(held.body.outcome).toBe("retained")
    expect(held.body.blockers).toContainEqual(expect.objectContaining({ agentId, kind: "pending-permission" }))
    const explained = runCli(daemon, "explain", agentId)
    expect(explained.stdout).toContain("pending-permission")
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).body.resident).toBe(true)
    expect(existsSync(join(cwd, "notes.txt"))).toBe(false)

    const permitted = runCli(daemon, "permit", agentId, permission)
    expect(permitted.status, permitted.stderr).toBe(0)
    await until(async () => (await api(daemon, "GET", `/v1/agents/${agentId}/turns/${turnId}`)).body.state !== "running", "the turn ends")
    const turn = (await api(daemon, "GET", `/v1/agents/${agentId}/turns/${turnId}`)).body
    expect(turn).toMatchObject({ state: "completed", reply: "wrote notes.txt (allow-once)" })
    expect(readFileSync(join(cwd, "notes.txt"), "utf8")).toBe("written by the ACP fixture\n")
    const agent = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body
    expect(agent.pendingPermissions).toEqual([])
    const again = runCli(daemon, "permit", agentId, permission)
    expect(again.status).toBe(1)
    expect(again.stderr).toContain(`has no pending permission ${permission}`)

    await stopAndProveClean(daemon, agent.pid)
  }, 60_000)

  it("a prompt that waits holds through the permission; a deny through the API ends it with the agent's refusal", async () => {
    const { daemon, agentId, cwd } = await acpDaemon()
    const waited = prompt(daemon, agentId, { text: "permission", wait: true })
    const permission = await pendingPermission(daemon, agentId)
    const denied = await api(daemon, "POST", `/v1/agents/${agentId}/permissions/${permission}`, { allow: false })
    expect(denied.status, JSON.stringify(denied.body)).toBe(204)
    const outcome = await waited
    expect(outcome.status).toBe(200)
    expect(outcome.body).toMatchObject({ state: "completed", output: "refused (reject-once)", error: null })
    expect(existsSync(join(cwd, "notes.txt"))).toBe(false)
    const agent = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body
    expect(agent.pendingPermissions).toEqual([])
    // Answered, the runtime is releasable again.
    expect((await api(daemon, "POST", `/v1/runtimes/${agentId}/collect`)).body.outcome).toBe("collected")
    await until(() => !groupAlive(agent.pid), "the released runtime's process group is gone")

    await stopAndProveClean(daemon, agent.pid)
  }, 60_000)
})
