import { Schema } from "effect"

/** The ledger's agent id for a warm process of `provider`, which no agent holds yet. */
export const warmLedgerId = (provider: string): string => `warm:${provider}`

/** The most warm processes one provider may keep: each is a live process holding memory. */
export const maxWarmReserve = 64

/** A provider's warm reserve target: how many started processes without a session it keeps ready. */
export const WarmReserveSize = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: maxWarmReserve })).pipe(
  Schema.annotate({ description: `How many started, unbound processes to keep ready (0 to ${maxWarmReserve}).` })
)

/** One warm process: started and handshaken, holding no session. */
export const WarmProcessView = Schema.Struct({
  pid: Schema.Number,
  /** When it became ready, epoch ms. */
  readyAt: Schema.Number,
  /** Past the reserve's idle limit: it is replaced, and closed once its replacement is ready. */
  expiring: Schema.Boolean
})
export type WarmProcessView = typeof WarmProcessView.Type

/** One provider's reserve: its target, what is ready and starting, and why starting last failed. */
export const WarmReserveView = Schema.Struct({
  provider: Schema.String,
  target: WarmReserveSize,
  ready: Schema.Array(WarmProcessView),
  /** Processes starting now (growing, refilling after a take, or replacing an expiring one). */
  starting: Schema.Number,
  /** The last start's failure while the reserve is below its target; null once a start succeeds. */
  lastFailure: Schema.NullOr(Schema.String),
  /** When the next start is tried after failures (epoch ms); null when not backing off. */
  retryAt: Schema.NullOr(Schema.Number)
})
export type WarmReserveView = typeof WarmReserveView.Type
