/**
 * Issue 29, "start fast, stay small": the figures of the build people run, each against the variant
 * it replaces (the TypeScript sources through type stripping) or against a bare `node -e 0`, all
 * measured in this one run, interleaved, as medians. Real processes: daemons, a hub, shell runtimes.
 *
 * - a daemon's start to its ready line, and its resident memory idle with no agent;
 * - a daemon's resident memory once `released` agents were created, prompted and all released;
 * - one idle reference shell runtime (its built file against its source);
 * - the hub's resident memory, and a prompt through it to a retired home, to its reply;
 * - `quiesce --version` and `quiesce agents list`, and `quiesce` on PATH where an older `node` comes first.
 */
import { spawn, spawnSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { longRunningNodeFlags } from "../src/domain/version.ts"
import { liveProcesses } from "../src/platform/detachedGroups.ts"
import { until } from "../test/support/daemonProcess.ts"
import { cleanUpHubs, hubApi, inventoryRow, newHubRoot, processAlive, startHub, writeHubConfig } from "../test/support/hubProcess.ts"
import { measureCommand } from "./cli.ts"
import { call, rssMiB, type StartedDaemon, startDaemon, stopDaemon } from "./daemonProcess.ts"
import { type BenchRow, median } from "./table.ts"

const root = join(import.meta.dirname, "..")
const built = join(root, "bin/quiesce.mjs")
const sources = join(root, "src/programs/cli/main.ts")

/** Targets of the issue. */
const readyLimitMs = 300
const readyBareFactor = 8
const idleRssLimitMiB = 80
const releasedRssLimitMiB = 100
const shellRssLimitMiB = 45
const hubRssLimitMiB = 80
const wakeLimitMs = 500
const clientBareFactor = 3

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Starts a daemon over a new home with `cli` and waits for its ready line: the time from spawn to it.
 * The build runs with the flags the package starts it with (`npm start`, a hub, the systemd unit).
 */
const startLeanDaemon = (cli: string | "npm start", flags: ReadonlyArray<string> = []) =>
  startDaemon("lean", (home) =>
    cli === "npm start"
      ? ["npm", "start", "--silent", "--", "--home", home, "--port", "0", ...flags]
      : [process.execPath, ...(cli === built ? longRunningNodeFlags : []), cli, "--home", home, "daemon", "--port", "0", ...flags])

/** One shell agent created, prompted and released (its runtime closed); the runtime's pid while it lived. */
const cycleAgent = async (daemon: StartedDaemon) => {
  const created = await call(daemon, "POST", "/v1/agents", { provider: "shell", cwd: daemon.home })
  const agentId: string = created.agentId
  await call(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "true", wait: true })
  const runtime = (liveProcesses() ?? []).find((stat) => stat.ppid === daemon.child.pid)
  const runtimeRss = runtime === undefined ? Number.NaN : rssMiB(runtime.pid)
  await call(daemon, "POST", `/v1/agents/${agentId}/close`, {})
  return runtimeRss
}

const bareStart = (samples: number) => {
  const times = Array.from({ length: samples }, () => {
    const start = performance.now()
    spawnSync(process.execPath, ["-e", "0"])
    return performance.now() - start
  })
  return median(times)
}

const fmt = (ms: number) => `${ms.toFixed(0)} ms`
const mib = (value: number) => `${value.toFixed(0)} MiB`

export const leanBench = async (samples: number, released: number, wakes: number): Promise<ReadonlyArray<BenchRow>> => {
  if (!existsSync(join(root, "dist/cli/quiesce.mjs"))) throw new Error("the CLI is not built: npm run build")
  const rows: Array<BenchRow> = []

  // Daemon start and idle memory: the build and the sources, interleaved, beside bare Node starts.
  const bare: Array<number> = []
  const figures = {
    built: { ready: [] as Array<number>, rss: [] as Array<number> },
    sources: { ready: [] as Array<number>, rss: [] as Array<number> },
    npm: { ready: [] as Array<number>, rss: [] as Array<number> }
  }
  for (let i = 0; i < samples; i++) {
    bare.push(bareStart(3))
    for (const [variant, cli] of [["built", built], ["sources", sources], ["npm", "npm start"]] as const) {
      const daemon = await startLeanDaemon(cli)
      figures[variant].ready.push(daemon.readyMs)
      // Idle: what it holds once its start-up garbage had a moment to be collected.
      await sleep(2000)
      const daemonPid = variant === "npm" ? Number(JSON.parse(readFileSync(join(daemon.home, "daemon.json"), "utf8")).pid) : daemon.child.pid!
      figures[variant].rss.push(rssMiB(daemonPid))
      await stopDaemon(daemon)
    }
  }
  const bareMs = median(bare)
  const ready = median(figures.built.ready)
  const sourcesReady = median(figures.sources.ready)
  rows.push({ name: `bare node -e 0 (median of ${samples * 3})`, value: fmt(bareMs), target: "", ok: undefined })
  rows.push({
    name: `daemon start to ready, built (bin/quiesce.mjs daemon), median of ${samples}`,
    value: `${fmt(ready)} (${(ready / bareMs).toFixed(1)}× bare; sources ${fmt(sourcesReady)}, ${(sourcesReady / ready).toFixed(1)}× built)`,
    target: `≤ ${readyLimitMs} ms, ≤ ${readyBareFactor}× bare`,
    ok: ready <= readyLimitMs && ready <= readyBareFactor * bareMs
  })
  const npmReady = median(figures.npm.ready)
  rows.push({
    name: `daemon start to ready through npm start (the README's command), median of ${samples}`,
    value: `${fmt(npmReady)} (npm's own start: +${fmt(npmReady - ready)} over the built daemon's)`,
    target: "runs the build",
    ok: median(figures.npm.rss) < median(figures.sources.rss) / 2
  })
  const idle = median(figures.built.rss)
  rows.push({
    name: `daemon idle RSS, 0 agents, built, median of ${samples}`,
    value: `${mib(idle)} (sources ${mib(median(figures.sources.rss))})`,
    target: `≤ ${idleRssLimitMiB} MiB`,
    ok: idle <= idleRssLimitMiB
  })

  // A daemon after `released` agents were created, prompted and released, ten at a time.
  const daemon = await startLeanDaemon(built)
  try {
    const runtimeRss: Array<number> = []
    for (let done = 0; done < released; done += 10) {
      runtimeRss.push(...await Promise.all(Array.from({ length: Math.min(10, released - done) }, () => cycleAgent(daemon))))
    }
    await sleep(2000)
    const afterRss = rssMiB(daemon.child.pid!)
    rows.push({
      name: `daemon RSS, built, ${released} agents created, prompted, all released`,
      value: mib(afterRss),
      target: `≤ ${releasedRssLimitMiB} MiB`,
      ok: afterRss <= releasedRssLimitMiB
    })
    // One idle shell runtime: the built file (what a built daemon runs) against its source, side by side.
    const idleShell = async (file: string) => {
      const child = spawn(process.execPath, [file], { stdio: ["pipe", "ignore", "ignore"] })
      await sleep(1500)
      const rss = rssMiB(child.pid!)
      child.kill("SIGKILL")
      return rss
    }
    const shellBuilt: Array<number> = []
    const shellSources: Array<number> = []
    for (let i = 0; i < samples; i++) {
      shellBuilt.push(await idleShell(join(root, "dist/plugins/shell/main.cjs")))
      shellSources.push(await idleShell(join(root, "plugins/shell/main.ts")))
    }
    const shell = median(shellBuilt)
    rows.push({
      name: `one idle shell runtime RSS, built file, median of ${samples}`,
      value: `${mib(shell)} (sources ${mib(median(shellSources))}; a daemon's after one prompt: ${mib(median(runtimeRss.filter(Number.isFinite)))})`,
      target: `≤ ${shellRssLimitMiB} MiB`,
      ok: shell <= shellRssLimitMiB
    })

    // The client: `quiesce --version` and `agents list` against this daemon, as bare Node starts.
    const env = { ...process.env, QUIESCE_HOME: daemon.home }
    const clientBare = measureCommand(["-e", "0"], env, samples * 2).ms
    for (const command of [["--version"], ["agents", "list"]]) {
      const client = measureCommand([built, ...command], env, samples * 2).ms
      rows.push({
        name: `quiesce ${command.join(" ")}, median of ${samples * 2}`,
        value: `${fmt(client)} (${(client / clientBare).toFixed(2)}× bare)`,
        target: `≤ ${clientBareFactor}× bare`,
        ok: client <= clientBareFactor * clientBare
      })
    }
  } finally {
    await stopDaemon(daemon)
  }

  // `quiesce` on PATH where the machine's older node comes first: one exec, against `node bin/quiesce.mjs`.
  const olderFirst = { ...process.env, PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` }
  const onPath: Array<number> = []
  const direct: Array<number> = []
  for (let i = 0; i < samples * 2; i++) {
    for (const [times, file, args] of [[onPath, join(root, "bin/quiesce"), ["--version"]], [direct, process.execPath, [built, "--version"]]] as const) {
      const start = performance.now()
      spawnSync(file, args, { env: olderFirst })
      times.push(performance.now() - start)
    }
  }
  const wrapperRatio = median(onPath) / median(direct)
  rows.push({
    name: `quiesce --version on PATH (bin/quiesce), an older node first, median of ${samples * 2}`,
    value: `${fmt(median(onPath))} (${wrapperRatio.toFixed(2)}× node bin/quiesce.mjs)`,
    target: "≤ 1.1× (one Node, by exec)",
    ok: wrapperRatio <= 1.1
  })

  // The hub: its memory, and a prompt to a retired home through it.
  try {
    const hubRoot = newHubRoot()
    const hubHome = join(hubRoot, "hub")
    const dir = join(hubRoot, "work")
    writeHubConfig(hubHome, [{ name: "work", dir }])
    const hub = await startHub(hubHome, [process.execPath, ...longRunningNodeFlags, built, "hub"])
    await sleep(2000)
    const idleHubRss = rssMiB(hub.process.pid!)
    const created = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "shell", cwd: hubRoot })
    const agentId: string = created.body.agentId
    await hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, { text: "true", wait: true })
    const wakeTimes: Array<number> = []
    const stages = { launch: [] as Array<number>, open: [] as Array<number>, resume: [] as Array<number>, rest: [] as Array<number> }
    /** The last `annotation` (a `123ms` figure) of a log line with `message`, in JSON log lines. */
    const lastFigure = (log: string, message: string, annotation: string) => {
      const line = log.split("\n").filter((text) => text.includes(message)).at(-1)
      const figure = line === undefined ? undefined : JSON.parse(line).annotations?.[annotation]
      return typeof figure === "string" ? Number.parseFloat(figure) : Number.NaN
    }
    let failures = 0
    for (let i = 0; i < wakes; i++) {
      const row = await inventoryRow(hub, "work")
      const retired = await hubApi(hub, "POST", "/v1/daemons/work/retire", { pid: row.pid, startTime: row.startTime, instanceId: row.instanceId })
      if (retired.status !== 202) throw new Error(`retire now: ${JSON.stringify(retired.body)}`)
      await until(() => !processAlive(row.pid), "the retired daemon exits", 20_000)
      const start = performance.now()
      const answer = await hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, { text: `echo ${i}`, wait: true })
      const total = performance.now() - start
      wakeTimes.push(total)
      if (answer.body?.state !== "completed" || answer.body?.resumed !== true) failures++
      // The stages, from the hub's log and the daemon's (its output, in the hub's logs/work.log).
      const daemonLog = readFileSync(join(hubHome, "logs/work.log"), "utf8")
      const launchTook = lastFigure(hub.output(), "Started the daemon of work", "launchTook")
      const startedIn = lastFigure(daemonLog, "Quiesce ready", "startedIn")
      const resumeTook = lastFigure(daemonLog, "Resumed agent runtime", "resumeTook")
      stages.launch.push(launchTook - startedIn)
      stages.open.push(startedIn)
      stages.resume.push(resumeTook)
      stages.rest.push(total - launchTook - resumeTook)
    }
    await sleep(1000)
    const hubRss = rssMiB(hub.process.pid!)
    rows.push({ name: "hub RSS, built, one home, idle", value: mib(idleHubRss), target: `≤ ${hubRssLimitMiB} MiB`, ok: idleHubRss <= hubRssLimitMiB })
    rows.push({ name: `hub RSS, built, after ${wakes + 1} wakes`, value: mib(hubRss), target: `≤ ${hubRssLimitMiB} MiB`, ok: hubRss <= hubRssLimitMiB })
    const wake = median(wakeTimes)
    rows.push({
      name: `prompt through the built hub to a retired home, to its reply, p50 of ${wakes}`,
      value: `${fmt(wake)} (min ${fmt(Math.min(...wakeTimes))}, max ${fmt(Math.max(...wakeTimes))}), ${failures} failed`,
      target: `p50 ≤ ${wakeLimitMs} ms`,
      ok: failures === 0 && wake <= wakeLimitMs
    })
    rows.push({
      name: `  its stages, p50 of ${wakes}: launch | daemon start to ready | first resume | forward and the turn`,
      value: [stages.launch, stages.open, stages.resume, stages.rest].map((times) => fmt(median(times))).join(" | "),
      target: "",
      ok: undefined
    })
  } finally {
    await cleanUpHubs()
  }
  return rows
}

if (import.meta.main) {
  const { printTable } = await import("./table.ts")
  printTable(await leanBench(5, 100, 7))
}
