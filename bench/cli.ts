/**
 * The CLI as a user runs it: `bin/quiesce.mjs` (the built bundle, with V8's compile cache), each
 * command a new process, beside a bare Node start measured in the same run. `agents list` and
 * `runtimes` talk to a real daemon with one shell agent.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createShellAgent, exited, freePort, ready, startDaemon } from "../test/support/daemonProcess.ts"
import { type BenchRow, median } from "./table.ts"

const bin = join(import.meta.dirname, "../bin/quiesce.mjs")

/** Target: a client command starts in at most this many bare Node starts. */
const startFactor = 3
const rssLimitMiB = 80

// The peak resident set of this process's own memory (VmHWM, KiB). Not resourceUsage().maxRSS: on
// Linux that keeps the high-water mark from before exec, i.e. the forked copy of this large bench.
const reportRss = "data:text/javascript,process.on('exit',()=>{const fs=process.getBuiltinModule('node:fs');" +
  "fs.writeSync(3,/VmHWM:\\s+(\\d+)/.exec(fs.readFileSync('/proc/self/status','utf8'))[1])})"

/** Runs `args` with this Node once; `maxRssKiB` when asked (by a preload that reports at exit on fd 3). */
const run = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, measureRss: boolean) => {
  const start = performance.now()
  const result = spawnSync(process.execPath, [...(measureRss ? ["--import", reportRss] : []), ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe", "pipe"]
  })
  const ms = performance.now() - start
  if (result.status !== 0) throw new Error(`${args.join(" ")} exited ${result.status}: ${result.stderr.toString()}`)
  return { ms, maxRssKiB: measureRss ? Number(result.output[3]?.toString()) : 0 }
}

/** `args` run with this Node, warmed once: the median time of `samples` runs, and the peak RSS of one more. */
export const measureCommand = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, samples: number) => {
  // Warm: the compile cache is written by the first run, as after a user's first command.
  run(args, env, false)
  const times = Array.from({ length: samples }, () => run(args, env, false).ms)
  return { ms: median(times), rssMiB: run(args, env, true).maxRssKiB / 1024 }
}

export const cliBench = async (samples: number): Promise<ReadonlyArray<BenchRow>> => {
  if (!existsSync(join(import.meta.dirname, "../dist/cli/quiesce.mjs"))) throw new Error("the CLI is not built: npm run build")
  const home = mkdtempSync(join(tmpdir(), "quiesce-bench-cli-"))
  const daemon = startDaemon(home, await freePort())
  try {
    await ready(daemon)
    await createShellAgent(daemon)
    const env = { ...process.env, QUIESCE_HOME: home }
    const bare = measureCommand(["-e", "0"], env, samples)
    const rows: Array<BenchRow> = [{
      name: `bare node -e 0 (median of ${samples})`,
      value: `${bare.ms.toFixed(0)} ms, ${bare.rssMiB.toFixed(0)} MiB`,
      target: "",
      ok: undefined
    }]
    for (const command of [["--version"], ["agents", "list"], ["runtimes"]]) {
      const figures = measureCommand([bin, ...command], env, samples)
      const ok = figures.ms <= startFactor * bare.ms && figures.rssMiB < rssLimitMiB
      rows.push({
        name: `quiesce ${command.join(" ")} (median of ${samples})`,
        value: `${figures.ms.toFixed(0)} ms (${(figures.ms / bare.ms).toFixed(1)}× bare), ${figures.rssMiB.toFixed(0)} MiB`,
        target: `≤ ${startFactor}× bare, < ${rssLimitMiB} MiB`,
        ok
      })
    }
    return rows
  } finally {
    if (daemon.process.exitCode === null && daemon.process.pid !== undefined) {
      process.kill(-daemon.process.pid, "SIGTERM")
      await exited(daemon.process)
    }
    rmSync(home, { recursive: true, force: true })
  }
}
