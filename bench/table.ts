import { Effect, References } from "effect"

/** Timing helpers and the table every benchmark prints. */

export interface BenchRow {
  readonly name: string
  readonly value: string
  readonly target: string
  readonly ok: boolean | undefined
}

export const median = (samples: ReadonlyArray<number>): number => {
  const sorted = [...samples].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** Runs `run` `warmup` times unmeasured, then `samples` times; returns each sample in ms. */
export const sample = async (run: () => Promise<unknown>, options: { warmup: number; samples: number }) => {
  for (let i = 0; i < options.warmup; i++) await run()
  // Start every measurement from a collected heap, so one scenario's garbage is not billed to the next.
  globalThis.gc?.()
  const times: Array<number> = []
  for (let i = 0; i < options.samples; i++) {
    const start = performance.now()
    await run()
    times.push(performance.now() - start)
  }
  return times
}

export const printTable = (rows: ReadonlyArray<BenchRow>) => {
  const header = ["benchmark", "result", "target", "met"]
  const cells = rows.map((row) => [row.name, row.value, row.target, row.ok === undefined ? "-" : row.ok ? "yes" : "NO"])
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((cell) => cell[column]!.length)))
  const line = (values: ReadonlyArray<string>) => `| ${values.map((value, i) => value.padEnd(widths[i]!)).join(" | ")} |`
  console.log(line(header))
  console.log(`|${widths.map((width) => "-".repeat(width + 2)).join("|")}|`)
  for (const cell of cells) console.log(line(cell))
}

/** Runs a benchmark step with warnings and errors logged only, so logging is not what is measured. */
export const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromise(effect.pipe(Effect.provideService(References.MinimumLogLevel, "Warn")))
