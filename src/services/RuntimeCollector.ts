import { Context, type Duration, type Effect, type Option } from "effect"
import type { RuntimeNotFound } from "../domain/errors.ts"
import type { MemoryBudgetOptions, MemoryStatus } from "../domain/memory.ts"
import type { RetirementBlocker } from "../domain/retirement.ts"
import type { CollectOutcome, Residency, SweepReport } from "../domain/sweep.ts"

/** How the collector decides and sweeps; every option has a default. */
export interface RuntimeCollectorOptions {
  /** `agents.idleRuntimeCleanup`; false disables ticks and sweeps (C3). Default true. */
  readonly enabled?: boolean | undefined
  /** How long a runtime must stay idle before release (C1). Default 1 hour. */
  readonly idlePeriod?: Duration.Input | undefined
  /** How often the scheduled sweep runs. Default 1 minute. */
  readonly tickInterval?: Duration.Input | undefined
  /** How long a provider veto probe may take before it counts as a failure (C6). Default 10 s. */
  readonly probeTimeout?: Duration.Input | undefined
  /** How many families are probed, and how many runtimes closed, at once (X4). Default 16. */
  readonly probeConcurrency?: number | undefined
  /**
   * A memory budget (docs/collector.md): under pressure, runtimes safe right now are released
   * least recently active first. RSS comes from a `ProcessInspection` in the context (for
   * candidates that name their `process`), else from each candidate's `residentBytes`; the
   * `minAvailable` floor reads `HostMemory` from the context. Off when omitted.
   */
  readonly memory?: MemoryBudgetOptions | undefined
}

/** How to explain a runtime: `probe` asks its family's providers now instead of showing the last answer. */
export interface ExplainOptions {
  readonly probe?: boolean | undefined
}

/**
 * Decides when idle runtimes may be released, and asks their owner to release them.
 * It owns the idle clocks, the eligibility policy, probe timeouts and the sweep fiber.
 */
export class RuntimeCollector extends Context.Service<RuntimeCollector, {
  /** One pass over every live runtime. Single-flight: a sweep requested while one runs joins it. */
  readonly sweep: Effect.Effect<SweepReport>
  /** Collects one runtime now, ignoring the idle period but keeping every other check (X2). */
  readonly collectNow: (agentId: string) => Effect.Effect<CollectOutcome, RuntimeNotFound>
  /**
   * The current residency of one live runtime: blockers, veto, idle since, earliest release (X1).
   * The veto is the last probe's; with `probe`, the family's providers are asked fresh first
   * (each within the probe timeout), and what they answer is what later explanations show too.
   */
  readonly explain: (agentId: string, options?: ExplainOptions) => Effect.Effect<Residency, RuntimeNotFound>
  /**
   * For a daemon's retirement: what would keep any resident runtime from being released now, the
   * idle period aside — baselines, missing persistence, and each provider's veto: asked fresh with
   * `probe`, else as its last probe answered (with since when it has held). Empty when every
   * runtime could be released. Closes nothing. Caller protection is
   * left to the daemon, which knows which of what callers are owed survives it.
   */
  readonly retirementBlockers: (probe: boolean) => Effect.Effect<ReadonlyArray<RetirementBlocker>>
  /**
   * Samples the memory budget now and, under pressure, runs one pressure sweep: runtimes safe
   * right now, idle for `minIdle`, least recently active first, until usage is under the low
   * watermark. Runs on its own every `sampleInterval`; empty without a budget.
   */
  readonly checkMemory: Effect.Effect<SweepReport>
  /** The budget and the resident runtimes against it, as of the last sample; `None` without a budget. */
  readonly memory: Effect.Effect<Option.Option<MemoryStatus>>
  /** For a daemon's retirement: releases every resident runtime as a collection; `remaining` were not. */
  readonly releaseAll: Effect.Effect<{ readonly report: SweepReport; readonly remaining: ReadonlyArray<string> }>
}>()("quiesce/collector/RuntimeCollector") {}
