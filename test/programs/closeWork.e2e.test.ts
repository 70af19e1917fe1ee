/**
 * An explicit close of a runtime with work, end to end: a real daemon, a real shell runtime holding
 * a background job (`sleep 301 &`, which its provider vetoes on), and the job's process in /proc.
 * Without force the API and the CLI refuse, naming the veto, and the job runs on; with force the
 * runtime closes, the job is gone, the answer says what ended and daemon.log has a line naming it.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { awaitJobPid, processRuns } from "../support/backgroundJobs.ts"
import { api, cleanUpDaemons, createShellAgent, freePort, newHome, prompt, ready, runCli, startDaemon, until } from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

const job = "sleep 301"

/** A shell agent whose runtime runs `sleep 301` in the background: its id, runtime pid and the job's pid. */
const agentWithJob = async (daemon: ReturnType<typeof startDaemon>) => {
  const agentId = await createShellAgent(daemon)
  expect((await prompt(daemon, agentId, { text: `${job} &`, wait: true })).body).toMatchObject({ state: "completed" })
  const pid: number = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pid
  const jobPid = await awaitJobPid(pid, job)
  return { agentId, jobPid }
}

const daemonLog = (home: string) => readFileSync(join(home, "daemon.log"), "utf8")

describe("closing a runtime with work", () => {
  it("over the API: refused (409, the veto named) and the job runs on; with force=true closed, the job gone, logged", async () => {
    // The default sweep interval (1 min): the close asks the provider itself, not a sweep's old answer.
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const { agentId, jobPid } = await agentWithJob(daemon)

    const refused = await api(daemon, "POST", `/v1/agents/${agentId}/close`)
    expect(refused.status).toBe(409)
    expect(refused.contentType).toBe("application/problem+json")
    expect(refused.body).toMatchObject({
      _tag: "RuntimeCloseRefused",
      status: 409,
      agentId,
      blockers: [],
      veto: { agentId, outcome: "vetoed", message: expect.stringContaining(job) }
    })
    expect(refused.body.detail).toContain(job)
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).body.resident).toBe(true)
    expect(processRuns(jobPid)).toBe(true)
    // The same refusal as what explain shows.
    expect((await api(daemon, "GET", `/v1/runtimes/${agentId}`)).body.lastProbe).toMatchObject({ outcome: "vetoed" })

    const forced = await api(daemon, "POST", `/v1/agents/${agentId}/close?force=true`)
    expect(forced.status).toBe(200)
    expect(forced.body).toMatchObject({ agentId, ended: { blockers: [], veto: { outcome: "vetoed", message: expect.stringContaining(job) } } })
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).body.resident).toBe(false)
    await until(() => !processRuns(jobPid), "the background job is gone")
    await until(() => daemonLog(daemon.home).includes(`Closed agent ${agentId} by force, ending: vetoed by its provider:`), "daemon.log names the forced close")
    expect(daemonLog(daemon.home)).toMatch(new RegExp(`Closed agent ${agentId} by force, ending: vetoed by its provider: [^\\n]*${job}`))
  }, 60_000)

  it("with the CLI: refused naming the veto, exit 1, the job runs on; with --force it names what it ended", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const { agentId, jobPid } = await agentWithJob(daemon)

    const refused = runCli(daemon, "agents", "close", agentId)
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain(`quiesce: ${agentId} was not closed: it has work a close would end: vetoed by its provider: `)
    expect(refused.stderr).toContain(job)
    expect(refused.stderr).toContain(`quiesce agents close ${agentId} --force`)
    expect(processRuns(jobPid)).toBe(true)
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).body.resident).toBe(true)

    const forced = runCli(daemon, "agents", "close", agentId, "--force")
    expect(forced.status, forced.stderr).toBe(0)
    expect(forced.stdout).toContain(`closed ${agentId} by force, ending: vetoed by its provider: `)
    expect(forced.stdout).toContain(job)
    await until(() => !processRuns(jobPid), "the background job is gone")
    expect(daemonLog(daemon.home)).toContain(`Closed agent ${agentId} by force`)

    // A runtime with nothing to lose closes as before, without --force.
    const quiet = await createShellAgent(daemon)
    expect((await prompt(daemon, quiet, { text: "echo hi", wait: true })).body).toMatchObject({ state: "completed" })
    const closed = runCli(daemon, "agents", "close", quiet)
    expect(closed.status, closed.stderr).toBe(0)
    expect(closed.stdout).toBe(`closed ${quiet}: its runtime is released; the next prompt resumes its session\n`)
  }, 60_000)
})

describe("deleting an agent whose runtime has work", () => {
  it("over the API: refused (409, the veto named) and the job runs on; with force=true deleted, the job gone, logged", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const { agentId, jobPid } = await agentWithJob(daemon)

    const refused = await api(daemon, "DELETE", `/v1/agents/${agentId}`)
    expect(refused.status).toBe(409)
    expect(refused.contentType).toBe("application/problem+json")
    expect(refused.body).toMatchObject({
      _tag: "AgentDeleteRefused",
      status: 409,
      agentId,
      blockers: [],
      veto: { agentId, outcome: "vetoed", message: expect.stringContaining(job) }
    })
    expect(refused.body.detail).toContain(job)
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).body.resident).toBe(true)
    expect(processRuns(jobPid)).toBe(true)
    expect((await api(daemon, "DELETE", `/v1/agents/${agentId}?force=yes`)).status).toBe(400)
    expect(processRuns(jobPid)).toBe(true)

    const forced = await api(daemon, "DELETE", `/v1/agents/${agentId}?force=true`)
    expect(forced.status).toBe(200)
    expect(forced.body).toMatchObject({ agentId, ended: { blockers: [], veto: { outcome: "vetoed", message: expect.stringContaining(job) } } })
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).status).toBe(404)
    await until(() => !processRuns(jobPid), "the background job is gone")
    await until(() => daemonLog(daemon.home).includes(`Deleted agent ${agentId} by force, ending: vetoed by its provider:`), "daemon.log names the forced delete")
    expect(daemonLog(daemon.home)).toMatch(new RegExp(`Deleted agent ${agentId} by force, ending: vetoed by its provider: [^\\n]*${job}`))
  }, 60_000)

  it("with the CLI: refused naming the veto, exit 1, the job runs on; with --force it names what it ended", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const { agentId, jobPid } = await agentWithJob(daemon)

    const refused = runCli(daemon, "agents", "delete", agentId)
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain(`quiesce: ${agentId} was not deleted: its runtime has work a delete would end: vetoed by its provider: `)
    expect(refused.stderr).toContain(job)
    expect(refused.stderr).toContain(`quiesce agents delete ${agentId} --force`)
    expect(processRuns(jobPid)).toBe(true)
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).body.resident).toBe(true)

    const forced = runCli(daemon, "agents", "delete", agentId, "--force")
    expect(forced.status, forced.stderr).toBe(0)
    expect(forced.stdout).toContain(`deleted ${agentId} by force, ending: vetoed by its provider: `)
    expect(forced.stdout).toContain(job)
    await until(() => !processRuns(jobPid), "the background job is gone")
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).status).toBe(404)
    await until(() => daemonLog(daemon.home).includes(`Deleted agent ${agentId} by force`), "daemon.log names the forced delete")

    // An agent with nothing to lose is deleted as before, without --force.
    const quiet = await createShellAgent(daemon)
    expect((await prompt(daemon, quiet, { text: "echo hi", wait: true })).body).toMatchObject({ state: "completed" })
    const deleted = runCli(daemon, "agents", "delete", quiet)
    expect(deleted.status, deleted.stderr).toBe(0)
    expect(deleted.stdout).toBe(`deleted ${quiet}: its runtime ended, its record and turns are gone\n`)
  }, 60_000)
})
