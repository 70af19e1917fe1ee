/**
 * The warm reserve (H4) with real daemons and real shell plugin processes: processes started
 * before any agent, bound by the next create or resume (in the agent's cwd, under their own
 * marker), refilled, resized live through the API and a configuration reload, ended by a restart
 * after a SIGKILL, and released by the daemon's retirement.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { markerOf } from "../support/runtimeMarker.ts"
import {
  api,
  cleanUpDaemons,
  type Daemon,
  exited,
  freePort,
  groupAlive,
  groupRuns,
  newHome,
  prompt,
  ready,
  runCli,
  startDaemon,
  until
} from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

interface ReserveRow {
  readonly provider: string
  readonly target: number
  readonly ready: ReadonlyArray<{ readonly pid: number; readonly rssBytes: number | null }>
  readonly starting: number
  readonly lastFailure: string | null
  readonly retryAt: number | null
}

const writeConfig = (home: string, config: unknown) => writeFileSync(join(home, "config.json"), JSON.stringify(config))

const reserves = async (daemon: Daemon): Promise<ReadonlyArray<ReserveRow>> => (await api(daemon, "GET", "/v1/warm-reserve")).body

const shellReserve = async (daemon: Daemon) => (await reserves(daemon)).find((row) => row.provider === "shell")

/** Waits until the shell reserve has `count` ready processes and none starting; their pids. */
const readyPids = async (daemon: Daemon, count: number) => {
  await until(async () => {
    const row = await shellReserve(daemon)
    return (row?.ready.length ?? 0) === count && row?.starting === 0
  }, `${count} warm shell processes are ready`)
  return (await shellReserve(daemon))?.ready.map((process) => process.pid) ?? []
}

const runtimePid = async (daemon: Daemon, agentId: string): Promise<number> =>
  (await api(daemon, "GET", `/v1/runtimes/${agentId}`)).body.pid

const reply = async (daemon: Daemon, agentId: string, text: string): Promise<string> => {
  const answer = await prompt(daemon, agentId, { text, wait: true })
  if (answer.status !== 200) throw new Error(`prompt answered ${answer.status}: ${JSON.stringify(answer.body)}`)
  return String(answer.body.output).trim()
}

describe("warm reserve (H4)", () => {
  it("binds a new agent and a resume to warm processes in the agent's cwd, refills, and lists them as warm", async () => {
    const home = newHome()
    writeConfig(home, { providers: { shell: { kind: "shell", warmReserve: 2 } } })
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const warm = await readyPids(daemon, 2)
    for (const pid of warm) expect(groupAlive(pid)).toBe(true)

    const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: home })
    expect(created.status).toBe(201)
    const agentId: string = created.body.agentId
    const bound = await runtimePid(daemon, agentId)
    // The oldest warm process took the session: it runs in the agent's cwd, under its own marker.
    expect(bound).toBe(warm[0])
    const marker = markerOf(bound)
    expect(await reply(daemon, agentId, "pwd; echo $QUIESCE_RUNTIME")).toBe(`${home}\n${marker}`)
    const refilled = await readyPids(daemon, 2)
    expect(refilled).toContain(warm[1])
    expect(refilled).not.toContain(bound)

    // Released, then resumed by the next prompt: again on a warm process, with the same conversation.
    expect((await api(daemon, "POST", `/v1/agents/${agentId}/close`)).status).toBe(200)
    await until(() => !groupAlive(bound), "the released runtime's group is gone")
    expect(await reply(daemon, agentId, "echo resumed")).toBe("resumed")
    expect(await runtimePid(daemon, agentId)).toBe(warm[1])

    const listed = runCli(daemon, "runtimes")
    expect(listed.status).toBe(0)
    const warmRows = listed.stdout.split("\n").filter((line) => /^-\s+shell\s+\d+\s+.*\bwarm\b/.test(line))
    expect(warmRows).toHaveLength(2)
    // The agent's runtime and both warm processes are measured and summed.
    expect(listed.stdout).toMatch(/total \d+\.\d MiB in 3 measured processes/)

    const all = [...warm, ...await readyPids(daemon, 2)]
    daemon.process.kill("SIGTERM")
    expect(await exited(daemon.process)).toBe(0)
    for (const pid of all) expect(groupAlive(pid)).toBe(false)
  }, 60_000)

  it("resizes live through the API and a configuration reload, refuses what it cannot keep, and backs off a broken command", async () => {
    const home = newHome()
    writeConfig(home, {
      providers: {
        shell: { kind: "shell", warmReserve: 1 },
        broken: { kind: "plugin", command: "/bin/false", warmReserve: 1 },
        pi: { kind: "pi", command: "/bin/true" }
      }
    })
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const [first] = await readyPids(daemon, 1)

    const grown = await api(daemon, "PUT", "/v1/warm-reserve/shell", { target: 3 })
    expect(grown.status).toBe(200)
    const three = await readyPids(daemon, 3)
    expect(three).toContain(first)
    const shrunk = await api(daemon, "PUT", "/v1/warm-reserve/shell", { target: 0 })
    expect(shrunk.status).toBe(200)
    await until(() => three.every((pid) => !groupAlive(pid)), "a reserve resized to 0 closes its processes")

    expect((await api(daemon, "PUT", "/v1/warm-reserve/shell", { target: 65 })).status).toBe(400)
    const unsupported = await api(daemon, "PUT", "/v1/warm-reserve/pi", { target: 1 })
    expect(unsupported.status).toBe(422)
    expect(unsupported.body.message).toContain("its process takes its session when it starts")
    expect((await api(daemon, "PUT", "/v1/warm-reserve/nope", { target: 1 })).status).toBe(422)

    // A command that exits at once: the failure is shown, and starts are spaced out, not a storm.
    await until(async () => (await reserves(daemon)).find((row) => row.provider === "broken")?.lastFailure !== null, "the broken plugin's failure is shown")
    const broken = (await reserves(daemon)).find((row) => row.provider === "broken")
    expect(broken?.ready).toHaveLength(0)
    expect(broken?.lastFailure).toMatch(/exited|exit/)
    // The log shows the waits growing rather than a start per failure.
    await until(() => (daemon.output().match(/A warm broken process failed/g) ?? []).length >= 3, "three back-offs")
    const waits = [...daemon.output().matchAll(/A warm broken process failed; the next start waits (\d+)s/g)].map((match) => Number(match[1]))
    expect(waits.slice(0, 3)).toEqual([1, 2, 4])

    writeConfig(home, {
      agents: { idlePeriod: "5m" },
      providers: {
        shell: { kind: "shell", warmReserve: 2 },
        broken: { kind: "plugin", command: "/bin/false" },
        pi: { kind: "pi", command: "/bin/true" }
      }
    })
    const reloaded = runCli(daemon, "config", "reload")
    expect(reloaded.stdout).toContain("warm reserves: shell 2, broken 0")
    expect(reloaded.stdout).toContain("agents.idlePeriod")
    await readyPids(daemon, 2)
    expect((await reserves(daemon)).map((row) => row.provider)).toEqual(["shell"])

    // An invalid file changes nothing.
    writeFileSync(join(home, "config.json"), "{ not json")
    const refused = await api(daemon, "POST", "/v1/config/reload")
    expect(refused.status).toBe(422)
    expect(refused.body.message).toContain("config.json")
    expect((await shellReserve(daemon))?.target).toBe(2)
  }, 60_000)

  it("a daemon started after a SIGKILLed one ends the warm processes it left, and the runtime bound to one", async () => {
    const home = newHome()
    writeConfig(home, { providers: { shell: { kind: "shell", warmReserve: 2 } } })
    const port = await freePort()
    const first = startDaemon(home, port)
    await ready(first)
    await readyPids(first, 2)
    const agentId: string = (await api(first, "POST", "/v1/agents", { provider: "shell", cwd: home })).body.agentId
    const bound = await runtimePid(first, agentId)
    const warm = await readyPids(first, 2)
    // The daemon alone: its runtimes and warm processes run in groups of their own and outlive it.
    process.kill(first.process.pid!, "SIGKILL")
    await exited(first.process)
    for (const pid of [bound, ...warm]) expect(groupAlive(pid)).toBe(true)

    // The new daemon keeps a reserve too: it fills only after the old processes were ended.
    const second = startDaemon(home, port)
    await ready(second)
    // Orphans now: ended, they may wait as zombies for the process that inherited them to reap them.
    for (const pid of [bound, ...warm]) expect(groupRuns(pid)).toBe(false)
    // One ledger entry per process: the bound one moved from the reserve to its agent.
    expect(second.output()).toMatch(/Ended what the previous daemon's runtimes left.*"runtimes":3\b/)
    const fresh = await readyPids(second, 2)
    for (const pid of fresh) expect(groupAlive(pid)).toBe(true)
    expect(await reply(second, agentId, "echo back")).toBe("back")
    expect(fresh).toContain(await runtimePid(second, agentId))
  }, 60_000)

  it("the daemon's retirement releases its warm processes", async () => {
    const home = newHome()
    writeConfig(home, { providers: { shell: { kind: "shell", warmReserve: 1 } } })
    const daemon = startDaemon(home, await freePort(), ["--daemon-idle-timeout", "3s"])
    await ready(daemon)
    const [pid] = await readyPids(daemon, 1)
    expect(await exited(daemon.process)).toBe(75)
    expect(groupAlive(pid!)).toBe(false)
  }, 60_000)
})
