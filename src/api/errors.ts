/**
 * The error → HTTP status table of both APIs, the daemon's and the hub's: each domain error the
 * API answers with, as a problem (see problem.ts) with its status, and the API's own errors
 * (credentials, body size, logins). The request errors every operation may answer with are in
 * requestErrors.ts.
 */
import { Schema } from "effect"
import { AgentDeleteRefused, RuntimeCloseRefused } from "../domain/close.ts"
import { ConfigReloadFailed } from "../domain/config.ts"
import {
  AgentBusy,
  AgentNotFound,
  AgentNotResumable,
  AgentStoreError,
  ClusterUnavailable,
  InvalidWarmReserveSize,
  PermissionNotPending,
  PromptTooLarge,
  ProviderFailed,
  ProviderNotFound,
  ReservedLabel,
  RuntimeCloseFailed,
  RuntimeNotFound,
  RuntimePersistFailed,
  ShuttingDown,
  StillOpening,
  TurnNotFound,
  WarmReserveUnsupported,
  WorkingDirectoryNotFound
} from "../domain/errors.ts"
import {
  ConfirmationRequired,
  DaemonIncompatible,
  DaemonStartFailed,
  DaemonUnavailable,
  HomeArchived,
  HomeNotManaged,
  HomeRetired,
  HomeStopped,
  HubConfigInvalid,
  StaleIdentity
} from "../domain/hub.ts"
import { DaemonRetiring, RetirementFailed, RetirementRefused } from "../domain/retirement.ts"
import { asProblem } from "./problem.ts"

// ---- the API's own errors ----------------------------------------------------------------------

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

export const UnauthorizedError = Unauthorized.pipe(asProblem(401))
export const RequestTooLargeError = RequestTooLarge.pipe(asProblem(413))
export const CrossOriginRefusedError = CrossOriginRefused.pipe(asProblem(403))
export const LoginCodeInvalidError = LoginCodeInvalid.pipe(asProblem(401))

// ---- the daemon's domain errors ----------------------------------------------------------------

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

// ---- the hub's errors --------------------------------------------------------------------------

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
