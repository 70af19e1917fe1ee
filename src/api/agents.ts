/**
 * Agents: create, list, read, delete; their prompts, turns (turns.ts), runtime close, interrupt
 * and permission answers. Times are ISO 8601.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { AgentLifecycle, Labels, ReleaseReason } from "../domain/agent.ts"
import { ClosedRuntime, DeletedAgent } from "../domain/close.ts"
import { Disposition, TurnError, TurnState } from "../domain/turn.ts"
import { StartsDaemon } from "./annotations.ts"
import {
  AgentBusyError,
  AgentDeleteRefusedError,
  AgentNotFoundError,
  AgentNotResumableError,
  AgentStoreFailedError,
  ClusterUnavailableError,
  DaemonRetiringError,
  PermissionNotPendingError,
  PromptTooLargeError,
  ProviderFailedError,
  ProviderNotFoundError,
  ReservedLabelError,
  RuntimeCloseFailedError,
  RuntimeCloseRefusedError,
  RuntimePersistFailedError,
  ShuttingDownError,
  WorkingDirectoryNotFoundError
} from "./errors.ts"
import { AdmissionGate, Authorization } from "./middleware.ts"
import { turnEndpoint, turnsEndpoint } from "./turns.ts"

const NonEmptyString = Schema.String.check(Schema.isMinLength(1))

/** A path the daemon can use whatever its own working directory: absolute. */
const AbsolutePath = Schema.String.check(
  Schema.makeFilter((value) => value.startsWith("/") || "must be an absolute path (the daemon does not know the client's directory)")
)

/** `POST /v1/agents`: the provider and working directory of a new agent. */
export const CreateAgentRequest = Schema.Struct({
  provider: NonEmptyString,
  cwd: AbsolutePath,
  /** The managing parent, an existing agent; stored as the `quiesce.parentAgentId` label. */
  parentAgentId: Schema.optionalKey(NonEmptyString),
  /** Free-form labels; a `quiesce.*` label is the daemon's own and refused here (`ReservedLabel`, 400). */
  labels: Schema.optionalKey(Labels)
})
export type CreateAgentRequest = typeof CreateAgentRequest.Type

/** A new agent: its id, and its provider session once it has one. */
export const CreatedAgent = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  sessionId: Schema.NullOr(Schema.String)
})
export type CreatedAgent = typeof CreatedAgent.Type

/** How a released agent's last runtime was released. */
export const ReleaseView = Schema.Struct({
  /** When (ISO 8601). */
  at: Schema.String,
  /** Why; null for a release older than the record of why. */
  reason: Schema.NullOr(ReleaseReason),
  /** The resident memory of its process tree just before it was released: what the release gave back; null when unmeasured. */
  rssBytes: Schema.NullOr(Schema.Number)
})
export type ReleaseView = typeof ReleaseView.Type

/** An agent as a list or a read shows it. */
export const AgentSummary = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  cwd: Schema.String,
  labels: Labels,
  sessionId: Schema.NullOr(Schema.String),
  /** Whether a live runtime holds the agent now. */
  resident: Schema.Boolean,
  lifecycle: AgentLifecycle,
  /** ISO 8601, as every time in the API. */
  lastActivityAt: Schema.String,
  parentAgentId: Schema.NullOr(Schema.String),
  /** The runtime's process id while resident, when the provider runs a process. */
  pid: Schema.NullOr(Schema.Number),
  /** Permissions the runtime asked for and nobody has answered yet; answer them at `/permissions/{id}`. */
  pendingPermissions: Schema.Array(Schema.String),
  /**
   * False when the daemon's configuration no longer has the agent's provider: the agent can be
   * read and deleted, not prompted or resumed.
   */
  providerAvailable: Schema.Boolean,
  /** While it is released: when, why, and what the release gave back; a prompt resumes its session. */
  release: Schema.optionalKey(ReleaseView)
})
export type AgentSummary = typeof AgentSummary.Type

/** `POST /v1/agents/:id/prompts`: the prompt's text, and how the client wants its answer. */
export const PromptRequest = Schema.Struct({
  text: NonEmptyString,
  /**
   * The client's id for this prompt: a repeat with the same id gets the same turn, never a second
   * one — also after a restart or a crash of the daemon.
   */
  clientMessageId: Schema.optionalKey(NonEmptyString.check(Schema.isMaxLength(256))),
  /** Wait for the turn to end and return its outcome (`state`, `output`, `error`). */
  wait: Schema.optionalKey(Schema.Boolean)
})
export type PromptRequest = typeof PromptRequest.Type

/** The answer to a permission the runtime asked for. */
export const PermissionAnswer = Schema.Struct({
  /** Let the runtime go ahead, or refuse. */
  allow: Schema.Boolean
})
export type PermissionAnswer = typeof PermissionAnswer.Type

/** A prompt's turn as the daemon took it (and, with `wait`, as it ended). */
export const PromptResult = Schema.Struct({
  agentId: Schema.String,
  /** This prompt's turn; read it later at `/v1/agents/{id}/turns/{turnId}`. */
  turnId: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  /** `running` once the provider has it; `completed`, `failed` or `interrupted` once it ended. */
  state: TurnState,
  /** How it reached the provider; null when it never did (see `error`). */
  disposition: Schema.NullOr(Disposition),
  /** For a prompt steered into a running turn: that turn, whose outcome it shares. */
  joinedTurnId: Schema.NullOr(Schema.String),
  /** The runtime had been released and was resumed for this prompt. */
  resumed: Schema.Boolean,
  /** Once the turn ended: its reply (null when it gave none). */
  output: Schema.optionalKey(Schema.NullOr(Schema.String)),
  /** Why it failed or was interrupted; null otherwise. */
  error: Schema.NullOr(TurnError)
})
export type PromptResult = typeof PromptResult.Type

/** The `force` query parameter of a close: `true` ends whatever work the runtime has. */
export const CloseForce = Schema.Literals(["true", "false"]).annotate({
  description: "true: close even though that ends the runtime's work (its blockers, what its provider's veto names)"
})

/** The `force` query parameter of a delete: `true` ends whatever work the agent's runtime has. */
export const DeleteForce = Schema.Literals(["true", "false"]).annotate({
  description: "true: delete even though that ends the runtime's work (its blockers, what its provider's veto names)"
})

const AgentId = { id: Schema.String }

/** The agents and what is asked of them; each mutation that needs the agents may start a retired daemon. */
export class AgentsGroup extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.post("create", "/v1/agents", {
      payload: CreateAgentRequest,
      success: CreatedAgent.pipe(HttpApiSchema.status(201)),
      error: [
        ReservedLabelError,
        WorkingDirectoryNotFoundError,
        AgentNotFoundError,
        ProviderNotFoundError,
        ProviderFailedError,
        AgentStoreFailedError,
        ShuttingDownError,
        DaemonRetiringError,
        ClusterUnavailableError
      ]
    }).middleware(AdmissionGate).annotate(StartsDaemon, true),
    HttpApiEndpoint.get("list", "/v1/agents", { success: Schema.Array(AgentSummary) }).annotate(StartsDaemon, false),
    HttpApiEndpoint.get("get", "/v1/agents/:id", {
      params: AgentId,
      success: AgentSummary,
      error: [AgentNotFoundError, ClusterUnavailableError]
    }).annotate(StartsDaemon, false),
    // Server-sent events (docs/daemon.md, "Live events"): `id:` the event's id, `event:` its tag,
    // `data:` the event as JSON (`AgentEvent` or `Gap`), and a comment every 15 s. Reading is not
    // activity, and the stream ends when the daemon stops.
    HttpApiEndpoint.get("events", "/v1/agents/:id/events", {
      params: AgentId,
      headers: { "last-event-id": Schema.optionalKey(Schema.String) },
      success: HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" }),
      error: [AgentNotFoundError, ClusterUnavailableError]
    }).annotate(StartsDaemon, false),
    // Every agent's events on one stream, each naming its agent (`agentId` in its data): what a page
    // listing every agent follows, on one connection however many agents there are.
    HttpApiEndpoint.get("everyAgentEvents", "/v1/events", {
      headers: { "last-event-id": Schema.optionalKey(Schema.String) },
      success: HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" })
    }).annotate(StartsDaemon, false),
    // Refused with what it would end unless `?force=true`, as a close is (the description below).
    HttpApiEndpoint.delete("delete", "/v1/agents/:id", {
      params: AgentId,
      query: { force: Schema.optionalKey(DeleteForce) },
      success: DeletedAgent,
      error: [
        AgentNotFoundError,
        AgentBusyError,
        AgentDeleteRefusedError,
        AgentStoreFailedError,
        RuntimeCloseFailedError,
        RuntimePersistFailedError,
        ClusterUnavailableError
      ]
    }).middleware(AdmissionGate).annotate(
      OpenApi.Description,
      "Ends the agent's runtime and forgets the agent and its turns. When ending its runtime would end work (a blocker, " +
        "its provider's veto or failed probe, a session that cannot be resumed: what a close checks) it is refused with 409 " +
        "AgentDeleteRefused listing `blockers` and `veto`, unless `force=true`, which deletes it anyway, logs what it ended, " +
        "and answers with it in `ended`. A turn that has not ended refuses it with 409 AgentBusy, forced or not: interrupt " +
        "it first. An agent with nothing to lose (or no live runtime) is deleted without force; `ended` is then empty."
    ).annotate(StartsDaemon, true),
    // No admission gate: the journal answers a repeated client message id even during a shutdown;
    // the registry refuses new prompts itself.
    HttpApiEndpoint.post("prompt", "/v1/agents/:id/prompts", {
      params: AgentId,
      payload: PromptRequest,
      success: PromptResult,
      error: [
        AgentNotFoundError,
        AgentNotResumableError,
        ProviderNotFoundError,
        PromptTooLargeError,
        AgentStoreFailedError,
        ShuttingDownError,
        DaemonRetiringError,
        ClusterUnavailableError
      ]
    }).annotate(StartsDaemon, true),
    turnEndpoint,
    turnsEndpoint,
    // Refused with what it would end unless `?force=true` (the description below, in the OpenAPI document).
    HttpApiEndpoint.post("close", "/v1/agents/:id/close", {
      params: AgentId,
      query: { force: Schema.optionalKey(CloseForce) },
      success: ClosedRuntime,
      error: [AgentNotFoundError, RuntimeCloseRefusedError, RuntimeCloseFailedError, RuntimePersistFailedError, ClusterUnavailableError]
    }).middleware(AdmissionGate).annotate(
      OpenApi.Description,
      "Releases the agent's runtime now; the next prompt resumes its session. When that would end work (a blocker, or its " +
        "provider's veto or failed probe: the same as GET /v1/runtimes/{id} shows, the provider asked fresh) it is refused " +
        "with 409 RuntimeCloseRefused listing `blockers` and `veto`, unless `force=true`, which closes it anyway, logs what " +
        "it ended, and answers with it in `ended`. A runtime with nothing to lose (or none live) closes without force."
    ).annotate(StartsDaemon, false),
    HttpApiEndpoint.post("interrupt", "/v1/agents/:id/interrupt", {
      params: AgentId,
      success: HttpApiSchema.NoContent,
      error: [AgentNotFoundError, ProviderFailedError, ClusterUnavailableError]
    }).middleware(AdmissionGate).annotate(StartsDaemon, true),
    HttpApiEndpoint.post("answerPermission", "/v1/agents/:id/permissions/:permissionId", {
      params: { id: Schema.String, permissionId: Schema.String },
      payload: PermissionAnswer,
      success: HttpApiSchema.NoContent,
      error: [AgentNotFoundError, PermissionNotPendingError, ProviderFailedError, ClusterUnavailableError]
    }).middleware(AdmissionGate).annotate(StartsDaemon, true)
  )
  .middleware(Authorization)
{}
