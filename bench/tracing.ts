/**
 * Issue 32, OpenTelemetry: what tracing costs a daemon. Real daemons over new homes, one shell
 * agent each, 1,000 prompts (`true`, waited for) one after the other; the daemon's CPU time over
 * the prompts (utime + stime from procfs) and its resident memory after them, with the export on
 * (to an OTLP receiver in this process) against off, interleaved, as medians of `rounds`.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { startOtlpReceiver } from "../test/support/otlpReceiver.ts"
import { call, rssMiB, startDaemon, stopDaemon } from "./daemonProcess.ts"
import { type BenchRow, median } from "./table.ts"

const cli = join(import.meta.dirname, "../src/programs/cli/main.ts")

/** Target of the issue: under 5 % more CPU with tracing on. */
const cpuOverheadLimit = 0.05

/** Prompts sent before measuring, so the runtime is started and the code paths compiled. */
const warmPrompts = 20

/** Clock ticks per second of procfs' CPU times (USER_HZ, 100 on Linux). */
const ticksPerSecond = 100

/** The process's user + system CPU time in ms, from `/proc/<pid>/stat` (fields 14 and 15). */
const cpuMs = (pid: number): number => {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
}

/** One daemon's CPU over `prompts` prompts to one shell agent, and its memory after them. */
const measure = async (env: Readonly<Record<string, string>>, prompts: number) => {
  const daemon = await startDaemon("tracing", (home) => [process.execPath, cli, "--home", home, "daemon", "--port", "0"], env)
  const pid = daemon.child.pid
  if (pid === undefined) throw new Error("the daemon has no pid")
  try {
    const { agentId } = await call(daemon, "POST", "/v1/agents", { provider: "shell", cwd: daemon.home })
    // Warm: the runtime started, the code paths compiled.
    for (let i = 0; i < warmPrompts; i++) await call(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "true", wait: true })
    const before = cpuMs(pid)
    const started = performance.now()
    for (let i = 0; i < prompts; i++) await call(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "true", wait: true })
    const wallMs = performance.now() - started
    // The exports of the last prompts are billed too: one span export interval (5 s by default).
    await new Promise((resolve) => setTimeout(resolve, 5_500))
    return { cpuMs: cpuMs(pid) - before, rssMiB: rssMiB(pid), wallMs }
  } finally {
    await stopDaemon(daemon)
  }
}

/** Tracing on against off over `prompts` prompts, `rounds` interleaved rounds each. */
export const tracingBench = async (prompts = 1_000, rounds = 3): Promise<ReadonlyArray<BenchRow>> => {
  const receiver = await startOtlpReceiver()
  const off: Array<Awaited<ReturnType<typeof measure>>> = []
  const on: Array<Awaited<ReturnType<typeof measure>>> = []
  try {
    for (let round = 0; round < rounds; round++) {
      off.push(await measure({}, prompts))
      on.push(await measure({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint }, prompts))
    }
  } finally {
    await receiver.close()
  }
  const cpuOff = median(off.map((run) => run.cpuMs))
  const cpuOn = median(on.map((run) => run.cpuMs))
  const overhead = cpuOn / cpuOff - 1
  const spans = receiver.spans().length
  return [
    { name: `tracing: daemon CPU over ${prompts} prompts, off`, value: `${cpuOff.toFixed(0)} ms`, target: "-", ok: undefined },
    {
      name: `tracing: daemon CPU over ${prompts} prompts, on`,
      value: `${cpuOn.toFixed(0)} ms (${overhead >= 0 ? "+" : ""}${(overhead * 100).toFixed(1)} %, ${(spans / (rounds * (prompts + warmPrompts))).toFixed(1)} spans a prompt)`,
      target: `< +${cpuOverheadLimit * 100} %`,
      ok: overhead < cpuOverheadLimit && spans > 0
    },
    {
      name: "tracing: daemon RSS after the prompts, off / on",
      value: `${median(off.map((run) => run.rssMiB)).toFixed(1)} / ${median(on.map((run) => run.rssMiB)).toFixed(1)} MiB`,
      target: "-",
      ok: undefined
    },
    {
      name: "tracing: prompts per second, off / on",
      value: `${(prompts / (median(off.map((run) => run.wallMs)) / 1000)).toFixed(0)} / ${(prompts / (median(on.map((run) => run.wallMs)) / 1000)).toFixed(0)}`,
      target: "-",
      ok: undefined
    }
  ]
}

// Run alone: `node --expose-gc bench/tracing.ts [prompts] [rounds]`.
if (import.meta.main) {
  const { printTable } = await import("./table.ts")
  printTable(await tracingBench(Number(process.argv[2] ?? 1_000), Number(process.argv[3] ?? 3)))
}
