import { Duration, Effect, Layer } from "effect"
import type { QuiesceConfig } from "../domain/config.ts"
import * as CallerProtectionLive from "../layers/collector/CallerProtectionLive.ts"
import * as MessageDeliveryLive from "../layers/delivery/MessageDeliveryLive.ts"
import * as FinishSubscriptionsLive from "../layers/finish/FinishSubscriptionsLive.ts"
import { Home } from "../layers/host/Home.ts"
import * as ProcessInspectionProcfs from "../layers/host/ProcessInspectionProcfs.ts"
import * as AgentRegistryLive from "../layers/registry/AgentRegistryLive.ts"
import * as SqliteDatabase from "../layers/store/SqliteDatabase.ts"
import { providersLayer } from "./providers.ts"
import { ProviderRegistry } from "../services/ProviderRegistry.ts"
import { RemoteFinishes } from "../services/RemoteFinishes.ts"
import { RuntimeCollector } from "../services/RuntimeCollector.ts"

/**
 * Every service of a daemon, over one home (H1): storage first, then the registry over the
 * providers, message delivery and finish subscriptions over the registry, and the collector over
 * all of them. Layers close in reverse (H3): the collector's sweeps stop, finish subscriptions
 * close, delivery flushes, every runtime is released resumable, the store closes.
 */
export const servicesLayer = (home: Home["Service"], config: QuiesceConfig) => {
  const providers = providersLayer(config, home).pipe(Layer.provideMerge(ProviderRegistry.layer))
  const stores = SqliteDatabase.layerStores(home.databaseFile)
  const registry = AgentRegistryLive.layerWith({ turnRetention: config.agents.turnRetention }).pipe(
    Layer.provideMerge(Layer.mergeAll(stores, providers, ProcessInspectionProcfs.layer()))
  )
  const delivery = MessageDeliveryLive.layer().pipe(Layer.provideMerge(registry))
  const finish = FinishSubscriptionsLive.layer().pipe(
    Layer.provide(RemoteFinishes.layerUnavailable),
    Layer.provideMerge(delivery)
  )
  const collector = RuntimeCollector.layer({
    enabled: config.agents.idleRuntimeCleanup,
    idlePeriod: config.agents.idlePeriod,
    tickInterval: config.agents.sweepInterval,
    probeTimeout: config.agents.probeTimeout,
    probeConcurrency: config.agents.probeConcurrency
  }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, CallerProtectionLive.layer]),
    Layer.provideMerge(finish)
  )
  return collector
}

/** One log line once the daemon is ready, with where it listens. */
export const logReady = (home: Home["Service"], config: QuiesceConfig) =>
  Effect.logInfo(`Quiesce ready on http://${config.daemon.host}:${config.daemon.port}`).pipe(
    Effect.annotateLogs({
      home: home.root,
      idlePeriod: Duration.format(config.agents.idlePeriod),
      idleRuntimeCleanup: config.agents.idleRuntimeCleanup
    })
  )
