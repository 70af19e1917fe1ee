import * as RuntimeCollectorLive from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import type { ProviderRegistrationRefused } from "../../../src/domain/errors.ts"
import { Context, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { FakeCallerProtection } from "../../../src/testing/FakeRuntimes.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { AgentStore } from "../../../src/services/AgentStore.ts"
import { RuntimeCollector, type RuntimeCollectorOptions } from "../../../src/services/RuntimeCollector.ts"
import type { TurnJournal } from "../../../src/services/TurnJournal.ts"
import type { NewAgentLabels } from "../../../src/domain/agent.ts"

export const minutes = (n: number) => n * 60_000

export interface HarnessOptions {
  readonly provider?: MemoryProvider
  readonly protection?: FakeCallerProtection
  readonly store?: Layer.Layer<AgentStore, unknown>
  /** The turn journal; in memory by default. */
  readonly journal?: Layer.Layer<TurnJournal, unknown>
  readonly collector?: RuntimeCollectorOptions
  readonly registry?: AgentRegistryLive.AgentRegistryOptions
  /** More providers, each a layer that registers itself. */
  readonly extraProviders?: Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry>
}

/**
 * A registry over the in-memory provider and a store, with a collector over the registry.
 * Scheduled ticks are out of reach unless asked for, so sweeps happen where a test says.
 */
export const harness = Effect.fnUntraced(function*(options: HarnessOptions = {}) {
  const provider = options.provider ?? new MemoryProvider("codex")
  const protection = options.protection ?? new FakeCallerProtection()
  const registryLayer = AgentRegistryLive.layerWith(options.registry ?? {}).pipe(
    Layer.provide([
      options.store ?? AgentStoreMemory.layer,
      options.journal ?? TurnJournalMemory.layer,
      RuntimeLedgerMemory.layer,
      Layer.mergeAll(provider.layer, options.extraProviders ?? Layer.empty).pipe(Layer.provideMerge(ProviderRegistry.layer))
    ])
  )
  const collectorLayer = RuntimeCollectorLive.layer({ tickInterval: "3650 days", ...options.collector }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, protection.layer])
  )
  const context = yield* Layer.build(collectorLayer.pipe(Layer.provideMerge(registryLayer)))
  const registry = Context.get(context, AgentRegistry)
  const collector = Context.get(context, RuntimeCollector)
  const sweepAt = (minute: number) => TestClock.setTime(minutes(minute)).pipe(Effect.andThen(collector.sweep))
  const create = (fields: NewAgentLabels = {}) => registry.create({ provider: provider.provider, cwd: "/work", ...fields })
  return { provider, protection, registry, collector, sweepAt, create }
})
