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
  const idlePeriodMillis = Duration.toMillis(
    Duration.fromInputUnsafe(options.idlePeriod ?? defaultCollectorOptions.idlePeriod)
  )
  const tickInterval = Duration.fromInputUnsafe(options.tickInterval ?? defaultCollectorOptions.tickInterval)
  for (const [name, millis] of [
    ["idlePeriod", idlePeriodMillis],
    ["tickInterval", Duration.toMillis(tickInterval)],
    ["probeTimeout", Duration.toMillis(probeTimeout)]
  ] as const) {
    if (!(millis > 0)) throw new RangeError(`${name} must be a positive duration, got ${millis} ms`)
  }
  return {
    enabled: options.enabled ?? defaultCollectorOptions.enabled,
    idlePeriodMillis,
    tickInterval,
    probeTimeout,
    probeTimeoutMillis: Duration.toMillis(probeTimeout),
    probeConcurrency
  }
}
