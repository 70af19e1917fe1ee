/**
 * A cluster (X6) as a user runs it: daemon processes configured as runners of one cluster on a
 * real PostgreSQL server the suite starts, each with its own home, reached over their HTTP APIs.
 * They share where the shell provider keeps its sessions (one machine). Time is real: every wait
 * polls with a bound.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { readStat } from "../../src/platform/procfs.ts"
import {
  api,
  cleanUpDaemons,
  type Daemon,
  exited,
  freePort,
  groupRuns,
  newHome,
  prompt,
  ready,
  startDaemon,
  until
} from "../support/daemonProcess.ts"
import { killAndPrompt } from "../support/clusterFailover.ts"
import { usePostgres } from "../support/usePostgres.ts"
import { endedTurn, followEvents } from "../support/eventReader.ts"

const postgres = usePostgres()
afterEach(cleanUpDaemons)

const pluginHome = mkdtempSync(join(tmpdir(), "quiesce-cluster-sessions-"))
afterAll(() => rmSync(pluginHome, { recursive: true, force: true }))

interface Runner {
  readonly daemon: Daemon
  readonly home: string
  /** Its `cluster.runner` address, as `host:port`. */
  readonly address: string
}

/** Short shard locks, so that a runner that stops hanging (not dying) does not hold a test up. */
const shortLocks = { shardLockExpiration: "5s", shardLockRefreshInterval: "1s" }

const startRunner = async (
  url: string,
  home = newHome(),
  groups?: { readonly group: string; readonly groups: ReadonlyArray<string> },
  locks: { readonly shardLockExpiration?: string; readonly shardLockRefreshInterval?: string } = shortLocks
): Promise<Runner> => {
  const runnerPort = await freePort()
  writeFileSync(join(home, "config.json"), JSON.stringify({
    cluster: {
      storage: { kind: "postgres", url },
      runner: { host: "127.0.0.1", port: runnerPort },
      shardsPerGroup: 12,
      ...locks,
      pluginHome,
      ...groups
    }
  }))
  const daemon = startDaemon(home, await freePort())
  await ready(daemon)
  return { daemon, home, address: `127.0.0.1:${runnerPort}` }
}

const createAgent = async (runner: Runner, cwd: string): Promise<string> => {
  const created = await api(runner.daemon, "POST", "/v1/agents", { provider: "shell", cwd })
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${JSON.stringify(created.body)}`)
  return created.body.agentId
}

const ask = async (runner: Runner, agentId: string, text: string, clientMessageId?: string) => {
  const answer = await prompt(runner.daemon, agentId, { text, wait: true, ...(clientMessageId === undefined ? {} : { clientMessageId }) })
  if (answer.status !== 200) throw new Error(`prompt answered ${answer.status}: ${JSON.stringify(answer.body)}`)
  return answer.body
}

/** The runner whose process is the parent of the agent's runtime, asked through `via`. */
const hostOf = async (runners: ReadonlyArray<Runner>, via: Runner, agentId: string): Promise<Runner | undefined> => {
  const view = await api(via.daemon, "GET", `/v1/agents/${agentId}`)
  if (view.status !== 200 || view.body.pid === null) return undefined
  const parent = readStat(view.body.pid)?.ppid
  return runners.find((runner) => runner.daemon.process.pid === parent)
}

/** Creates agents, at least `atLeast`, until they are hosted by every runner; their ids. */
const spreadAgents = async (runners: ReadonlyArray<Runner>, cwd: string, atLeast = 0): Promise<ReadonlyArray<string>> => {
  const agents: Array<string> = []
  await until(async () => {
    agents.push(await createAgent(runners[agents.length % runners.length]!, cwd))
    const hosts = await Promise.all(agents.map((agentId) => hostOf(runners, runners[0]!, agentId)))
    return agents.length >= atLeast && runners.every((runner) => hosts.includes(runner))
  }, `agents are hosted by all ${runners.length} runners`, 60_000)
  return agents
}

/** The epoch of an event id (`<epoch>-<n>`): the daemon process that issued it. */
const epochOf = (id: string) => id.slice(0, id.lastIndexOf("-"))

describe("a cluster of daemons on PostgreSQL (X6)", () => {
  it("spreads agents over three runners; a prompt sent to any runner reaches its agent once; a fourth runner takes shards and loses no agent", async () => {
    const url = postgres.database("e2e_spread")
    const runners = [await startRunner(url), await startRunner(url), await startRunner(url)]
    const cwd = newHome()
    const agents = await spreadAgents(runners, cwd)
    // Any runner lists every agent, wherever it was made; `resident` is what that runner hosts.
    for (const runner of runners) {
      const listed = await api(runner.daemon, "GET", "/v1/agents")
      expect(listed.body.map((agent: { agentId: string }) => agent.agentId).sort()).toEqual([...agents].sort())
      for (const agent of listed.body) {
        expect(agent.resident).toBe((await hostOf(runners, runner, agent.agentId)) === runner)
      }
    }
    const sessions = new Map<string, string>()
    for (const [i, agentId] of agents.entries()) {
      const receipt = await ask(runners[(i + 1) % 3]!, agentId, `echo hello-${i}`)
      expect(receipt.output.trim()).toBe(`hello-${i}`)
      sessions.set(agentId, receipt.sessionId)
    }

    // One client id from all three runners at once, seven times each: one turn, run once.
    const target = agents[0]!
    const answers = await Promise.all(Array.from({ length: 21 }, (_, i) =>
      ask(runners[i % 3]!, target, "echo ran >> ran.txt; wc -l < ran.txt", "only-once")
    ))
    expect(new Set(answers.map((answer) => answer.turnId)).size).toBe(1)
    expect(answers.every((answer) => answer.output.trim() === "1")).toBe(true)
    const turns = await api(runners[2]!.daemon, "GET", `/v1/agents/${target}/turns`)
    expect(turns.body.filter((turn: { clientMessageId: string | null }) => turn.clientMessageId === "only-once")).toHaveLength(1)

    // A fourth runner joins and takes shards: a new agent soon lands on it, and every agent
    // (those whose shards moved to it included) still answers in its own session.
    const fourth = await startRunner(url)
    const all = [...runners, fourth]
    await until(async () => {
      const probe = await createAgent(all[0]!, cwd)
      return (await hostOf(all, fourth, probe)) === fourth
    }, "the fourth runner hosts agents", 60_000)
    for (const [i, agentId] of agents.entries()) {
      const receipt = await ask(all[i % 4]!, agentId, `echo again-${i}`)
      expect(receipt.output.trim()).toBe(`again-${i}`)
      expect(receipt.sessionId).toBe(sessions.get(agentId))
    }
  }, 240_000)

  it("a runner SIGKILLed mid-turn: its agents resume on another runner in the same session, the cut prompt's client id is one turn, and a reader elsewhere follows on", async () => {
    const url = postgres.database("e2e_kill")
    const runners = [await startRunner(url), await startRunner(url), await startRunner(url)]
    const cwd = newHome()
    const agents = await spreadAgents(runners, cwd)
    const victim = runners[1]!
    const survivor = runners[0]!
    const hosted: Array<string> = []
    for (const agentId of agents) if ((await hostOf(runners, survivor, agentId)) === victim) hosted.push(agentId)
    const cut = hosted[0]!
    const session = (await ask(survivor, cut, "echo before")).sessionId
    const cutPid: number = (await api(survivor.daemon, "GET", `/v1/agents/${cut}`)).body.pid

    // A long turn through another runner, its events followed there; the agent's runner dies while it runs.
    const reader = followEvents(survivor.daemon, cut)
    await reader.connected()
    const inFlight = prompt(survivor.daemon, cut, { text: "sleep 30; echo finished", wait: true, clientMessageId: "cut-turn" })
    await until(async () => {
      const turns = await api(survivor.daemon, "GET", `/v1/agents/${cut}/turns`)
      return turns.body.some((turn: { clientMessageId: string | null; state: string }) => turn.clientMessageId === "cut-turn" && turn.state === "running")
    }, "the long turn runs")
    await until(() => reader.seen.some((e) => e.event._tag === "turn-running"), "the reader sees the long turn run")
    const deadEpoch = epochOf(reader.seen[0]!.id)
    process.kill(victim.daemon.process.pid!, "SIGKILL")
    await exited(victim.daemon.process)

    // Its shards are taken once its locks expire; the cut turn is recorded interrupted, never run again.
    // The caller still waiting is answered by the agent's new runner: the turn, interrupted.
    const first = await inFlight
    expect(first.status).toBe(200)
    expect(first.body.state).toBe("interrupted")
    expect(first.body.error._tag).toBe("DaemonStopped")
    const again = await ask(survivor, cut, "sleep 30; echo finished", "cut-turn")
    expect(again.state).toBe("interrupted")
    expect(again.turnId).toBe(first.body.turnId)
    const turns = await api(survivor.daemon, "GET", `/v1/agents/${cut}/turns`)
    expect(turns.body.filter((turn: { clientMessageId: string | null }) => turn.clientMessageId === "cut-turn")).toHaveLength(1)

    // Every agent the dead runner hosted answers in its own session, on a runner that serves.
    const after = await ask(runners[2]!, cut, "echo after")
    expect(after.output.trim()).toBe("after")
    expect(after.sessionId).toBe(session)
    expect(after.resumed).toBe(true)
    // The reader did not hang: it follows the agent on its new runner, from a gap (the dead
    // runner's ids mean nothing there).
    await until(() => reader.seen.some((e) => e.event._tag === "output" && e.event.text === "after\n"), "the reader follows the agent to its new runner", 30_000)
    const gap = reader.seen.findIndex((e) => e.event._tag === "gap")
    expect(gap).toBeGreaterThan(0)
    const gapEvent = reader.seen[gap]!.event
    expect(gapEvent._tag === "gap" && epochOf(gapEvent.after)).toBe(deadEpoch)
    expect(reader.seen.slice(gap).every((e) => epochOf(e.id) !== deadEpoch)).toBe(true)
    reader.close()
    for (const agentId of hosted) expect((await ask(survivor, agentId, "echo alive")).output.trim()).toBe("alive")

    // What the dead runner's runtime left is its machine's to end (the plugin may have ended it
    // already, once its daemon's pipe closed); once started again, nothing of it runs.
    const restarted = startDaemon(victim.home, await freePort())
    await ready(restarted)
    await until(() => !groupRuns(cutPid), "nothing of the dead runner's runtime runs")
  }, 240_000)

  it("a runner SIGKILLed with the default shard locks: its agents answer again on the others within 10 s, and every client id runs once", async () => {
    const url = postgres.database("e2e_failover")
    const runners = [await startRunner(url, newHome(), undefined, {}), await startRunner(url, newHome(), undefined, {}), await startRunner(url, newHome(), undefined, {})]
    const cwd = newHome()
    const agents = await spreadAgents(runners, cwd, 9)
    const victim = runners[1]!
    const survivor = runners[0]!
    const hosted: Array<string> = []
    for (const agentId of agents) if ((await hostOf(runners, survivor, agentId)) === victim) hosted.push(agentId)
    for (const agentId of hosted) await ask(survivor, agentId, "echo before")

    const failover = await killAndPrompt(victim.daemon, survivor.daemon, hosted, cwd, "failover")
    // Without the gone-runner check the shards wait for the dead runner's heartbeat to expire (35 s).
    expect(failover.firstAnswerMs).toBeLessThan(10_000)
    failover.answers.forEach((answer, i) => expect(answer.output).toBe(failover.clientIds[i]))
    for (const clientId of failover.clientIds) expect(failover.runs.get(clientId)).toBe(1)
    // The same client ids again, through another runner: the same turns, not run again.
    for (const [i, agentId] of hosted.entries()) {
      const again = await ask(runners[2]!, agentId, "echo never", failover.clientIds[i])
      expect(again.turnId).toBe(failover.answers[i]!.turnId)
    }
    expect(readFileSync(join(cwd, "runs.txt"), "utf8").split("\n").filter((line) => line !== "")).toHaveLength(hosted.length)
    // Every moved agent now runs on a runner that lives.
    for (const agentId of hosted) expect([survivor, runners[2]]).toContain(await hostOf(runners, survivor, agentId))
  }, 240_000)

  it("any runner lists the whole cluster's runtimes, each by its runner; the collector releases an idle agent on its host, and never one with a background job; live events reach a reader on any runner, through a stop", async () => {
    const url = postgres.database("e2e_collect")
    const runners = [await startRunner(url), await startRunner(url)]
    const cwd = newHome()
    const agents = await spreadAgents(runners, cwd)
    const [idle, busy] = agents
    await ask(runners[0]!, idle!, "echo idle")
    await ask(runners[0]!, busy!, "sleep 600 &")
    // Any runner lists the whole cluster's runtimes, each with the runner that hosts it.
    const hostAddresses = new Map<string, string>()
    for (const agentId of [idle!, busy!]) hostAddresses.set(agentId, (await hostOf(runners, runners[0]!, agentId))!.address)
    await until(async () => {
      const listed = await api(runners[1]!.daemon, "GET", "/v1/runtimes?scope=cluster")
      return [idle!, busy!].every((agentId) =>
        listed.body.some((row: { agentId: string; runner: string }) => row.agentId === agentId && row.runner === hostAddresses.get(agentId))
      )
    }, "every runner's runtimes are listed, each by its runner")
    for (const [agentId, expected] of [[idle!, "collected"], [busy!, "retained"]] as const) {
      const host = (await hostOf(runners, runners[0]!, agentId))!
      const outcome = await api(host.daemon, "POST", `/v1/runtimes/${agentId}/collect`)
      expect(outcome.body.outcome).toBe(expected)
    }
    expect((await api(runners[1]!.daemon, "GET", `/v1/agents/${idle}`)).body.resident).toBe(false)
    expect((await api(runners[1]!.daemon, "GET", `/v1/agents/${busy}`)).body.resident).toBe(true)

    // Live events reach the agent wherever it runs: a reader on one runner of an agent hosted by
    // the other sees a turn's output lines as they come, before the turn ends.
    const [staying, leaving] = [runners[0]!, runners[1]!]
    let watched = ""
    await until(async () => {
      watched = await createAgent(staying, cwd)
      return (await hostOf(runners, staying, watched)) === leaving
    }, "an agent is hosted by the runner that will stop", 60_000)
    let elsewhere = ""
    await until(async () => {
      elsewhere = await createAgent(staying, cwd)
      return (await hostOf(runners, staying, elsewhere)) === staying
    }, "an agent is hosted by the runner that stays", 60_000)
    const remote = followEvents(staying.daemon, watched)
    const onHost = followEvents(leaving.daemon, watched)
    const fromLeaving = followEvents(leaving.daemon, elsewhere)
    await Promise.all([remote.connected(), onHost.connected(), fromLeaving.connected()])
    expect([remote.status(), onHost.status(), fromLeaving.status()]).toEqual([200, 200, 200])
    const sent = await prompt(staying.daemon, watched, { text: "for i in 1 2 3; do echo line-$i; sleep 1; done" })
    await until(() => endedTurn(remote.seen, sent.body.turnId) !== undefined, "the turn's end reaches the reader on the other runner", 20_000)
    const outputs = remote.seen.filter((e) => e.event._tag === "output")
    expect(outputs.map((e) => e.event._tag === "output" ? e.event.text : "").join("")).toBe("line-1\nline-2\nline-3\n")
    expect(endedTurn(remote.seen, sent.body.turnId)!.at - outputs[0]!.at).toBeGreaterThan(1_500)
    const oldEpoch = epochOf(remote.seen[0]!.id)
    const readBeforeStop = remote.seen.length

    // A runner that stops takes its rows with it; a reader never holds its stop up, and the
    // readers on it (of the agent it hosts, and of one the other runner hosts) see their streams end.
    const stopping = Date.now()
    leaving.daemon.process.kill("SIGTERM")
    expect(await exited(leaving.daemon.process)).toBe(0)
    expect(Date.now() - stopping).toBeLessThan(10_000)
    await until(() => onHost.ended() && fromLeaving.ended(), "the streams of the stopped runner's readers end", 5_000)
    // The reader on the other runner follows the agent to its new host: a gap (the old host's ids
    // mean nothing there), then the new host's events.
    expect((await ask(staying, watched, "echo moved")).output.trim()).toBe("moved")
    await until(() => remote.seen.some((e) => e.event._tag === "output" && e.event.text === "moved\n"), "the reader follows the agent to its new host", 30_000)
    const moved = remote.seen.slice(readBeforeStop)
    const gap = moved.findIndex((e) => e.event._tag === "gap")
    expect(gap).toBeGreaterThanOrEqual(0)
    expect(moved.slice(0, gap).every((e) => epochOf(e.id) === oldEpoch)).toBe(true)
    const gapEvent = moved[gap]!.event
    expect(gapEvent._tag === "gap" && epochOf(gapEvent.after)).toBe(oldEpoch)
    expect(moved.slice(gap).every((e) => epochOf(e.id) !== oldEpoch)).toBe(true)
    remote.close()
    await until(async () => {
      const listed = await api(runners[0]!.daemon, "GET", "/v1/runtimes?scope=cluster")
      return listed.body.every((row: { runner: string }) => row.runner !== leaving.address)
    }, "a stopped runner's runtimes leave the list")
  }, 240_000)

  it("pins agents to their shard group: an agent created through a runner stays on that group's runners, and a runner of another group joining takes none of them", async () => {
    const url = postgres.database("e2e_groups")
    const groups = ["east", "west"]
    const east = [await startRunner(url, newHome(), { group: "east", groups }), await startRunner(url, newHome(), { group: "east", groups })]
    const west = await startRunner(url, newHome(), { group: "west", groups })
    const all = [...east, west]
    const cwd = newHome()
    // Until both east runners hold east shards (created through them, so in their group).
    const eastAgents = await spreadAgents(east, cwd)
    const westAgents = await Promise.all(Array.from({ length: 4 }, () => createAgent(west, cwd)))
    for (const agentId of eastAgents) expect(agentId).toMatch(/^agent-east-/)
    for (const agentId of westAgents) expect(agentId).toMatch(/^agent-west-/)
    // Prompted through any runner, each runs on a runner of its own group.
    for (const [i, agentId] of [...eastAgents, ...westAgents].entries()) await ask(all[i % 3]!, agentId, "echo here")
    for (const agentId of eastAgents) expect(east).toContain(await hostOf(all, west, agentId))
    for (const agentId of westAgents) expect(await hostOf(all, east[0]!, agentId)).toBe(west)

    // A second west runner joins: east agents never move to it.
    const westToo = await startRunner(url, newHome(), { group: "west", groups })
    const four = [...all, westToo]
    await until(async () => {
      const probe = await createAgent(westToo, cwd)
      return (await hostOf(four, west, probe)) === westToo
    }, "the second west runner hosts west agents", 60_000)
    for (const agentId of eastAgents) {
      expect((await ask(westToo, agentId, "echo still east")).output.trim()).toBe("still east")
      expect(east).toContain(await hostOf(four, westToo, agentId))
    }
  }, 240_000)
})
