/**
 * The hub's daemons as the hub shows them and acts on them: the resident inventory (one row per
 * home), the identity an operator's action names, a force stop's outcome, and a request the hub
 * routes to a home's daemon. The hub's API (`src/api/HubApi.ts`) serves these schemas.
 */
import { Schema } from "effect"
import { HomeState } from "./hub.ts"
import { MemoryTotals } from "./memoryTotals.ts"
import { EffectiveIdleTimeout, RetirementAttemptView, RetirementBlocker, RetirementFailure, RetirementPhase } from "./retirement.ts"

/** The identity an action addresses: what the inventory rendered. The hub rechecks it first. */
export const RenderedIdentity = Schema.Struct({
  pid: Schema.Number,
  startTime: Schema.NullOr(Schema.Number),
  instanceId: Schema.String
})
export type RenderedIdentity = typeof RenderedIdentity.Type

/** One row of the resident inventory: a discovered process identity, or a home without one. */
export const DaemonRow = Schema.Struct({
  name: Schema.String,
  home: Schema.String,
  state: HomeState,
  archived: Schema.Boolean,
  /** The process (null when there is no verified one: retired, stopped). */
  pid: Schema.NullOr(Schema.Number),
  /** Its start time in clock ticks since boot (procfs): with the pid, its identity. */
  startTime: Schema.NullOr(Schema.Number),
  /** When it started (ISO 8601). */
  startedAt: Schema.NullOr(Schema.String),
  instanceId: Schema.NullOr(Schema.String),
  protocolVersion: Schema.NullOr(Schema.Number),
  /** Whether it speaks the hub's protocol; null when there is no process. */
  compatible: Schema.NullOr(Schema.Boolean),
  packageVersion: Schema.NullOr(Schema.String),
  /** What the daemon armed, as it reports it (its record's, for one the hub cannot talk to). */
  idleTimeout: Schema.NullOr(EffectiveIdleTimeout),
  phase: Schema.NullOr(RetirementPhase),
  deadline: Schema.NullOr(Schema.String),
  /** The categories of what keeps it resident now. */
  blockers: Schema.Array(Schema.String),
  /** Of those, its runtimes' providers' vetoes (and failed probes): whose, why, and since when. */
  vetoes: Schema.optionalKey(Schema.Array(RetirementBlocker)),
  lastAttempt: Schema.NullOr(RetirementAttemptView),
  failure: Schema.NullOr(RetirementFailure),
  /** The resident memory of the daemon's process tree, in bytes; null when unknown. */
  memoryBytes: Schema.NullOr(Schema.Number),
  /** Its home's memory resident against released, as its running daemon counts it; absent without one. */
  memoryTotals: Schema.optionalKey(MemoryTotals),
  /** Whether "retire now" may be asked of it: a compatible, running daemon. */
  canRetire: Schema.Boolean,
  /** What the state means and what an operator can do about it. */
  note: Schema.String
})
export type DaemonRow = typeof DaemonRow.Type

/** The idle timeout the hub gives the daemons it launches, and where it comes from. */
export const HubDefault = Schema.Struct({
  /** The Go duration given to daemons launched now. */
  value: Schema.String,
  source: Schema.Literals(["hub.json", "default"])
})

/** The resident inventory: every managed home's row. */
export const Inventory = Schema.Struct({
  /** The daemon protocol version this hub speaks. */
  protocolVersion: Schema.Number,
  hubDefaultIdleTimeout: HubDefault,
  daemons: Schema.Array(DaemonRow),
  /** The homes' memory together, resident against released, per provider and per label (a home without a daemon: from its saved store). */
  memoryTotals: Schema.optionalKey(MemoryTotals)
})
export type Inventory = typeof Inventory.Type

/** How a force stop ended. */
export const StopResult = Schema.Struct({
  name: Schema.String,
  pid: Schema.Number,
  /** Whether the grace ran out and the daemon's process group was killed. */
  killed: Schema.Boolean,
  /** Whether its exit is confirmed (false: still there 10 s after SIGKILL, as in an uninterruptible wait). */
  exited: Schema.Boolean
})
export type StopResult = typeof StopResult.Type

/** A request for a home's daemon, as the hub received it (the path is the daemon's: `/v1/…`). */
export interface RoutedRequest {
  readonly method: string
  readonly path: string
  /** The query string, with its `?`, or "". */
  readonly search: string
  readonly contentType: string | undefined
  readonly body: Uint8Array
}

/** Why a home has no daemon to answer a read, which the hub then answers from its saved store. */
export type SavedStoreState = "retired" | "stopped"

/** The daemon's answer, passed on as it came; or the hub's own from the home's saved store. */
export interface RoutedResponse {
  readonly status: number
  readonly contentType: string | undefined
  readonly retryAfter: string | undefined
  readonly body: Uint8Array
  /** Set when the hub answered from the home's saved store (no daemon runs): why none runs. */
  readonly savedStore?: SavedStoreState | undefined
}

/** A request as the hub routes it. */
export interface PreparedRequest {
  readonly request: RoutedRequest
  /** Whether it is a mutation: the only kind of request that may start a retired daemon. */
  readonly mutation: boolean
  /** For a prompt: its client message id (the caller's, or one the hub gave it), and whether it waits for its turn. */
  readonly prompt: { readonly clientMessageId: string; readonly injected: boolean; readonly waits: boolean } | undefined
}
