/**
 * The hub's own groups: its health, and the resident inventory with the operator's actions on it
 * (`/v1/daemons`: retire now, force stop, resume). The rows are the domain's (domain/hubDaemons.ts).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { DaemonRow, Inventory, RenderedIdentity, StopResult } from "../domain/hubDaemons.ts"
import { RetirementAttemptView } from "../domain/retirement.ts"
import {
  ConfirmationRequiredError,
  DaemonIncompatibleError,
  DaemonStartFailedError,
  DaemonUnavailableError,
  HomeArchivedError,
  HomeNotManagedError,
  HubConfigInvalidError,
  RetirementFailedError,
  RetirementRefusedError,
  StaleIdentityError
} from "./errors.ts"
import { Authorization } from "./middleware.ts"

/** A force stop: the identity the operator saw, and their confirmation of it. */
export const StopRequest = Schema.Struct({
  identity: RenderedIdentity,
  /** Must be `NAME:PID` of the row: the operator names the home and the process. */
  confirm: Schema.String
})

const Name = { name: Schema.String }

/** The hub's health: no token. */
export class HubHealthGroup extends HttpApiGroup.make("system", { topLevel: true }).add(
  HttpApiEndpoint.get("health", "/v1/health", { success: Schema.Struct({ status: Schema.Literal("ok") }) })
) {}

/** The inventory and the operator's actions on a rendered identity. */
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
        RetirementRefusedError,
        RetirementFailedError,
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
