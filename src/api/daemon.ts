/** The daemon's own lifecycle: its status and retire now (R6). Times are ISO 8601. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import {
  DaemonIdentity,
  RetirementAttemptView,
  RetirementBlocker,
  RetirementFailure,
  RetirementPhase
} from "../domain/retirement.ts"
import { MemoryTotals } from "../domain/memoryTotals.ts"
import { StartsDaemon } from "./annotations.ts"
import { RetirementFailedError, RetirementRefusedError } from "./errors.ts"
import { Authorization } from "./middleware.ts"

/** `GET /v1/daemon`: who the daemon is, and where its lifecycle stands (times ISO 8601). */
export const DaemonStatusView = Schema.Struct({
  ...DaemonIdentity.fields,
  phase: RetirementPhase,
  /** Since when it has been idle: its last activity, or its last refused attempt. */
  idleSince: Schema.String,
  /** When the idle timer's interval ends if nothing happens; null without a timer or while retiring. */
  deadline: Schema.NullOr(Schema.String),
  /**
   * What would keep it from retiring now: runtime baselines, the daemon's own work, and each
   * provider's veto as its last probe answered (asked after every turn and at each sweep; not asked here).
   */
  blockers: Schema.Array(RetirementBlocker),
  lastAttempt: Schema.NullOr(RetirementAttemptView),
  failure: Schema.NullOr(RetirementFailure),
  /**
   * The home's memory, resident (its live runtimes' process trees now) against released (what the
   * releases of its released agents gave back), in all, per provider and per label. Absent from
   * daemons older than it.
   */
  memoryTotals: Schema.optionalKey(MemoryTotals)
})
export type DaemonStatusView = typeof DaemonStatusView.Type

/** The daemon's status and retire now; neither starts a retired daemon. */
export class DaemonGroup extends HttpApiGroup.make("daemon")
  .add(
    HttpApiEndpoint.get("status", "/v1/daemon", { success: DaemonStatusView }).annotate(StartsDaemon, false),
    HttpApiEndpoint.post("retire", "/v1/daemon/retire", {
      success: RetirementAttemptView.pipe(HttpApiSchema.status(202)),
      error: [RetirementRefusedError, RetirementFailedError]
    }).annotate(StartsDaemon, false)
  )
  .middleware(Authorization)
{}
