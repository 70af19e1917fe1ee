/**
 * Actions by label (issue 31), end to end with a real daemon (and a real hub): `quiesce collect
 * --label` releases every agent with the labels that loses nothing and says why each other one is
 * kept; `quiesce agents close --label` closes by the rule of a single close (work is named and
 * kept unless --force, and a forced close names what it ended, in the output and in daemon.log).
 * Labels repeat as AND; no match is a clear error that touches nothing.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { awaitJobPid, processRuns } from "../support/backgroundJobs.ts"
import { api, cleanUpDaemons, freePort, newHome, prompt, ready, runCli, startDaemon, until } from "../support/daemonProcess.ts"
import { cleanUpHubs, newHubRoot, runHubCli, startHub, writeHubConfig } from "../support/hubProcess.ts"

afterEach(cleanUpDaemons)
afterEach(cleanUpHubs)

const job = "sleep 301"

describe("collect and close by label", () => {
  it("collect --label releases what loses nothing and names the rest; close --label refuses work unless --force", async () => {
    // The default sweep interval (1 min) and idle period: nothing is released but by these commands.
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const create = async (...labels: Array<string>) => {
      const created = runCli(daemon, "agents", "create", "--cwd", daemon.home, ...labels.flatMap((label) => ["--label", label]), "--json")
      expect(created.status, created.stderr).toBe(0)
      const agentId: string = JSON.parse(created.stdout).agentId
      expect((await prompt(daemon, agentId, { text: "echo hi", wait: true })).body).toMatchObject({ state: "completed" })
      return agentId
    }
    const busy = await create("team=web")
    expect((await prompt(daemon, busy, { text: `${job} &`, wait: true })).body).toMatchObject({ state: "completed" })
    const jobPid = await awaitJobPid((await api(daemon, "GET", `/v1/agents/${busy}`)).body.pid, job)
    const tiered = await create("team=web", "tier=1")
    const idle = await create("team=web")
    const other = await create("team=ops")
    // Read with the CLI, as a person would (a new connection each time).
    const residents = async () => {
      const listed: ReadonlyArray<{ readonly agentId: string; readonly resident: boolean }> = JSON.parse(
        runCli(daemon, "agents", "list", "--json").stdout
      )
      return [busy, tiered, idle, other].map((id) => listed.find((agent) => agent.agentId === id)?.resident)
    }
    expect(await residents()).toEqual([true, true, true, true])

    // No agent with the label: a clear error, and nothing is touched.
    for (const command of [["collect"], ["agents", "close"], ["agents", "close", "--force"]]) {
      const none = runCli(daemon, ...command, "--label", "team=nobody")
      expect(none.status).toBe(1)
      expect(none.stdout).toBe("")
      expect(none.stderr.trim()).toBe("quiesce: No agent has the label team=nobody (see quiesce agents list): nothing was done")
    }
    // An agent and a label at once, or neither, is a mistake.
    expect(runCli(daemon, "collect", busy, "--label", "team=web").stderr.trim()).toBe("quiesce: quiesce collect takes an agent or --label, not both")
    expect(runCli(daemon, "agents", "close").stderr.trim()).toBe(
      "quiesce: quiesce agents close needs an agent, or --label key=value for every agent with that label"
    )
    expect(await residents()).toEqual([true, true, true, true])

    // Labels repeat as AND: only the agent with both.
    const both = runCli(daemon, "collect", "--label", "team=web", "--label", "tier=1")
    expect(both.status, both.stderr).toBe(0)
    expect(both.stdout.split("\n")[1]).toMatch(new RegExp(`^${tiered} +released$`))
    expect(both.stdout).toContain("released 1 of 1 agent with team=web and tier=1")
    expect(await residents()).toEqual([true, false, true, true])

    // Every agent with team=web: the idle one released, the busy one kept and why, the released one said so.
    const collected = runCli(daemon, "collect", "--label", "team=web")
    expect(collected.status).toBe(1)
    const rows = collected.stdout.trimEnd().split("\n")
    expect(rows[0]).toMatch(/^AGENT +RESULT$/)
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^${busy} +kept: vetoed by its provider: background job 1 \`${job}\`$`)))
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^${tiered} +released already$`)))
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^${idle} +released$`)))
    expect(rows.some((row) => row.includes(other))).toBe(false)
    expect(collected.stderr.trim()).toBe(
      "quiesce: 1 of 3 agents with team=web was kept: releasing it now would lose work (named above); " +
        "quiesce agents close --label team=web --force ends it"
    )
    expect(await residents()).toEqual([true, false, false, true])
    expect(processRuns(jobPid)).toBe(true)

    // The same as JSON, for machines: one entry per agent.
    const json = runCli(daemon, "collect", "--label", "team=web", "--json")
    expect(json.status).toBe(1)
    expect(JSON.parse(json.stdout)).toEqual(expect.arrayContaining([
      expect.objectContaining({ agentId: busy, outcome: "retained", lastProbe: expect.objectContaining({ outcome: "vetoed" }) }),
      { agentId: idle, outcome: "not-resident" }
    ]))

    // Collecting one that is released already: what was asked holds, said so (exit 0); an unknown agent is not found.
    const again = runCli(daemon, "collect", idle)
    expect(again.status, again.stderr).toBe(0)
    expect(again.stdout.trim()).toBe(`${idle} is released already: its next prompt resumes its session`)
    expect(JSON.parse(runCli(daemon, "collect", idle, "--json").stdout)).toEqual({ agentId: idle, outcome: "not-resident" })
    const unknown = runCli(daemon, "collect", "agent-nope")
    expect(unknown.status).toBe(1)
    expect(unknown.stderr).toContain("agent-nope")

    // Close by label: the one with work is kept, naming it, and the command line that would end it.
    const resumed = runCli(daemon, "prompt", idle, "echo back", "--wait")
    expect(resumed.status, resumed.stderr).toBe(0)
    expect(resumed.stdout).toBe("back\n")
    const refused = runCli(daemon, "agents", "close", "--label", "team=web")
    expect(refused.status).toBe(1)
    const closeRows = refused.stdout.trimEnd().split("\n")
    expect(closeRows).toContainEqual(expect.stringMatching(new RegExp(`^${busy} +kept: it has work a close would end: vetoed by its provider: .*${job}`)))
    expect(closeRows).toContainEqual(expect.stringMatching(new RegExp(`^${idle} +closed$`)))
    expect(closeRows).toContainEqual(expect.stringMatching(new RegExp(`^${tiered} +released already \\(no runtime to close\\)$`)))
    expect(refused.stderr.trim()).toBe(
      "quiesce: 1 of 3 agents with team=web was not closed: it has work a close would end (named above). " +
        "To end it: quiesce agents close --label team=web --force"
    )
    expect(await residents()).toEqual([true, false, false, true])
    expect(processRuns(jobPid)).toBe(true)

    // --force ends it, says what it ended, and the daemon logs it as it logs a single forced close.
    const forced = runCli(daemon, "agents", "close", "--label", "team=web", "--force")
    expect(forced.status, forced.stderr).toBe(0)
    expect(forced.stdout).toMatch(new RegExp(`^${busy} +closed by force, ending: vetoed by its provider: .*${job}`, "m"))
    expect(forced.stdout).toContain("closed 1 of 3 agents with team=web; the next prompt to each resumes its session")
    await until(() => !processRuns(jobPid), "the background job is gone")
    expect(readFileSync(join(daemon.home, "daemon.log"), "utf8")).toContain(`Closed agent ${busy} by force, ending: vetoed by its provider:`)
    // The agent without the label was never touched.
    expect(await residents()).toEqual([false, false, false, true])
  }, 120_000)

  it("through the hub: --hub NAME collect --label and agents close --label act on that home's agents", async () => {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    writeHubConfig(hubHome, [{ name: "work", dir: join(root, "work") }])
    await startHub(hubHome)
    const cli = (...args: Array<string>) => runHubCli(hubHome, "--hub", "work", ...args)
    const ids = ["team=web", "team=web"].map((label) => {
      const created = cli("agents", "create", "--cwd", root, "--label", label, "--json")
      expect(created.status, created.stderr).toBe(0)
      const agentId: string = JSON.parse(created.stdout).agentId
      return agentId
    })
    for (const id of ids) expect(cli("prompt", id, "echo hi", "--wait").status).toBe(0)

    expect(cli("collect", "--label", "team=ops").stderr.trim()).toBe(
      "quiesce: No agent has the label team=ops (see quiesce agents list): nothing was done"
    )
    const collected = cli("collect", "--label", "team=web")
    expect(collected.status, collected.stderr).toBe(0)
    expect(collected.stdout).toContain("released 2 of 2 agents with team=web")

    expect(cli("prompt", ids[0]!, "echo again", "--wait").status).toBe(0)
    const closed = cli("agents", "close", "--label", "team=web")
    expect(closed.status, closed.stderr).toBe(0)
    expect(closed.stdout).toMatch(new RegExp(`^${ids[0]} +closed$`, "m"))
    expect(closed.stdout).toMatch(new RegExp(`^${ids[1]} +released already \\(no runtime to close\\)$`, "m"))
    const listed = JSON.parse(cli("agents", "list", "--json").stdout)
    expect(listed.map((agent: { readonly resident: boolean }) => agent.resident)).toEqual([false, false])
  }, 120_000)
})
