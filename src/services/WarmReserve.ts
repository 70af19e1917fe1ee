import { Context, Effect, Option } from "effect"
import { type InvalidWarmReserveSize, type ProviderNotFound, WarmReserveUnsupported } from "../domain/errors.ts"
import type { WarmProcess } from "../domain/provider.ts"
import type { WarmReserveView } from "../domain/warmReserve.ts"

/** A warm process taken for one agent's runtime. */
export interface TakenWarmProcess {
  readonly process: WarmProcess
  /** The marker its processes carry: the runtime's `SessionConfig.runtimeMarker`. */
  readonly marker: string
  /**
   * Tells the reserve the runtime's own ledger entry now covers the process, so the reserve drops
   * its entry. Until then (and when the bind fails) the reserve's entry stays, so a crash in
   * between still leaves the process findable.
   */
  readonly handOver: Effect.Effect<void>
}

/**
 * Per provider, a reserve of started processes that hold no session yet (H4), so that creating or
 * resuming an agent binds one instead of starting a process. Only providers with
 * `AgentClient.startWarm` can keep one. A taken process belongs to its agent from then on (the
 * collector releases it like any runtime) and the reserve starts its replacement at once; so a
 * resize only ever closes processes without a session, and never interrupts a turn.
 *
 * A `Context.Reference`: a host that composes no reserve gets one that is always empty (and refuses a resize).
 */
export interface WarmReserveService {
  /** A ready process of the provider, or none (then the caller starts one as usual). */
  readonly take: (provider: string) => Effect.Effect<Option.Option<TakenWarmProcess>>
  /** Sets the provider's target: growing starts processes at once, shrinking closes idle ones. */
  readonly resize: (
    provider: string,
    target: number
  ) => Effect.Effect<WarmReserveView, ProviderNotFound | WarmReserveUnsupported | InvalidWarmReserveSize>
  /** Every provider with a reserve (a target above 0, or processes still there). */
  readonly reserves: Effect.Effect<ReadonlyArray<WarmReserveView>>
  /** Begins filling the configured targets; called once leftovers of a previous daemon are ended. */
  readonly open: Effect.Effect<void>
  /** Closes every idle process and keeps none from now on (a host's shutdown); the layer's end does it too. */
  readonly close: Effect.Effect<void>
}

/** The warm reserve service; without a layer that provides one, it is always empty and refuses a resize. */
export const WarmReserve = Context.Reference<WarmReserveService>("quiesce/WarmReserve", {
  defaultValue: () => ({
    take: () => Effect.succeedNone,
    resize: (provider) =>
      Effect.fail(new WarmReserveUnsupported({ provider, message: "This host keeps no warm reserve" })),
    reserves: Effect.succeed([]),
    open: Effect.void,
    close: Effect.void
  })
})
