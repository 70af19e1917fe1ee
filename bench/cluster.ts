/**
 * The cluster (X6) against one daemon, with real processes: waiting prompts per second through
 * three runners on one PostgreSQL server, against one daemon on its SQLite file, both with the
 * reference shell provider over HTTP; and what the first prompt after a shard move costs (the
 * agent's entity starts on its new runner, which resumes the saved session) against a resume on
 * one daemon. Every answer is checked; failures are counted, not timed.
 *
 * Then, on three runners with the default shard locks: how soon the agents of a runner that was
 * SIGKILLed answer again on the others (SIGKILL to the first answer of a moved agent), and what
 * the locks cost the database while nothing happens (lock-refresh queries per second per runner,
 * counted by pg_stat_statements).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  api,
  cleanUpDaemons,
  type Daemon,
  freePort,
  newHome,
  prompt,
  ready,
  startDaemon,
  until
} from "../test/support/daemonProcess.ts"
import { killAndPrompt } from "../test/support/clusterFailover.ts"
import { type PostgresServer, startPostgres } from "../test/support/postgres.ts"
import { type BenchRow, median } from "./table.ts"

const agentsPerRun = 24
const promptsPerAgent = 10

/** Short locks for the throughput runs, so that the shard move after a stop is quick. */
const shortLocks = { shardLockExpiration: "5s", shardLockRefreshInterval: "1s" }

const runnerConfig = (url: string, sessions: string, port: number, locks: object) => ({
  cluster: {
    storage: { kind: "postgres", url },
    runner: { host: "127.0.0.1", port },
    shardsPerGroup: 24,
    ...locks,
    pluginHome: sessions
  }
})

const startRunner = async (url: string, sessions: string, locks: object = shortLocks): Promise<Daemon> => {
  const home = newHome()
  writeFileSync(join(home, "config.json"), JSON.stringify(runnerConfig(url, sessions, await freePort(), locks)))
  const daemon = startDaemon(home, await freePort())
  await ready(daemon)
  return daemon
}

const create = async (daemon: Daemon, cwd: string): Promise<string> => {
  const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd })
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${JSON.stringify(created.body)}`)
  return created.body.agentId
}

/** One waiting prompt; whether it answered with what it was asked to echo. */
const echo = async (daemon: Daemon, agentId: string, word: string) => {
  const answer = await prompt(daemon, agentId, { text: `echo ${word}`, wait: true })
  return answer.status === 200 && String(answer.body.output).trim() === word
}

/** Waiting prompts from every agent at once, each agent's in turn, sent round-robin to `daemons`. */
const throughput = async (daemons: ReadonlyArray<Daemon>, agents: ReadonlyArray<string>) => {
  let failures = 0
  const start = performance.now()
  await Promise.all(agents.map(async (agentId, a) => {
    for (let i = 0; i < promptsPerAgent; i++) {
      if (!(await echo(daemons[(a + i) % daemons.length]!, agentId, `w${a}x${i}`))) failures++
    }
  }))
  const seconds = (performance.now() - start) / 1000
  return { perSecond: (agents.length * promptsPerAgent) / seconds, failures }
}

/** The host of an agent's runtime, by its runtime's parent pid. */
const hostPid = async (via: Daemon, agentId: string): Promise<number | undefined> => {
  const view = await api(via, "GET", `/v1/agents/${agentId}`)
  if (view.status !== 200 || view.body.pid === null) return undefined
  const { readStat } = await import("../src/platform/procfs.ts")
  return readStat(view.body.pid)?.ppid
}

/** How long the lock-refresh queries are counted, with nothing else happening. */
const quietWindowSeconds = 30

/**
 * Three runners with the default shard locks: the lock-refresh queries per second per runner
 * while nothing happens, then a runner SIGKILLed and its agents prompted at once.
 */
const failoverRun = async (server: PostgresServer, sessions: string) => {
  const database = "bench_failover"
  const url = server.createDatabase(database)
  const runners = [await startRunner(url, sessions, {}), await startRunner(url, sessions, {}), await startRunner(url, sessions, {})]
  const cwd = newHome()
  const agents = await Promise.all(Array.from({ length: 6 }, (_, i) => create(runners[i % 3]!, cwd)))
  await Promise.all(agents.map((agentId) => echo(runners[0]!, agentId, "settle")))
  const hosts = await Promise.all(agents.map((agentId) => hostPid(runners[0]!, agentId)))
  const hostedBy = (runner: Daemon) => agents.filter((_, i) => hosts[i] === runner.process.pid)
  // The runner hosting the most agents dies; the prompts go through another.
  const victim = [...runners].sort((a, b) => hostedBy(b).length - hostedBy(a).length)[0]!
  const via = runners.find((runner) => runner !== victim)!

  server.query(database, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
  server.query(database, "SELECT pg_stat_statements_reset()")
  await new Promise((resolve) => setTimeout(resolve, quietWindowSeconds * 1000))
  // Effect Cluster's lock refresh: its heartbeat and the check of the advisory locks it holds; and the runner list (assignments, the gone-runner check).
  const [lockRefresh, runnerList] = server.query(database, `SELECT
      coalesce(sum(calls) FILTER (WHERE query LIKE '%SET last_heartbeat%' OR query LIKE '%FROM pg_locks%'), 0),
      coalesce(sum(calls) FILTER (WHERE query LIKE '%SELECT runner, healthy FROM%'), 0)
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).trim().split("|").map(Number)
  const perRunnerPerSecond = (calls: number) => calls / runners.length / quietWindowSeconds

  const moved = hostedBy(victim)
  const failover = await killAndPrompt(victim, via, moved, cwd, "failover")
  const runOnce = [...failover.runs.values()].every((count) => count === 1)
  await cleanUpDaemons()
  return {
    moved: moved.length,
    agents: agents.length,
    failover,
    runOnce,
    lockRefresh: perRunnerPerSecond(lockRefresh ?? 0),
    runnerList: perRunnerPerSecond(runnerList ?? 0)
  }
}

export const clusterBench = async (): Promise<ReadonlyArray<BenchRow>> => {
  const server = await startPostgres(["shared_preload_libraries=pg_stat_statements"])
  const sessions = mkdtempSync(join(tmpdir(), "quiesce-bench-sessions-"))
  try {
    // One daemon on SQLite.
    const lone = startDaemon(newHome(), await freePort())
    await ready(lone)
    const loneCwd = newHome()
    const loneAgents = await Promise.all(Array.from({ length: agentsPerRun }, () => create(lone, loneCwd)))
    await throughput([lone], loneAgents)
    const single = await throughput([lone], loneAgents)

    // A resume on one daemon: released, then prompted.
    const loneResumes: Array<number> = []
    for (const agentId of loneAgents.slice(0, 10)) {
      await api(lone, "POST", `/v1/agents/${agentId}/close`)
      const start = performance.now()
      if (await echo(lone, agentId, "back")) loneResumes.push(performance.now() - start)
    }
    await cleanUpDaemons()

    // Three runners on one PostgreSQL database.
    const url = server.createDatabase("bench_cluster")
    const runners = [await startRunner(url, sessions), await startRunner(url, sessions), await startRunner(url, sessions)]
    const cwd = newHome()
    const agents = await Promise.all(Array.from({ length: agentsPerRun }, (_, i) => create(runners[i % 3]!, cwd)))
    // Until every runner hosts some (the shards settle within seconds of the last join).
    await until(async () => {
      await Promise.all(agents.map((agentId) => echo(runners[0]!, agentId, "settle")))
      const hosts = new Set(await Promise.all(agents.map((agentId) => hostPid(runners[0]!, agentId))))
      return runners.every((runner) => hosts.has(runner.process.pid))
    }, "the agents are spread over three runners", 60_000)
    await throughput(runners, agents)
    const cluster = await throughput(runners, agents)

    // A shard move: the third runner stops; the first prompt to each of its agents resumes it elsewhere.
    const leaving = runners[2]!
    const moved: Array<string> = []
    for (const agentId of agents) if ((await hostPid(runners[0]!, agentId)) === leaving.process.pid) moved.push(agentId)
    leaving.process.kill("SIGTERM")
    await until(() => leaving.process.exitCode !== null, "the third runner stops")
    const afterMove: Array<number> = []
    let moveFailures = 0
    for (const agentId of moved) {
      const start = performance.now()
      if (await echo(runners[0]!, agentId, "moved")) afterMove.push(performance.now() - start)
      else moveFailures++
    }
    await cleanUpDaemons()

    const dead = await failoverRun(server, sessions)

    const ms = (value: number) => `${value.toFixed(1)} ms`
    return [
      {
        name: `waiting prompts/s, one daemon on SQLite (${agentsPerRun} agents × ${promptsPerAgent}, shell over HTTP)`,
        value: `${single.perSecond.toFixed(0)}/s, ${single.failures} failed`,
        target: "reference",
        ok: single.failures === 0 ? undefined : false
      },
      {
        name: `waiting prompts/s, three runners on one PostgreSQL (same load, round-robin over the runners)`,
        value: `${cluster.perSecond.toFixed(0)}/s (${(cluster.perSecond / single.perSecond).toFixed(2)}× one daemon), ${cluster.failures} failed`,
        target: "every answer right",
        ok: cluster.failures === 0
      },
      {
        name: "first prompt after a release, one daemon (resume, p50 of 10)",
        value: ms(median(loneResumes)),
        target: "reference",
        ok: undefined
      },
      {
        name: `first prompt after a shard move (runner stopped; p50 of ${moved.length} moved agents)`,
        value: `${ms(median(afterMove))}, ${moveFailures} failed`,
        target: "every answer right",
        ok: moveFailures === 0 && afterMove.length > 0
      },
      {
        name: `failover: SIGKILL of a runner to the first answer of a moved agent (default locks; ${dead.moved} of ${dead.agents} agents moved)`,
        value: `${ms(dead.failover.firstAnswerMs)} (last ${ms(dead.failover.lastAnswerMs)}), ${dead.runOnce ? "each id ran once" : "an id did not run exactly once"}`,
        target: "< 10 s, each id once",
        ok: dead.failover.firstAnswerMs < 10_000 && dead.runOnce
      },
      {
        name: `shard-lock refresh cost, default locks (35 s expiry, 10 s refresh; ${quietWindowSeconds} s idle, pg_stat_statements)`,
        value: `${dead.lockRefresh.toFixed(2)} lock-refresh queries/s per runner (runner list: ${dead.runnerList.toFixed(2)}/s)`,
        target: "≤ 1 query/s per runner",
        ok: dead.lockRefresh <= 1
      }
    ]
  } finally {
    await cleanUpDaemons()
    rmSync(sessions, { recursive: true, force: true })
    await server.stop()
  }
}

if (import.meta.main) {
  const { printTable } = await import("./table.ts")
  printTable(await clusterBench())
}
