import { Duration } from "effect"
import type { RuntimeCollectorOptions } from "../../services/RuntimeCollector.ts"

export interface CollectorSettings {
  readonly enabled: boolean
  readonly idlePeriodMillis: number
  readonly tickInterval: Duration.Duration
  readonly probeTimeout: Duration.Duration
  readonly probeTimeoutMillis: number
  readonly probeConcurrency: number
}

export const defaultCollectorOptions = {
  enabled: true,
  idlePeriod: "1 hour",
  tickInterval: "1 minute",
  probeTimeout: "10 seconds",
  probeConcurrency: 16
} as const

export const resolveCollectorSettings = (options: RuntimeCollectorOptions = {}): CollectorSettings => {
  const probeTimeout = Duration.fromInputUnsafe(options.probeTimeout ?? defaultCollectorOptions.probeTimeout)
  const probeConcurrency = options.probeConcurrency ?? defaultCollectorOptions.probeConcurrency
  if (!Number.isInteger(probeConcurrency) || probeConcurrency < 1) {
    throw new RangeError(`probeConcurrency must be a positive integer, got ${probeConcurrency}`)
  }
  return {
    enabled: options.enabled ?? defaultCollectorOptions.enabled,
    idlePeriodMillis: Duration.toMillis(
      Duration.fromInputUnsafe(options.idlePeriod ?? defaultCollectorOptions.idlePeriod)
    ),
    tickInterval: Duration.fromInputUnsafe(options.tickInterval ?? defaultCollectorOptions.tickInterval),
    probeTimeout,
    probeTimeoutMillis: Duration.toMillis(probeTimeout),
    probeConcurrency
  }
}
