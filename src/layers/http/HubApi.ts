/**
 * The hub's HTTP API: the resident inventory and the actions on it (`/v1/daemons`), and the
 * routes it forwards to a home's daemon (`/v1/homes/{name}/…` → the daemon's `/v1/…`; see
 * `QuiesceApiViaHub`). One definition for the server, the CLI's typed client and OpenAPI.
 */
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, OpenApi } from "effect/http-api"
import {
  ConfirmationRequired,
  DaemonIncompatible,
  DaemonStartFailed,
  DaemonUnavailable,
  HomeArchived,
  HomeNotManaged,
  HomeRetired,
  HomeState,
  HomeStopped,
  HubConfigInvalid,
  StaleIdentity
} from "../../domain/hub.ts"
import {
  EffectiveIdleTimeout,
  RetirementFailure,
  RetirementFailed,
  RetirementPhase,
  RetirementRefused
} from "../../domain/retirement.ts"
import { packageVersion } from "../../domain/version.ts"
import { Authorization, errorContract, payloadParseOptions, QuiesceApi, RetirementAttemptView, SessionGroup } from "./Api.ts"
import { asProblem } from "./problem.ts"
import { RequestProblems } from "./requestErrors.ts"

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
  lastAttempt: Schema.NullOr(RetirementAttemptView),
  failure: Schema.NullOr(RetirementFailure),
  /** The resident memory of the daemon's process tree, in bytes; null when unknown. */
  memoryBytes: Schema.NullOr(Schema.Number),
  /** Whether "retire now" may be asked of it: a compatible, running daemon. */
  canRetire: Schema.Boolean,
  /** What the state means and what an operator can do about it. */
  note: Schema.String
})
export type DaemonRow = typeof DaemonRow.Type

export const HubDefault = Schema.Struct({
  /** The Go duration given to daemons launched now. */
  value: Schema.String,
  source: Schema.Literals(["hub.json", "default"])
})

export const Inventory = Schema.Struct({
  /** The daemon protocol version this hub speaks. */
  protocolVersion: Schema.Number,
  hubDefaultIdleTimeout: HubDefault,
  daemons: Schema.Array(DaemonRow)
})
export type Inventory = typeof Inventory.Type

export const StopRequest = Schema.Struct({
  identity: RenderedIdentity,
  /** Must be `NAME:PID` of the row: the operator names the home and the process. */
  confirm: Schema.String
})

export const StopResult = Schema.Struct({
  name: Schema.String,
  pid: Schema.Number,
  /** Whether the grace ran out and the daemon's process group was killed. */
  killed: Schema.Boolean,
  /** Whether its exit is confirmed (false: still there 10 s after SIGKILL, as in an uninterruptible wait). */
  exited: Schema.Boolean
})
export type StopResult = typeof StopResult.Type

const Name = { name: Schema.String }

export const HomeNotManagedError = HomeNotManaged.pipe(asProblem(404))
export const HomeRetiredError = HomeRetired.pipe(asProblem(409))
export const HomeStoppedError = HomeStopped.pipe(asProblem(409))
export const HomeArchivedError = HomeArchived.pipe(asProblem(409))
export const DaemonUnavailableError = DaemonUnavailable.pipe(asProblem(503))
export const DaemonIncompatibleError = DaemonIncompatible.pipe(asProblem(409))
export const DaemonStartFailedError = DaemonStartFailed.pipe(asProblem(502))
export const StaleIdentityError = StaleIdentity.pipe(asProblem(409))
export const ConfirmationRequiredError = ConfirmationRequired.pipe(asProblem(400))
export const HubConfigInvalidError = HubConfigInvalid.pipe(asProblem(500))

export class HubHealthGroup extends HttpApiGroup.make("system", { topLevel: true }).add(
  HttpApiEndpoint.get("health", "/v1/health", { success: Schema.Struct({ status: Schema.Literal("ok") }) })
) {}

export class DaemonsGroup extends HttpApiGroup.make("daemons")
  .add(
    HttpApiEndpoint.get("list", "/v1/daemons", { success: Inventory, error: HubConfigInvalidError }),
    HttpApiEndpoint.post("retire", "/v1/daemons/:name/retire", {
      params: Name,
      payload: RenderedIdentity,
      success: RetirementAttemptView.pipe(HttpApiSchema.status(202)),
      error: [
        HomeNotManagedError,
        HomeArchivedError,
        StaleIdentityError,
        DaemonIncompatibleError,
        DaemonUnavailableError,
        RetirementRefused.pipe(asProblem(409)),
        RetirementFailed.pipe(asProblem(500)),
        HubConfigInvalidError
      ]
    }),
    HttpApiEndpoint.post("stop", "/v1/daemons/:name/stop", {
      params: Name,
      payload: StopRequest,
      success: StopResult,
      error: [HomeNotManagedError, StaleIdentityError, ConfirmationRequiredError, HubConfigInvalidError]
    }),
    HttpApiEndpoint.post("resume", "/v1/daemons/:name/resume", {
      params: Name,
      success: DaemonRow,
      error: [
        HomeNotManagedError,
        HomeArchivedError,
        DaemonIncompatibleError,
        DaemonUnavailableError,
        DaemonStartFailedError,
        HubConfigInvalidError
      ]
    })
  )
  .middleware(Authorization)
{}

export class HubApi extends HttpApi.make("quiesce-hub")
  .add(HubHealthGroup, DaemonsGroup, SessionGroup)
  .middleware(RequestProblems)
  .annotate(HttpApi.PayloadParseOptions, payloadParseOptions)
  .annotateMerge(OpenApi.annotations({
    title: "Quiesce hub API",
    version: packageVersion,
    description:
      `The daemons of the homes a hub manages; each home's daemon API is forwarded under /v1/homes/{name}/. ${errorContract}`
  }))
{}

/** Where the hub's OpenAPI document is served (no token). */
export const hubOpenapiPath = "/v1/openapi.json"

/** What the hub itself may answer on a forwarded request, besides the daemon's own answers. */
export class HubRouting extends HttpApiMiddleware.Service<HubRouting>()("quiesce/http/HubRouting", {
  error: [
    HomeNotManagedError,
    HomeRetiredError,
    HomeStoppedError,
    HomeArchivedError,
    DaemonUnavailableError,
    DaemonIncompatibleError,
    DaemonStartFailedError,
    HubConfigInvalidError
  ]
}) {}

/**
 * The daemon API as a client sees it through the hub: every endpoint may also answer with the
 * hub's routing errors. Only a client is made from it (the hub forwards bytes, it serves no handler).
 */
export const QuiesceApiViaHub = QuiesceApi.middleware(HubRouting)
