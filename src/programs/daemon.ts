import * as AgentEventsLive from "../layers/events/AgentEventsLive.ts"
import * as RuntimeCollectorLive from "../layers/collector/RuntimeCollectorLive.ts"
import { Duration, Effect, Layer } from "effect"
import { formatByteSize } from "../domain/byteSize.ts"
import { type QuiesceConfig, warmReserveTargets } from "../domain/config.ts"
import type { ProviderRegistrationRefused } from "../domain/errors.ts"
import * as CallerProtectionLive from "../layers/collector/CallerProtectionLive.ts"
import * as MessageDeliveryLive from "../layers/delivery/MessageDeliveryLive.ts"
import * as FinishSubscriptionsLive from "../layers/finish/FinishSubscriptionsLive.ts"
import { Home } from "../services/Home.ts"
import * as HostMemoryProcfs from "../layers/host/HostMemoryProcfs.ts"
import * as ProcessInspectionProcfs from "../layers/host/ProcessInspectionProcfs.ts"
import * as AgentRegistryLive from "../layers/registry/AgentRegistryLive.ts"
import * as CheckedClose from "../layers/registry/checkedClose.ts"
import * as RegistryOperations from "../layers/registry/registryOperations.ts"
import * as WarmReserveLive from "../layers/reserve/WarmReserveLive.ts"
import { providersLayer } from "./providers.ts"
import { ProviderRegistry } from "../services/ProviderRegistry.ts"
import { RemoteFinishes } from "../services/RemoteFinishes.ts"
import type { RuntimeCollectorOptions } from "../services/RuntimeCollector.ts"
import type { AgentOperations } from "../services/AgentOperations.ts"
import type { AgentRegistry } from "../services/AgentRegistry.ts"
import type { MemoryBudgetOptions } from "../domain/memory.ts"
import type { AgentStore } from "../services/AgentStore.ts"
import type { FinishStore } from "../services/FinishStore.ts"
import type { HostMemory } from "../services/HostMemory.ts"
import type { ProcessInspection } from "../services/ProcessInspection.ts"
import type { RuntimeLedger } from "../services/RuntimeLedger.ts"
import type { TurnJournal } from "../services/TurnJournal.ts"
import { type DaemonIdentity, deliveryCloseTimeout, describeIdleTimeout } from "../domain/retirement.ts"
import * as DaemonLifecycleLive from "../layers/retirement/DaemonLifecycleLive.ts"
import { ActivityClock } from "../services/ActivityClock.ts"
import { InFlightRequests } from "../services/InFlightRequests.ts"

/** What a daemon's services are composed over: the parts a test swaps for in-memory ones. */
export interface DaemonParts<E> {
  readonly stores: Layer.Layer<AgentStore | FinishStore | TurnJournal | RuntimeLedger, E>
  /** The providers, already registered in a `ProviderRegistry` (sealed here, before anything opens). */
  readonly providers: Layer.Layer<ProviderRegistry, ProviderRegistrationRefused>
  readonly inspection: Layer.Layer<ProcessInspection>
  /** The host's available memory, for a budget's `minAvailable`; default: procfs and the cgroup v2 hierarchy. */
  readonly hostMemory?: Layer.Layer<HostMemory> | undefined
  readonly collector: RuntimeCollectorOptions
  readonly registry?: AgentRegistryLive.AgentRegistryOptions | undefined
  /** Warm processes kept ready per provider (H4); none when omitted. */
  readonly warmReserve?: WarmReserveLive.WarmReserveOptions | undefined
  readonly delivery?: MessageDeliveryLive.MessageDeliveryOptions | undefined
  /**
   * The operations on one agent that message delivery, finish subscriptions and the API use:
   * this registry's (the default), or a cluster runner's, which go to each agent's host.
   */
  readonly operations?: Layer.Layer<AgentOperations, never, AgentRegistry> | undefined
  readonly identity: DaemonIdentity
  /** How long requests in flight may take to leave after a retirement commits. */
  readonly drainTimeout?: Duration.Input | undefined
}

/**
 * Every service of a daemon (H1): storage first, then the registry over the providers, message
 * delivery and finish subscriptions over the registry, the collector over all of them, and the
 * daemon's lifecycle (its idle timer) over everything. Layers close in reverse (H3): the timer
 * stops, the collector's sweeps stop, finish subscriptions close, delivery flushes, every runtime
 * is released resumable, the store closes.
 */
export const daemonServices = <E>(parts: DaemonParts<E>) => {
  // Shared by every part that does work (they note it) and the idle timer (it reads it); the agents' live events beside them.
  const activity = Layer.mergeAll(ActivityClock.layer, InFlightRequests.layer, AgentEventsLive.layer)
  const providers = Layer.mergeAll(parts.stores, ProviderRegistry.sealed.pipe(Layer.provideMerge(parts.providers)))
  const reserve = WarmReserveLive.layer(parts.warmReserve).pipe(Layer.provideMerge(providers))
  const registry = AgentRegistryLive.layerWith(parts.registry ?? {}).pipe(
    Layer.provideMerge(Layer.mergeAll(reserve, parts.inspection, activity))
  )
  const operations = (parts.operations ?? RegistryOperations.layer).pipe(Layer.provideMerge(registry))
  // The reserve starts filling once the registry has ended what a previous daemon left.
  const delivery = MessageDeliveryLive.layer(parts.delivery).pipe(
    Layer.provideMerge(WarmReserveLive.opened.pipe(Layer.provideMerge(operations)))
  )
  const finish = FinishSubscriptionsLive.layer().pipe(
    Layer.provide(RemoteFinishes.layerUnavailable),
    Layer.provideMerge(delivery)
  )
  const collector = RuntimeCollectorLive.layer(parts.collector).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, CallerProtectionLive.layer, parts.hostMemory ?? HostMemoryProcfs.layer()]),
    Layer.provideMerge(finish)
  )
  const lifecycle = DaemonLifecycleLive.layer({ identity: parts.identity, drainTimeout: parts.drainTimeout }).pipe(
    Layer.provideMerge(collector)
  )
  // An explicit close asks this daemon's collector first; a cluster's runner replaces it.
  return CheckedClose.layer.pipe(Layer.provideMerge(lifecycle))
}

/** The collector's memory budget from `agents.memory` and `agents.maxResident`; none when neither is set. */
export const memoryBudgetOf = (config: QuiesceConfig): MemoryBudgetOptions | undefined => {
  const memory = config.agents.memory
  const maxResident = config.agents.maxResident
  if (memory === undefined && maxResident === undefined) return undefined
  return {
    high: memory?.high,
    low: memory?.low,
    minAvailable: memory?.minAvailable,
    maxResident,
    minIdle: memory?.minIdle,
    sampleInterval: memory?.sampleInterval
  }
}

/** Every service of a daemon over one home, as configured, over its stores (the home's SQLite file's, opened and migrated). */
export const servicesLayer = <E>(
  home: Home["Service"],
  config: QuiesceConfig,
  identity: DaemonIdentity,
  stores: Layer.Layer<AgentStore | FinishStore | TurnJournal | RuntimeLedger, E>,
  operations?: Layer.Layer<AgentOperations, never, AgentRegistry>
) =>
  daemonServices({
    stores,
    operations,
    providers: providersLayer(config, home).pipe(Layer.provideMerge(ProviderRegistry.layer)),
    inspection: ProcessInspectionProcfs.layer(),
    collector: {
      enabled: config.agents.idleRuntimeCleanup,
      idlePeriod: config.agents.idlePeriod,
      tickInterval: config.agents.sweepInterval,
      probeTimeout: config.agents.probeTimeout,
      probeConcurrency: config.agents.probeConcurrency,
      memory: memoryBudgetOf(config)
    },
    registry: { turnRetention: config.agents.turnRetention, sharedStore: config.cluster !== undefined },
    warmReserve: { targets: warmReserveTargets(config) },
    // Within the shutdown deadline's margin (retirement.ts).
    delivery: { closeTimeout: deliveryCloseTimeout },
    identity
  })

/** The memory budget in words, for the ready line: "none", or its watermarks. */
const describeMemoryBudget = (config: QuiesceConfig): string => {
  const memory = config.agents.memory
  const parts = [
    ...(memory?.high === undefined || memory.low === undefined
      ? []
      : [`RSS high ${formatByteSize(memory.high)}, low ${formatByteSize(memory.low)}`]),
    ...(memory?.minAvailable === undefined ? [] : [`min available ${formatByteSize(memory.minAvailable)}`]),
    ...(config.agents.maxResident === undefined ? [] : [`max ${config.agents.maxResident} resident`])
  ]
  return parts.length === 0 ? "none" : parts.join(", ")
}

/** One log line once the daemon is ready, with where it listens. */
export const logReady = (home: Home["Service"], config: QuiesceConfig, identity: DaemonIdentity) =>
  Effect.logInfo(`Quiesce ready on http://${identity.host}:${identity.port}`).pipe(
    Effect.annotateLogs({
      home: home.root,
      // Since the process started: Node's own start, loading the code, and the open.
      startedIn: `${Math.round(performance.now())}ms`,
      shutdownDeadline: identity.shutdownDeadlineMillis === undefined
        ? "unrecorded"
        : Duration.format(Duration.millis(identity.shutdownDeadlineMillis)),
      idlePeriod: Duration.format(config.agents.idlePeriod),
      idleRuntimeCleanup: config.agents.idleRuntimeCleanup,
      memoryBudget: describeMemoryBudget(config),
      daemonIdleTimeout: describeIdleTimeout(identity.idleTimeout)
    })
  )
