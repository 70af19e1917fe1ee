/**
 * A daemon's whole service graph (registry, delivery, finish subscriptions, collector, lifecycle)
 * over in-memory stores and the in-memory provider, for tests under TestClock.
 */
import { Effect, Layer, Option } from "effect"
import type { DaemonIdentity, EffectiveIdleTimeout } from "../../src/domain/retirement.ts"
import { MemoryProvider, providerRegistryWith } from "../../src/testing/MemoryProvider.ts"
import * as StoresMemory from "../../src/layers/store/StoresMemory.ts"
import { daemonServices } from "../../src/programs/daemon.ts"
import type { AgentStore } from "../../src/services/AgentStore.ts"
import type { FinishStore } from "../../src/services/FinishStore.ts"
import { ProcessInspection } from "../../src/services/ProcessInspection.ts"
import type { RuntimeLedger } from "../../src/services/RuntimeLedger.ts"
import type { TurnJournal } from "../../src/services/TurnJournal.ts"

/** Process inspection that never knows a process. */
export const noInspection = Layer.succeed(
  ProcessInspection,
  ProcessInspection.of({
    sample: () => Effect.succeedNone,
    sampleAll: (pids) => Effect.succeed(new Map(pids.map((pid) => [pid, Option.none()])))
  })
)

export const identityWith = (idleTimeout: EffectiveIdleTimeout): DaemonIdentity => ({
  pid: 1234,
  startTime: 5678,
  instanceId: "test-instance",
  host: "127.0.0.1",
  port: 7377,
  protocolVersion: 1,
  packageVersion: "0.0.0-test",
  idleTimeout
})

export const noTimer: EffectiveIdleTimeout = { value: null, millis: null, source: "omitted" }

export interface MemoryDaemonOptions {
  readonly provider?: MemoryProvider | undefined
  readonly idleTimeout?: EffectiveIdleTimeout | undefined
  /** Stores instead of fresh in-memory ones (shared state across two daemons, or a failing store). */
  readonly stores?: Layer.Layer<AgentStore | FinishStore | TurnJournal | RuntimeLedger> | undefined
}

/** The services of a daemon over `provider`; scheduled sweeps are out of reach (a test sweeps itself). */
export const memoryDaemon = (options: MemoryDaemonOptions = {}) =>
  daemonServices({
    stores: options.stores ?? StoresMemory.layer,
    providers: providerRegistryWith(options.provider ?? new MemoryProvider("codex")),
    inspection: noInspection,
    collector: { tickInterval: "3650 days" },
    // Tests send one message at a time: no batching window to wait out.
    delivery: { batchWindow: "1 millis" },
    identity: identityWith(options.idleTimeout ?? noTimer)
  })
