/**
 * Honest states and totals, as a user sees them from a real daemon: a provider's veto shows as
 * what keeps a runtime (and the daemon) resident as soon as the turn that started the job ends,
 * with since when it holds; `explain` of an unknown agent is a typed not-found and of a released
 * one a real explanation; memory resident against released, per provider and label, survives a
 * restart. Time is real, so every wait polls with a bound.
 */
import { afterEach, describe, expect, it } from "vitest"
import { api, cleanUpDaemons, freePort, newHome, prompt, ready, runCli, startDaemon, until } from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

/** A shell agent with these labels, made through the API; its id. */
const createAgent = async (daemon: Parameters<typeof api>[0], labels: Record<string, string> = {}): Promise<string> => {
  const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: daemon.home, labels })
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${JSON.stringify(created.body)}`)
  return created.body.agentId
}

describe("honest states", () => {
  it("a background job's veto shows within a couple of seconds of the turn's end, long before a sweep, everywhere with since when", async () => {
    // The default sweep interval is a minute: only the probe after the turn can show the veto this soon.
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createAgent(daemon)
    const reason = "background job 1 `sleep 300`"
    expect((await prompt(daemon, agentId, { text: "sleep 300 &", wait: true })).status).toBe(200)
    const endedAt = Date.now()

    let row: { state: string; lastProbe: { outcome: string; message: string; since: string } | null } | undefined
    await until(async () => {
      row = (await api(daemon, "GET", `/v1/runtimes/${agentId}`)).body
      return row?.state === "vetoed"
    }, "the runtime reads vetoed", 3_000)
    expect(Date.now() - endedAt).toBeLessThan(3_000)
    expect(row?.lastProbe).toMatchObject({ outcome: "vetoed", message: reason })
    expect(Date.parse(row?.lastProbe?.since ?? "")).toBeGreaterThanOrEqual(endedAt - 1_000)

    // The daemon's status names the veto as what keeps it resident, with its reason and since when.
    const status = await api(daemon, "GET", "/v1/daemon")
    expect(status.body.blockers).toContainEqual({ category: "veto", agentId, detail: reason, since: row?.lastProbe?.since })
    const shown = runCli(daemon, "status")
    expect(shown.status, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(new RegExp(`^blockers +veto \\(${agentId}: background job 1 \`sleep 300\`, since (just now|\\d+s ago)\\)$`, "m"))
    const table = runCli(daemon, "runtimes")
    expect(table.stdout).toContain(`vetoed by its provider: ${reason}, vetoed since `)
    const explained = runCli(daemon, "explain", agentId)
    expect(explained.stdout).toMatch(/^why +vetoed by its provider: background job 1 `sleep 300`; vetoed since (just now|\d+s ago)$/m)
    // And retirement, asked, names the same veto.
    const retire = runCli(daemon, "retire")
    expect(retire.status).toBe(1)
    expect(retire.stderr).toContain(`veto (${agentId}: ${reason})`)
  }, 30_000)

  it("explain: an unknown agent is a typed not-found in one line; a released one says when, why and what a prompt resumes", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)

    const unknown = runCli(daemon, "explain", "agent-nope")
    expect(unknown.status).toBe(1)
    expect(unknown.stdout).toBe("")
    expect(unknown.stderr.trim().split("\n")).toEqual([
      "quiesce: No agent agent-nope in this home: nothing to explain (quiesce agents list shows its agents)"
    ])
    const notFound = await api(daemon, "GET", "/v1/runtimes/agent-nope")
    expect(notFound.status).toBe(404)
    expect(notFound.contentType).toBe("application/problem+json")
    expect(notFound.body).toMatchObject({ _tag: "AgentNotFound", agentId: "agent-nope", status: 404 })

    const agentId = await createAgent(daemon)
    expect((await prompt(daemon, agentId, { text: "echo hi", wait: true })).status).toBe(200)
    const sessionId: string = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.sessionId
    const collected = await api(daemon, "POST", `/v1/runtimes/${agentId}/collect`)
    expect(collected.body.outcome).toBe("collected")

    const explained = runCli(daemon, "explain", agentId)
    expect(explained.status, explained.stderr).toBe(0)
    expect(explained.stdout).toMatch(/^state +released \S+ \((just now|\d+s ago)\)$/m)
    expect(explained.stdout).toMatch(/^why +collected on request \(quiesce collect\)$/m)
    expect(explained.stdout).toMatch(/^gave back +\d+\.\d MiB$/m)
    expect(explained.stdout).toContain(`resumes     shell session ${sessionId} on its next prompt`)
    // agents show says the same when and why.
    const shown = runCli(daemon, "agents", "show", agentId)
    expect(shown.stdout).toMatch(/^released +\S+ \((just now|\d+s ago)\): collected on request \(quiesce collect\)$/m)
    const json = JSON.parse(runCli(daemon, "explain", agentId, "--json").stdout)
    expect(json).toMatchObject({ agentId, resident: false, sessionId, release: { reason: "collect" } })
    expect(json.release.rssBytes).toBeGreaterThan(1024 * 1024)
    // The runtime endpoint itself still says there is no live runtime.
    expect((await api(daemon, "GET", `/v1/runtimes/${agentId}`)).body).toMatchObject({ _tag: "RuntimeNotFound", agentId })
  }, 30_000)
})

describe("memory totals", () => {
  it("resident against released, per provider and label, in the status API and quiesce status; released survives a restart", async () => {
    const home = newHome()
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const web = await createAgent(daemon, { team: "web" })
    const api1 = await createAgent(daemon, { team: "api" })
    for (const agentId of [web, api1]) expect((await prompt(daemon, agentId, { text: "true", wait: true })).status).toBe(200)
    expect((await api(daemon, "POST", `/v1/runtimes/${web}/collect`)).body.outcome).toBe("collected")

    const totals = (await api(daemon, "GET", "/v1/daemon")).body.memoryTotals
    expect(totals).toMatchObject({ residentRuntimes: 1, unmeasuredResident: 0, releasedAgents: 1, unmeasuredReleased: 0 })
    expect(totals.residentBytes).toBeGreaterThan(1024 * 1024)
    expect(totals.releasedBytes).toBeGreaterThan(1024 * 1024)
    expect(totals.byProvider).toEqual([{ provider: "shell", ...figures(totals) }])
    const byLabel = Object.fromEntries(totals.byLabel.map((entry: { label: string }) => [entry.label, entry]))
    expect(Object.keys(byLabel)).toEqual(["team=api", "team=web"])
    expect(byLabel["team=api"]).toMatchObject({ residentRuntimes: 1, releasedAgents: 0, residentBytes: totals.residentBytes })
    expect(byLabel["team=web"]).toMatchObject({ residentRuntimes: 0, releasedAgents: 1, releasedBytes: totals.releasedBytes })

    const shown = runCli(daemon, "status")
    expect(shown.stdout).toMatch(/^MEMORY +RESIDENT +RELEASED$/m)
    expect(shown.stdout).toMatch(/^this home +\d+\.\d MiB in 1 runtime +\d+\.\d MiB by 1 agent$/m)
    expect(shown.stdout).toMatch(/^label team=web +0 B in 0 runtimes +\d+\.\d MiB by 1 agent$/m)

    // Stopped and started again: each release's size was kept with its agent.
    expect(runCli(daemon, "stop").status).toBe(0)
    const again = startDaemon(home, await freePort())
    await ready(again)
    const after = (await api(again, "GET", "/v1/daemon")).body.memoryTotals
    expect(after).toMatchObject({ residentRuntimes: 0, releasedAgents: 2, unmeasuredReleased: 0 })
    const webAfter = after.byLabel.find((entry: { label: string }) => entry.label === "team=web")
    expect(webAfter.releasedBytes).toBe(byLabel["team=web"].releasedBytes)
    const released = runCli(again, "explain", api1)
    expect(released.stdout).toMatch(/^why +the daemon stopped$/m)
  }, 60_000)
})

/** The six figures of a totals entry. */
const figures = (entry: Record<string, unknown>) => ({
  residentBytes: entry["residentBytes"],
  residentRuntimes: entry["residentRuntimes"],
  unmeasuredResident: entry["unmeasuredResident"],
  releasedBytes: entry["releasedBytes"],
  releasedAgents: entry["releasedAgents"],
  unmeasuredReleased: entry["unmeasuredReleased"]
})
