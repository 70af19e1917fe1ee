/**
 * The core of Quiesce: the domain, the service contracts, the idle runtime collector, the agent
 * registry, message delivery, finish subscriptions and the stores (in memory and on SQLite).
 * Providers, the daemon, the cluster and the test doubles have entries of their own
 * (`quiesce/providers/<name>`, `quiesce/daemon`, `quiesce/cluster`, `quiesce/testing`), so a host
 * that uses the collector alone loads none of their dependencies.
 *
 * @module
 */

// Domain: data, schemas and typed errors.
export * from "./domain/agent.ts"
export * from "./domain/blocker.ts"
export * from "./domain/byteSize.ts"
export type * from "./domain/candidate.ts"
export * from "./domain/config.ts"
export * from "./domain/errors.ts"
export * from "./domain/finish.ts"
export * from "./domain/goDuration.ts"
export * from "./domain/memory.ts"
export * as PluginProtocol from "./domain/pluginProtocol.ts"
export type * from "./domain/provider.ts"
export { stopPermitted, stopVetoed, stopWorkUnknown } from "./domain/provider.ts"
export * from "./domain/runtimeProcess.ts"
export * from "./domain/retirement.ts"
export * from "./domain/sweep.ts"
export * from "./domain/turn.ts"
export * from "./domain/warmReserve.ts"

// Services: the contracts a host composes.
export * from "./services/ActivityClock.ts"
export * from "./services/AgentClose.ts"
export * from "./services/AgentOperations.ts"
export * from "./services/AgentRegistry.ts"
export * from "./services/AgentStore.ts"
export * from "./services/CallerProtection.ts"
export * from "./services/FinishStore.ts"
export * from "./services/FinishSubscriptions.ts"
export * from "./services/HostMemory.ts"
export * from "./services/MessageDelivery.ts"
export * from "./services/ProcessInspection.ts"
export * from "./services/ProviderRegistry.ts"
export * from "./services/RemoteFinishes.ts"
export * from "./services/RuntimeCandidates.ts"
export * from "./services/RuntimeCollector.ts"
export * from "./services/RuntimeLedger.ts"
export * from "./services/TurnJournal.ts"
export * from "./services/WarmReserve.ts"

// Layers: the implementations.
export * as AgentRegistryLive from "./layers/registry/AgentRegistryLive.ts"
export * as AgentStoreMemory from "./layers/store/AgentStoreMemory.ts"
export * as CallerProtectionLive from "./layers/collector/CallerProtectionLive.ts"
export * as FinishStoreMemory from "./layers/store/FinishStoreMemory.ts"
export * as FinishSubscriptionsLive from "./layers/finish/FinishSubscriptionsLive.ts"
export * as HostMemoryProcfs from "./layers/host/HostMemoryProcfs.ts"
export * as LeftoverRuntimes from "./layers/host/leftoverRuntimes.ts"
export * as MessageDeliveryLive from "./layers/delivery/MessageDeliveryLive.ts"
export * as CheckedClose from "./layers/registry/checkedClose.ts"
export * as RuntimeCollectorLive from "./layers/collector/RuntimeCollectorLive.ts"
export * as RegistryOperations from "./layers/registry/registryOperations.ts"
export * as Metrics from "./layers/metrics/Metrics.ts"
export * as ProcessInspectionProcfs from "./layers/host/ProcessInspectionProcfs.ts"
export * as RuntimeLedgerMemory from "./layers/store/RuntimeLedgerMemory.ts"
export * as SqliteClient from "./layers/store/SqliteClient.ts"
export * as SqliteDatabase from "./layers/store/SqliteDatabase.ts"
export * as SqliteRuntimeLedger from "./layers/store/SqliteRuntimeLedger.ts"
export * as StoresMemory from "./layers/store/StoresMemory.ts"
export * as TurnJournalMemory from "./layers/store/TurnJournalMemory.ts"
export * as WarmReserveLive from "./layers/reserve/WarmReserveLive.ts"
