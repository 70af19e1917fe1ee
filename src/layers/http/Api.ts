/**
 * The daemon's HTTP API (JSON, under `/v1`): one definition for the server, the typed client
 * (`HttpApiClient.make(QuiesceApi)`) and the OpenAPI document. Nothing here runs on the server
 * only; the handlers and middleware implementations live in `ApiServer.ts`.
 *
 * Times are epoch milliseconds, as in the domain.
 */
import { Schema } from "effect"
import {
  HttpApi,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  OpenApi
} from "effect/http-api"
import { AgentLifecycle, Labels } from "../../domain/agent.ts"
import { AgentDeleteRefused, ClosedRuntime, DeletedAgent, RuntimeCloseRefused } from "../../domain/close.ts"
import { sessionKeySecurity } from "./pageSessions.ts"
import { asProblem } from "./problem.ts"
import { RequestProblems } from "./requestErrors.ts"
import { MemberBlocker } from "../../domain/blocker.ts"
import {
  AgentBusy,
  AgentNotFound,
  AgentNotResumable,
  AgentStoreError,
  ClusterUnavailable,
  PermissionNotPending,
  PromptTooLarge,
  ProviderFailed,
  ProviderNotFound,
  RuntimeCloseFailed,
  RuntimeNotFound,
  RuntimePersistFailed,
  ShuttingDown,
  StillOpening,
  InvalidWarmReserveSize,
  TurnNotFound,
  WarmReserveUnsupported,
  ReservedLabel,
  WorkingDirectoryNotFound
} from "../../domain/errors.ts"
import { WarmProcessView, WarmReserveSize, WarmReserveView } from "../../domain/warmReserve.ts"
import { ConfigReloaded, ConfigReloadFailed } from "../reserve/configReload.ts"
import {
  DaemonIdentity,
  DaemonRetiring,
  RetirementAttempt,
  RetirementBlocker,
  RetirementFailed,
  RetirementFailure,
  RetirementPhase,
  RetirementRefused
} from "../../domain/retirement.ts"
import { CollectedRuntime, ProbeObservation, ResidencyState } from "../../domain/sweep.ts"
import { EvictionEntry, MemoryBudget, MemoryHolder, PressureCause } from "../../domain/memory.ts"
import { Disposition, TurnError, TurnRecord, TurnState } from "../../domain/turn.ts"
import { packageVersion } from "../../domain/version.ts"

// ---- errors ------------------------------------------------------------------------------------

/** The bearer token is missing or wrong. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  message: Schema.String
}, { httpApiStatus: 401 }) {
  /** A request without the token (or a page session). */
  static readonly missingToken = () => new Unauthorized({ message: "Missing or invalid bearer token" })
}

/** The request's body is larger than the daemon reads (`daemon.maxRequestBytes`); nothing was done. */
export class RequestTooLarge extends Schema.TaggedError<RequestTooLarge>()("RequestTooLarge", {
  message: Schema.String,
  limitBytes: Schema.Number
}, { httpApiStatus: 413 }) {
  static readonly of = (limitBytes: number) =>
    new RequestTooLarge({ message: `Request body exceeds ${limitBytes} bytes`, limitBytes })
}

/** A request that a page session authorises and that changes state came from another origin; nothing was done. */
export class CrossOriginRefused extends Schema.TaggedError<CrossOriginRefused>()("CrossOriginRefused", {
  message: Schema.String
}, { httpApiStatus: 403 }) {
  /** A change a page session asked for from another origin. */
  static readonly ofSession = () =>
    new CrossOriginRefused({ message: "A change asked with a page session must come from this server's own pages" })
}

/** The login code is unknown, used or expired: the CLI gives a new one (`quiesce open`). */
export class LoginCodeInvalid extends Schema.TaggedError<LoginCodeInvalid>()("LoginCodeInvalid", {
  message: Schema.String
}, { httpApiStatus: 401 }) {}

// The domain errors, with the status each answers with.
export const AgentNotFoundError = AgentNotFound.pipe(asProblem(404))
export const AgentBusyError = AgentBusy.pipe(asProblem(409))
export const RuntimeNotFoundError = RuntimeNotFound.pipe(asProblem(404))
export const ShuttingDownError = ShuttingDown.pipe(asProblem(503))
export const StillOpeningError = StillOpening.pipe(asProblem(503))
export const AgentNotResumableError = AgentNotResumable.pipe(asProblem(409))
export const ProviderNotFoundError = ProviderNotFound.pipe(asProblem(422))
export const ProviderFailedError = ProviderFailed.pipe(asProblem(502))
export const PermissionNotPendingError = PermissionNotPending.pipe(asProblem(409))
export const AgentStoreFailedError = AgentStoreError.pipe(asProblem(500))
export const RuntimeCloseFailedError = RuntimeCloseFailed.pipe(asProblem(502))
/** A close that would end work (blockers, a provider's veto), asked without force; its body lists them. */
export const RuntimeCloseRefusedError = RuntimeCloseRefused.pipe(asProblem(409))
export const AgentDeleteRefusedError = AgentDeleteRefused.pipe(asProblem(409))
export const RuntimePersistFailedError = RuntimePersistFailed.pipe(asProblem(500))
export const PromptTooLargeError = PromptTooLarge.pipe(asProblem(413))
export const ClusterUnavailableError = ClusterUnavailable.pipe(asProblem(503))
/** Retryable: the daemon is deciding whether to retire (a `Retry-After` header says when to try again). */
export const DaemonRetiringError = DaemonRetiring.pipe(asProblem(503))
export const RetirementRefusedError = RetirementRefused.pipe(asProblem(409))
export const RetirementFailedError = RetirementFailed.pipe(asProblem(500))
export const TurnNotFoundError = TurnNotFound.pipe(asProblem(404))
export const WorkingDirectoryNotFoundError = WorkingDirectoryNotFound.pipe(asProblem(422))
export const ReservedLabelError = ReservedLabel.pipe(asProblem(400))
export const WarmReserveUnsupportedError = WarmReserveUnsupported.pipe(asProblem(422))
export const InvalidWarmReserveSizeError = InvalidWarmReserveSize.pipe(asProblem(400))
export const ConfigReloadFailedError = ConfigReloadFailed.pipe(asProblem(422))

// ---- middleware --------------------------------------------------------------------------------

/**
 * `Authorization: Bearer <token>` on every route but health, metrics, the OpenAPI document and the
 * login; or a web page's session: its cookie with its key in the `quiesce-session-key` header
 * (see pageSessions.ts), which also needs the server's own origin for anything but a read.
 */
export class Authorization extends HttpApiMiddleware.Service<Authorization>()("quiesce/http/Authorization", {
  security: { bearer: HttpApiSecurity.bearer, session: sessionKeySecurity },
  error: [Unauthorized.pipe(asProblem(401)), CrossOriginRefused.pipe(asProblem(403))]
}) {}

/** The bearer token alone: what may hand out logins (a page session cannot renew itself). */
export class TokenAuthorization extends HttpApiMiddleware.Service<TokenAuthorization>()("quiesce/http/TokenAuthorization", {
  security: { bearer: HttpApiSecurity.bearer },
  error: Unauthorized.pipe(asProblem(401))
}) {}

/**
 * Bounds every request's body (413 `RequestTooLarge`): a declared `Content-Length` over the limit
 * is refused before any of the body is read, and a body without one is read no further than it.
 */
export class RequestBodyLimit extends HttpApiMiddleware.Service<RequestBodyLimit>()("quiesce/http/RequestBodyLimit", {
  error: RequestTooLarge.pipe(asProblem(413))
}) {}

/** Refuses every mutating request with 503 until the daemon is ready, and once it stopped admitting work (shutdown). */
export class AdmissionGate extends HttpApiMiddleware.Service<AdmissionGate>()("quiesce/http/AdmissionGate", {
  error: [StillOpeningError, ShuttingDownError, DaemonRetiringError]
}) {}

// ---- schemas -----------------------------------------------------------------------------------

const NonEmptyString = Schema.String.check(Schema.isMinLength(1))

/** An error flattened to what a client needs: its tag and message. */
export const ErrorSummary = Schema.Struct({
  _tag: Schema.String,
  message: Schema.String
})
export type ErrorSummary = typeof ErrorSummary.Type

/** A path the daemon can use whatever its own working directory: absolute. */
const AbsolutePath = Schema.String.check(
  Schema.makeFilter((value) => value.startsWith("/") || "must be an absolute path (the daemon does not know the client's directory)")
)

export const CreateAgentRequest = Schema.Struct({
  provider: NonEmptyString,
  cwd: AbsolutePath,
  /** The managing parent, an existing agent; stored as the `quiesce.parentAgentId` label. */
  parentAgentId: Schema.optionalKey(NonEmptyString),
  /** Free-form labels; a `quiesce.*` label is the daemon's own and refused here (`ReservedLabel`, 400). */
  labels: Schema.optionalKey(Labels)
})
export type CreateAgentRequest = typeof CreateAgentRequest.Type

export const CreatedAgent = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  sessionId: Schema.NullOr(Schema.String)
})
export type CreatedAgent = typeof CreatedAgent.Type

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
  providerAvailable: Schema.Boolean
})
export type AgentSummary = typeof AgentSummary.Type

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

export const PermissionAnswer = Schema.Struct({
  /** Let the runtime go ahead, or refuse. */
  allow: Schema.Boolean
})
export type PermissionAnswer = typeof PermissionAnswer.Type

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

/** What the last provider probe said, and when (ISO 8601); `message` says why it vetoed or failed. */
export const ProbeView = Schema.Struct({ ...ProbeObservation.fields, at: Schema.String })
export type ProbeView = typeof ProbeView.Type

export const RuntimeRow = Schema.Struct({
  agentId: Schema.String,
  provider: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  pid: Schema.NullOr(Schema.Number),
  /** Resident memory of the runtime's process tree; null when unmeasured (never guessed). */
  rssBytes: Schema.NullOr(Schema.Number),
  /** How many processes `rssBytes` sums; null when unmeasured. */
  measuredProcesses: Schema.NullOr(Schema.Number),
  /** The runtime and its managed descendants. */
  family: Schema.Array(Schema.String),
  idleSince: Schema.String,
  /** Earliest time it could be released if nothing changes; null when blocked or never. */
  eligibleAt: Schema.NullOr(Schema.String),
  state: ResidencyState,
  /** What keeps it (or a family member) resident now. */
  blockers: Schema.Array(MemberBlocker),
  /** The last provider probe, when it did not permit the release. */
  lastProbe: Schema.NullOr(ProbeView),
  /** With a memory budget: its place in the eviction order at the last sample (1 is released first); null when not in it (not resumable, or resident since). */
  evictionRank: Schema.optionalKey(Schema.NullOr(Schema.Number)),
  /** With `?scope=cluster`: the runner that hosts it (its `host:port`), and when that runner last reported it. */
  runner: Schema.optionalKey(Schema.String),
  reportedAt: Schema.optionalKey(Schema.String)
})
export type RuntimeRow = typeof RuntimeRow.Type

/** The memory budget and the resident runtimes against it, as of the last sample (times ISO 8601). */
export const MemoryView = Schema.Struct({
  budget: MemoryBudget,
  sampledAt: Schema.NullOr(Schema.String),
  residentBytes: Schema.Number,
  residentRuntimes: Schema.Number,
  unmeasuredRuntimes: Schema.Number,
  availableBytes: Schema.NullOr(Schema.Number),
  pressure: Schema.NullOr(Schema.Struct({ since: Schema.String, causes: Schema.Array(PressureCause) })),
  episodes: Schema.Number,
  order: Schema.Array(Schema.Struct({ ...EvictionEntry.fields, lastActiveAt: Schema.String })),
  held: Schema.Array(MemoryHolder)
})
export type MemoryView = typeof MemoryView.Type

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

export const SweepResult = Schema.Struct({
  collected: Schema.Array(CollectedRuntime),
  failures: Schema.Array(Schema.Struct({ agentId: Schema.String, error: ErrorSummary }))
})
export type SweepResult = typeof SweepResult.Type

export const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  /** The package version (as `quiesce --version` and the OpenAPI document say). */
  version: Schema.String,
  /** How long this process has run, in seconds. */
  uptimeSeconds: Schema.Number
})

/** A retirement attempt, its time ISO 8601. */
export const RetirementAttemptView = Schema.Struct({
  at: Schema.String,
  trigger: RetirementAttempt.fields.trigger,
  outcome: RetirementAttempt.fields.outcome,
  blockers: Schema.Array(RetirementBlocker),
  failure: Schema.NullOr(RetirementFailure)
})
export type RetirementAttemptView = typeof RetirementAttemptView.Type

/** `GET /v1/daemon`: who the daemon is, and where its lifecycle stands (times ISO 8601). */
export const DaemonStatusView = Schema.Struct({
  ...DaemonIdentity.fields,
  phase: RetirementPhase,
  /** Since when it has been idle: its last activity, or its last refused attempt. */
  idleSince: Schema.String,
  /** When the idle timer's interval ends if nothing happens; null without a timer or while retiring. */
  deadline: Schema.NullOr(Schema.String),
  /** What would keep it from retiring now (runtime baselines and the daemon's own work; no probes). */
  blockers: Schema.Array(RetirementBlocker),
  lastAttempt: Schema.NullOr(RetirementAttemptView),
  failure: Schema.NullOr(RetirementFailure)
})
export type DaemonStatusView = typeof DaemonStatusView.Type

/** The Prometheus text exposition format. */
export const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// ---- endpoints ---------------------------------------------------------------------------------

const AgentId = { id: Schema.String }

/** One turn as the journal holds it, its times ISO 8601. */
export const TurnView = Schema.Struct({
  ...TurnRecord.fields,
  acceptedAt: Schema.String,
  dispatchedAt: Schema.NullOr(Schema.String),
  endedAt: Schema.NullOr(Schema.String)
})
export type TurnView = typeof TurnView.Type

/** The `force` query parameter of a close: `true` ends whatever work the runtime has. */
export const CloseForce = Schema.Literals(["true", "false"]).annotate({
  description: "true: close even though that ends the runtime's work (its blockers, what its provider's veto names)"
})

/** The `force` query parameter of a delete: `true` ends whatever work the agent's runtime has. */
export const DeleteForce = Schema.Literals(["true", "false"]).annotate({
  description: "true: delete even though that ends the runtime's work (its blockers, what its provider's veto names)"
})

/** How many turns `GET /v1/agents/:id/turns` lists without a `limit`. */
export const defaultTurnsLimit = 20

/** The `limit` query parameter of the turn list: a whole number, 1..100, decoded from its string. */
export const TurnsLimit = Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 }))

/** A one-time login URL's path (the code is in its fragment) and when the code expires. */
export const LoginLink = Schema.Struct({
  path: Schema.String,
  expiresAt: Schema.String
})
export type LoginLink = typeof LoginLink.Type

export const SessionRequest = Schema.Struct({ code: NonEmptyString.check(Schema.isMaxLength(128)) })

/** A started session: the key the page sends with its cookie, and when both expire. */
export const SessionStarted = Schema.Struct({
  key: Schema.String,
  expiresAt: Schema.String
})

/**
 * The web pages' login, the same on a daemon and on a hub: the token's holder asks for a
 * one-time link (`quiesce open`); the login page exchanges its code for the session (the cookie,
 * and the key in the answer); signing out ends it.
 */
export class SessionGroup extends HttpApiGroup.make("session")
  .add(
    HttpApiEndpoint.post("link", "/v1/login-links", { success: LoginLink.pipe(HttpApiSchema.status(201)) })
      .middleware(TokenAuthorization),
    HttpApiEndpoint.post("start", "/v1/session", {
      payload: SessionRequest,
      success: SessionStarted.pipe(HttpApiSchema.status(201)),
      error: [LoginCodeInvalid.pipe(asProblem(401)), CrossOriginRefused.pipe(asProblem(403))]
    }),
    HttpApiEndpoint.delete("end", "/v1/session", { success: HttpApiSchema.NoContent }).middleware(Authorization)
  )
{}

/** Health, metrics: no token. The client calls them as `client.health()`, `client.metrics()`. */
export class SystemGroup extends HttpApiGroup.make("system", { topLevel: true }).add(
  HttpApiEndpoint.get("health", "/v1/health", { success: Health }),
  HttpApiEndpoint.get("metrics", "/metrics", {
    success: Schema.String.pipe(HttpApiSchema.asText({ contentType: metricsContentType }))
  })
) {}

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
    }).middleware(AdmissionGate),
    HttpApiEndpoint.get("list", "/v1/agents", { success: Schema.Array(AgentSummary) }),
    HttpApiEndpoint.get("get", "/v1/agents/:id", {
      params: AgentId,
      success: AgentSummary,
      error: [AgentNotFoundError, ClusterUnavailableError]
    }),
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
    ),
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
    }),
    HttpApiEndpoint.get("turn", "/v1/agents/:id/turns/:turnId", {
      params: { id: Schema.String, turnId: Schema.String },
      success: TurnView,
      error: [AgentNotFoundError, TurnNotFoundError, AgentStoreFailedError, ClusterUnavailableError]
    }),
    /** The agent's recent turns, newest accepted first: `?limit=` 1..100, default {@link defaultTurnsLimit}. */
    HttpApiEndpoint.get("turns", "/v1/agents/:id/turns", {
      params: AgentId,
      query: { limit: Schema.optionalKey(TurnsLimit) },
      success: Schema.Array(TurnView),
      error: [AgentNotFoundError, AgentStoreFailedError, ClusterUnavailableError]
    }),
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
    ),
    HttpApiEndpoint.post("interrupt", "/v1/agents/:id/interrupt", {
      params: AgentId,
      success: HttpApiSchema.NoContent,
      error: [AgentNotFoundError, ProviderFailedError, ClusterUnavailableError]
    }).middleware(AdmissionGate),
    HttpApiEndpoint.post("answerPermission", "/v1/agents/:id/permissions/:permissionId", {
      params: { id: Schema.String, permissionId: Schema.String },
      payload: PermissionAnswer,
      success: HttpApiSchema.NoContent,
      error: [AgentNotFoundError, PermissionNotPendingError, ProviderFailedError, ClusterUnavailableError]
    }).middleware(AdmissionGate)
  )
  .middleware(Authorization)
{}

export class RuntimesGroup extends HttpApiGroup.make("runtimes")
  .add(
    /**
     * This daemon's live runtimes; `?scope=cluster` on a cluster's runner: every runner's, as each
     * reported them to the shared database (every 5 s).
     */
    HttpApiEndpoint.get("list", "/v1/runtimes", {
      query: { scope: Schema.optionalKey(Schema.Literals(["runner", "cluster"])) },
      success: Schema.Array(RuntimeRow)
    }),
    /** One live runtime and why it is still resident (X1): blockers, the provider's veto and its reason. */
    HttpApiEndpoint.get("explain", "/v1/runtimes/:id", {
      params: AgentId,
      success: RuntimeRow,
      error: RuntimeNotFoundError
    }),
    HttpApiEndpoint.post("collect", "/v1/runtimes/:id/collect", {
      params: AgentId,
      success: CollectResult,
      error: RuntimeNotFoundError
    }).middleware(AdmissionGate),
    HttpApiEndpoint.post("sweep", "/v1/sweep", { success: SweepResult }).middleware(AdmissionGate),
    /** The memory budget, usage against it and the eviction order; null when no budget is configured. */
    HttpApiEndpoint.get("memory", "/v1/memory", { success: Schema.NullOr(MemoryView) })
  )
  .middleware(Authorization)
{}

/** A warm process and its memory (null when unmeasured, never guessed). */
export const WarmProcessRow = Schema.Struct({
  ...WarmProcessView.fields,
  rssBytes: Schema.NullOr(Schema.Number),
  measuredProcesses: Schema.NullOr(Schema.Number)
})
export type WarmProcessRow = typeof WarmProcessRow.Type

export const WarmReserveRow = Schema.Struct({ ...WarmReserveView.fields, ready: Schema.Array(WarmProcessRow) })
export type WarmReserveRow = typeof WarmReserveRow.Type

/** The warm reserves (H4) and the configuration reload that resizes them. */
export class ReserveGroup extends HttpApiGroup.make("reserve")
  .add(
    HttpApiEndpoint.get("list", "/v1/warm-reserve", { success: Schema.Array(WarmReserveRow) }),
    HttpApiEndpoint.put("resize", "/v1/warm-reserve/:provider", {
      params: { provider: Schema.String },
      payload: Schema.Struct({ target: WarmReserveSize }),
      success: WarmReserveRow,
      error: [ProviderNotFoundError, WarmReserveUnsupportedError, InvalidWarmReserveSizeError]
    }).middleware(AdmissionGate),
    HttpApiEndpoint.post("reload", "/v1/config/reload", {
      success: ConfigReloaded,
      error: ConfigReloadFailedError
    }).middleware(AdmissionGate)
  )
  .middleware(Authorization)
{}

/** The daemon's own lifecycle: its status and retire now (R6). */
export class DaemonGroup extends HttpApiGroup.make("daemon")
  .add(
    HttpApiEndpoint.get("status", "/v1/daemon", { success: DaemonStatusView }),
    HttpApiEndpoint.post("retire", "/v1/daemon/retire", {
      success: RetirementAttemptView.pipe(HttpApiSchema.status(202)),
      error: [RetirementRefusedError, RetirementFailedError]
    })
  )
  .middleware(Authorization)
{}

/**
 * Options for decoding request bodies, the daemon's and the hub's: report every invalid member,
 * not just the first, and refuse members the schema does not have (`__proto__` too), as the
 * OpenAPI document says (`additionalProperties: false`).
 */
export const payloadParseOptions = { errors: "all", onExcessProperty: "error" } as const

/** What the OpenAPI documents of the daemon and the hub say of every error. */
export const errorContract = "Every error is an RFC 9457 problem (application/problem+json) with type " +
  "urn:quiesce:error:<_tag>, title, status, detail, _tag, message and the error's own fields. A request body " +
  "with a member its schema does not have (additionalProperties: false) is refused: 400 InvalidRequest."

/**
 * The whole API. A request failing its schema answers 400 `InvalidRequest`, whose `errors` name
 * each offending path (`["payload", "provider"]`), and every other error of the request itself
 * is typed too (see requestErrors.ts); a body over the daemon's limit answers 413
 * `RequestTooLarge` on every route.
 */
export class QuiesceApi extends HttpApi.make("quiesce")
  .add(SystemGroup, AgentsGroup, RuntimesGroup, ReserveGroup, DaemonGroup, SessionGroup)
  .middleware(RequestProblems)
  // Added last, so it runs first: an oversized body is refused before anything else looks at it.
  .middleware(RequestBodyLimit)
  .annotate(HttpApi.PayloadParseOptions, payloadParseOptions)
  .annotateMerge(OpenApi.annotations({
    title: "Quiesce daemon API",
    version: packageVersion,
    description: `Agents, their prompts, and the idle-runtime collector. ${errorContract}`
  }))
{}

/** Where the OpenAPI document is served (no token). */
export const openapiPath = "/v1/openapi.json"
