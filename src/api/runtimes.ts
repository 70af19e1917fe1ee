/**
 * The live runtimes and the collector: why each is still resident, collect one now, sweep them
 * all, and the memory budget (memory.ts).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { MemberBlocker } from "../domain/blocker.ts"
import { ProbeView, RuntimeRow } from "../domain/runtimeRow.ts"
import { CollectedRuntime, ResidencyState } from "../domain/sweep.ts"
import { StartsDaemon } from "./annotations.ts"
import { AgentNotFoundError, RuntimeNotFoundError } from "./errors.ts"
import { memoryEndpoint } from "./memory.ts"
import { AdmissionGate, Authorization } from "./middleware.ts"

/** An error flattened to what a client needs: its tag and message. */
export const ErrorSummary = Schema.Struct({
  _tag: Schema.String,
  message: Schema.String
})
export type ErrorSummary = typeof ErrorSummary.Type

/** How a collection of one runtime ended. */
export const CollectResult = Schema.Struct({
  outcome: Schema.Literals(["collected", "retained", "failed"]),
  /** Why it was retained; empty otherwise. */
  blockers: Schema.Array(MemberBlocker),
  /** When retained: the residency state that kept it. */
  state: Schema.optionalKey(ResidencyState),
  /** When retained: the last provider probe, if it did not permit. */
  lastProbe: Schema.optionalKey(Schema.NullOr(ProbeView)),
  /** When failed: what failed. */
  error: Schema.optionalKey(ErrorSummary)
})
export type CollectResult = typeof CollectResult.Type

/** What a sweep released, and what failed. */
export const SweepResult = Schema.Struct({
  collected: Schema.Array(CollectedRuntime),
  failures: Schema.Array(Schema.Struct({ agentId: Schema.String, error: ErrorSummary }))
})
export type SweepResult = typeof SweepResult.Type

const AgentId = { id: Schema.String }

/** The runtimes and the collector; none of these starts a retired daemon (a retired one has no runtimes). */
export class RuntimesGroup extends HttpApiGroup.make("runtimes")
  .add(
    /**
     * This daemon's live runtimes; `?scope=cluster` on a cluster's runner: every runner's, as each
     * reported them to the shared database (every 5 s).
     */
    HttpApiEndpoint.get("list", "/v1/runtimes", {
      query: { scope: Schema.optionalKey(Schema.Literals(["runner", "cluster"])) },
      success: Schema.Array(RuntimeRow)
    }).annotate(StartsDaemon, false),
    /**
     * One live runtime and why it is still resident (X1): blockers, the provider's veto and its
     * reason. No such agent: `AgentNotFound`; an agent without a live runtime (released; its
     * `GET /v1/agents/:id` says when and why): `RuntimeNotFound`.
     */
    HttpApiEndpoint.get("explain", "/v1/runtimes/:id", {
      params: AgentId,
      success: RuntimeRow,
      error: [AgentNotFoundError, RuntimeNotFoundError]
    }).annotate(StartsDaemon, false),
    HttpApiEndpoint.post("collect", "/v1/runtimes/:id/collect", {
      params: AgentId,
      success: CollectResult,
      error: RuntimeNotFoundError
    }).middleware(AdmissionGate).annotate(StartsDaemon, false),
    HttpApiEndpoint.post("sweep", "/v1/sweep", { success: SweepResult }).middleware(AdmissionGate).annotate(StartsDaemon, false),
    memoryEndpoint
  )
  .middleware(Authorization)
{}
