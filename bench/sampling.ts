/**
 * Process sampling (H5) over real process trees: how long `sampleAll` takes for `trees` runtimes
 * of three processes each (median of 20), and what is measured when four callers sample them at
 * once, with the four-slot ceiling and the 1 s deadline of the production layer.
 */
import { Effect, Option } from "effect"
import { spawn } from "node:child_process"
import * as ProcessInspectionProcfs from "../src/layers/host/ProcessInspectionProcfs.ts"
import { ProcessInspection } from "../src/services/ProcessInspection.ts"
import { type BenchRow, median, run } from "./table.ts"

const startTree = () => {
  const child = spawn("sh", ["-c", "sleep 120 & sleep 120 & wait"], { detached: true, stdio: "ignore" })
  if (child.pid === undefined) throw new Error("sh did not start")
  return child.pid
}

export const samplingBench = async (trees: number): Promise<ReadonlyArray<BenchRow>> => {
  const pids = Array.from({ length: trees }, startTree)
  try {
    const measure = Effect.gen(function*() {
      const inspection = yield* ProcessInspection
      // Until every tree shows its three processes.
      for (let i = 0; i < 100; i++) {
        const all = yield* inspection.sampleAll(pids)
        if ([...all.values()].every((sample) => Option.isSome(sample) && sample.value.measuredProcesses >= 3)) break
        yield* Effect.sleep("50 millis")
      }
      const times: Array<number> = []
      let measured = 0
      for (let i = 0; i < 20; i++) {
        const start = performance.now()
        const all = yield* inspection.sampleAll(pids)
        times.push(performance.now() - start)
        measured = [...all.values()].filter(Option.isSome).length
      }
      const concurrent = yield* Effect.forEach([1, 2, 3, 4], () => inspection.sampleAll(pids), { concurrency: "unbounded" })
      const measuredConcurrently = concurrent.map((all) => [...all.values()].filter(Option.isSome).length)
      return { time: median(times), measured, measuredConcurrently }
    }).pipe(Effect.provide(ProcessInspectionProcfs.layer()))
    const result = await run(measure)
    return [
      {
        name: `process sampling: sampleAll of ${trees} runtimes (3 processes each), median of 20`,
        value: `${result.time.toFixed(1)} ms, ${result.measured}/${trees} measured`,
        target: "< 1 s deadline, all measured",
        ok: result.time < 1000 && result.measured === trees
      },
      {
        name: `process sampling: 4 callers at once over the same ${trees}`,
        value: `${result.measuredConcurrently.join(" + ")} measured (the rest unmeasured, not queued)`,
        target: "",
        ok: undefined
      }
    ]
  } finally {
    for (const pid of pids) {
      try {
        process.kill(-pid, "SIGKILL")
      } catch {
        // gone
      }
    }
  }
}

if (import.meta.main) {
  const { printTable } = await import("./table.ts")
  printTable(await samplingBench(50))
}
