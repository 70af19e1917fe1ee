import { Effect, Exit, Scope } from "effect"
import { noBlockers } from "../src/domain/blocker.ts"
import type { RuntimeCandidate } from "../src/domain/candidate.ts"
import { type StopAnswer, stopPermitted } from "../src/domain/provider.ts"
import { makeRuntimeCollector } from "../src/layers/collector/RuntimeCollectorLive.ts"
import { CallerProtection } from "../src/services/CallerProtection.ts"
import { RuntimeCandidates } from "../src/services/RuntimeCandidates.ts"
import { type BenchRow, median, sample, run } from "./table.ts"

const clear = Effect.succeed(noBlockers)
const neverClosed = () => Effect.succeed(false)

/** `count` runtimes, all just active (so no sweep ever releases them), in families of `familySize`. */
const snapshot = (count: number, familySize: number, probe?: Effect.Effect<StopAnswer>) => {
  const now = Date.now()
  const out: Array<RuntimeCandidate> = []
  for (let i = 0; i < count; i++) {
    const agentId = `agent-${i}`
    const root = i - (i % familySize)
    out.push({
      identity: {},
      agentId,
      parentAgentId: root === i ? undefined : `agent-${root}`,
      provider: "bench",
      sessionId: `session-${i}`,
      lastActivityAt: now,
      blockers: clear,
      canStopRuntime: probe,
      closeIfEligible: neverClosed
    })
  }
  return out
}

/** Median sweep time; with several snapshots the sweeps cycle through them, so no two in a row see the same runtimes. */
const sweepTimes = async (
  snapshots: ReadonlyArray<ReadonlyArray<RuntimeCandidate>>,
  options: { warmup: number; samples: number }
) => {
  let turn = 0
  const scope = Effect.runSync(Scope.make())
  const collector = await run(
    makeRuntimeCollector({ tickInterval: "3650 days" }).pipe(
      Effect.provideService(RuntimeCandidates, {
        capture: Effect.sync(() => snapshots[turn++ % snapshots.length]!),
        captureFamily: () => Effect.succeed([])
      }),
      Effect.provideService(CallerProtection, { isProtected: () => Effect.succeed(false) }),
      Scope.provide(scope)
    )
  )
  try {
    return await sample(() => run(collector.sweep), options)
  } finally {
    await run(Scope.close(scope, Exit.void))
  }
}

export const collectorBench = async (): Promise<ReadonlyArray<BenchRow>> => {
  const rows: Array<BenchRow> = []
  const baseline = new Map<string, number>()
  for (const [count, familySize] of [[1_000, 1], [10_000, 1], [100_000, 1], [1_000, 8], [10_000, 8], [100_000, 8]] as const) {
    const ms = median(await sweepTimes([snapshot(count, familySize)], { warmup: 5, samples: count >= 100_000 ? 21 : 51 }))
    const shape = familySize === 1 ? "flat" : "families of 8"
    baseline.set(`${count}/${familySize}`, ms)
    const target = count === 10_000 && familySize === 1
      ? { text: "<= 10 ms", ok: ms <= 10 }
      : count === 10_000
      ? { text: "<= 15 ms", ok: ms <= 15 }
      : count === 100_000
      ? (() => {
        const tenK = baseline.get(`10000/${familySize}`)!
        return { text: `<= 12 x 10k (${(12 * tenK).toFixed(1)} ms)`, ok: ms <= 12 * tenK }
      })()
      : { text: "", ok: undefined }
    rows.push({
      name: `sweep, ${count.toLocaleString("en")} runtimes, ${shape}, baseline only`,
      value: `${ms.toFixed(2)} ms`,
      target: target.text,
      ok: target.ok
    })
  }
  for (const count of [10_000, 100_000]) {
    const ms = median(
      await sweepTimes([snapshot(count, 8), snapshot(count, 8)], { warmup: 4, samples: count >= 100_000 ? 21 : 51 })
    )
    rows.push({
      name: `sweep, ${count.toLocaleString("en")} runtimes, families of 8, runtime set changed`,
      value: `${ms.toFixed(2)} ms`,
      target: "",
      ok: undefined
    })
  }
  const probed = median(
    await sweepTimes([snapshot(1_000, 1, Effect.as(Effect.sleep("20 millis"), stopPermitted))], { warmup: 1, samples: 5 })
  )
  rows.push({
    name: "sweep, 1,000 runtimes, 20 ms probe each",
    value: `${probed.toFixed(0)} ms`,
    target: "<= 2000 ms",
    ok: probed <= 2000
  })
  return rows
}
