/**
 * The memory budget (docs/collector.md): how quickly a pressure episode brings usage from over
 * the high watermark to under the low one, how much it gives back for what was owed, and what one
 * budget sample costs the collector with 1,000 runtimes. Runtimes are in memory, their RSS given
 * by a ProcessInspection stand-in (the real procfs sampling is the "process sampling" rows).
 */
import { Effect, Exit, Option, References, Scope } from "effect"
import { blocker, noBlockers } from "../src/domain/blocker.ts"
import type { RuntimeCandidate } from "../src/domain/candidate.ts"
import { stopPermitted } from "../src/domain/provider.ts"
import { makeRuntimeCollector } from "../src/layers/collector/RuntimeCollectorLive.ts"
import { CallerProtection } from "../src/services/CallerProtection.ts"
import { ProcessInspection } from "../src/services/ProcessInspection.ts"
import { RuntimeCandidates } from "../src/services/RuntimeCandidates.ts"
import type { RuntimeCollectorOptions } from "../src/services/RuntimeCollector.ts"
import { type BenchRow, median, run, sample } from "./table.ts"

const mib = 1024 * 1024
const gib = 1024 * mib

interface FakeRuntime {
  readonly identity: object
  readonly agentId: string
  readonly pid: number
  readonly rss: number
  lastActivityAt: number
  closed: boolean
  blocked: boolean
}

/** `count` runtimes of `rss` bytes each, idle for an hour, one pid each; a stand-in inspection counting its calls. */
const fleet = (count: number, rss: number, probeMillis = 20) => {
  const runtimes: Array<FakeRuntime> = []
  const hourAgo = Date.now() - 3_600_000
  for (let i = 0; i < count; i++) {
    runtimes.push({ identity: {}, agentId: `agent-${i}`, pid: 10_000 + i, rss, lastActivityAt: hourAgo + i, closed: false, blocked: false })
  }
  const byPid = new Map(runtimes.map((runtime) => [runtime.pid, runtime]))
  let sampleCalls = 0
  // Which sample each release followed: the number of pressure sweeps that released anything.
  const releasingSweeps = new Set<number>()
  const candidate = (runtime: FakeRuntime): RuntimeCandidate => ({
    identity: runtime.identity,
    agentId: runtime.agentId,
    parentAgentId: undefined,
    provider: "bench",
    sessionId: `session-${runtime.agentId}`,
    lastActivityAt: runtime.lastActivityAt,
    blockers: Effect.sync(() => runtime.blocked ? [blocker("foreground-turn")] : noBlockers),
    process: { pid: runtime.pid, startTime: 1 },
    // A provider's veto probe that takes a little time, as a real one does.
    canStopRuntime: Effect.as(Effect.sleep(`${probeMillis} millis`), stopPermitted),
    closeIfEligible: (revalidate) =>
      Effect.gen(function*() {
        if (!(yield* revalidate)) return false
        runtime.closed = true
        releasingSweeps.add(sampleCalls)
        return true
      })
  })
  const live = () => runtimes.filter((runtime) => !runtime.closed)
  const services = {
    candidates: RuntimeCandidates.of({
      capture: Effect.sync(() => live().map(candidate)),
      captureFamily: (agentId) =>
        Effect.sync(() => live().filter((runtime) => runtime.agentId === agentId).map(candidate))
    }),
    inspection: ProcessInspection.of({
      sample: () => Effect.succeedNone,
      sampleAll: (pids) =>
        Effect.sync(() => {
          sampleCalls++
          return new Map(pids.map((pid) => {
            const runtime = byPid.get(pid)
            return [pid, runtime === undefined || runtime.closed
              ? Option.none()
              : Option.some({ pid, startTime: 1, rssBytes: runtime.rss, measuredProcesses: 1, unmeasuredProcesses: 0 })]
          }))
        })
    })
  }
  return { runtimes, live, services, sampleCalls: () => sampleCalls, releasingSweeps: () => releasingSweeps.size }
}

const quiet = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provideService(effect, References.MinimumLogLevel, "Error")

const collectorOver = (world: ReturnType<typeof fleet>, options: RuntimeCollectorOptions, scope: Scope.Scope) =>
  run(
    makeRuntimeCollector({ tickInterval: "3650 days", ...options }).pipe(
      Effect.provideService(RuntimeCandidates, world.services.candidates),
      Effect.provideService(CallerProtection, { isProtected: () => Effect.succeed(false) }),
      Effect.provideService(ProcessInspection, world.services.inspection),
      // The episode's own log lines (start, releases, what holds the memory) are not the table.
      quiet,
      Scope.provide(scope)
    )
  )

/**
 * 85 idle runtimes of 100 MiB (8.3 GiB: between low 8 GiB and high 9 GiB, so nothing happens),
 * samples every second. At a random point between samples 10 more start (just active): usage
 * crosses high. Measured from then until the live total is under low: time, the pressure sweeps
 * that released anything, and the bytes given back for those owed.
 */
const episode = async (probeMillis: number) => {
  const world = fleet(95, 100 * mib, probeMillis)
  const arriving = world.runtimes.slice(85)
  for (const runtime of arriving) runtime.closed = true
  const scope = Effect.runSync(Scope.make())
  const interval = 1000
  await collectorOver(world, {
    memory: { high: 9 * gib, low: 8 * gib, minIdle: "2 minutes", sampleInterval: `${interval} millis` }
  }, scope)
  try {
    await new Promise((resolve) => setTimeout(resolve, interval * (1 + Math.random())))
    const total = () => world.live().reduce((sum, runtime) => sum + runtime.rss, 0)
    const crossedAt = performance.now()
    for (const runtime of arriving) {
      runtime.lastActivityAt = Date.now()
      runtime.closed = false
    }
    const peak = total()
    const owed = peak - 8 * gib
    while (total() > 8 * gib && performance.now() - crossedAt < 10 * interval) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    const elapsed = performance.now() - crossedAt
    const sweeps = world.releasingSweeps()
    return { elapsed, sweeps, givenBack: peak - total(), owed, interval }
  } finally {
    await run(Scope.close(scope, Exit.void))
  }
}

/** One budget sample (no pressure) over `count` runtimes: the collector's cost, and sampleAll calls per check. */
const sampleCost = async (count: number, underPressure: boolean) => {
  const world = fleet(count, 100 * mib)
  // Under pressure with every runtime busy: the sweep evaluates all of them and releases none.
  if (underPressure) for (const runtime of world.runtimes) runtime.blocked = true
  const scope = Effect.runSync(Scope.make())
  const collector = await collectorOver(world, {
    memory: underPressure
      ? { high: 1 * gib, low: 512 * mib, sampleInterval: "3650 days" }
      : { high: 1000 * gib, low: 900 * gib, sampleInterval: "3650 days" }
  }, scope)
  try {
    const before = world.sampleCalls()
    const times = await sample(() => run(quiet(collector.checkMemory)), { warmup: 5, samples: 51 })
    return { ms: median(times), callsPerCheck: (world.sampleCalls() - before) / 56 }
  } finally {
    await run(Scope.close(scope, Exit.void))
  }
}

export const memoryBench = async (): Promise<ReadonlyArray<BenchRow>> => {
  const runs = []
  for (let i = 0; i < 3; i++) runs.push(await episode(20))
  const slowProbes = []
  for (let i = 0; i < 3; i++) slowProbes.push(await episode(1000))
  const slowest = slowProbes.reduce((a, b) => (b.elapsed > a.elapsed ? b : a))
  const slowSweeps = Math.max(...slowProbes.map((r) => r.sweeps))
  const worst = runs.reduce((a, b) => (b.elapsed > a.elapsed ? b : a))
  const maxSweeps = Math.max(...runs.map((r) => r.sweeps))
  const calm = await sampleCost(1_000, false)
  const stuck = await sampleCost(1_000, true)
  return [
    {
      name: "memory pressure: 85 + 10 runtimes x 100 MiB cross high 9 GiB, low 8 GiB, 1 s samples: sweeps to get under low (worst of 3)",
      value: `${maxSweeps} sweep${maxSweeps === 1 ? "" : "s"}`,
      target: "1",
      ok: maxSweeps === 1
    },
    {
      name: "memory pressure: crossing high -> under low, as a ratio of the 1 s sample interval (worst of 3)",
      value: `${(worst.elapsed / worst.interval).toFixed(2)}x (${worst.elapsed.toFixed(0)} ms)`,
      target: "< 2x",
      ok: worst.elapsed < 2 * worst.interval
    },
    {
      name: "memory pressure, as above with 1 s provider probes: sweeps, and crossing -> under low (worst of 3)",
      value: `${slowSweeps} sweep${slowSweeps === 1 ? "" : "s"}, ${(slowest.elapsed / 1000).toFixed(2)}x the probe (${slowest.elapsed.toFixed(0)} ms)`,
      target: "1 sweep, < 2x",
      ok: slowSweeps === 1 && slowest.elapsed < 2000
    },
    {
      name: "memory pressure: given back / owed (high -> low)",
      value: `${(worst.givenBack / gib).toFixed(2)} GiB / ${(worst.owed / gib).toFixed(2)} GiB = ${(worst.givenBack / worst.owed).toFixed(2)}`,
      target: "<= owed + one runtime",
      ok: worst.givenBack >= worst.owed && worst.givenBack <= worst.owed + 100 * mib
    },
    {
      name: "memory budget sample, 1,000 runtimes, no pressure: collector cost (sampleAll calls per check)",
      value: `${calm.ms.toFixed(2)} ms (${calm.callsPerCheck})`,
      target: "<= 10 ms, 1 call",
      ok: calm.ms <= 10 && calm.callsPerCheck === 1
    },
    {
      name: "memory budget sample, 1,000 runtimes, pressure, every runtime busy: collector cost",
      value: `${stuck.ms.toFixed(2)} ms (${stuck.callsPerCheck})`,
      target: "<= 20 ms, 1 call",
      ok: stuck.ms <= 20 && stuck.callsPerCheck === 1
    }
  ]
}

if (import.meta.main) {
  const { printTable } = await import("./table.ts")
  printTable(await memoryBench())
}
