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

/**
 * The status each error answers with, by its tag: the one table the problem schemas below (and
 * the hub's own answers on a forwarded request) take their status from.
 */
export const problemStatus = {
  Unauthorized: 401,
  RequestTooLarge: 413,
  CrossOriginRefused: 403,
  LoginCodeInvalid: 401,
  AgentNotFound: 404,
  AgentBusy: 409,
  RuntimeNotFound: 404,
  ShuttingDown: 503,
  StillOpening: 503,
  AgentNotResumable: 409,
  ProviderNotFound: 422,
  ProviderFailed: 502,
  PermissionNotPending: 409,
  AgentStoreError: 500,
  RuntimeCloseFailed: 502,
  RuntimeCloseRefused: 409,
  AgentDeleteRefused: 409,
  RuntimePersistFailed: 500,
  PromptTooLarge: 413,
  ClusterUnavailable: 503,
  DaemonRetiring: 503,
  RetirementRefused: 409,
  RetirementFailed: 500,
  TurnNotFound: 404,
  WorkingDirectoryNotFound: 422,
  ReservedLabel: 400,
  WarmReserveUnsupported: 422,
  InvalidWarmReserveSize: 400,
  ConfigReloadFailed: 422,
  HomeNotManaged: 404,
  HomeRetired: 409,
  HomeStopped: 409,
  HomeArchived: 409,
  DaemonUnavailable: 503,
  DaemonIncompatible: 409,
  DaemonStartFailed: 502,
  StaleIdentity: 409,
  ConfirmationRequired: 400,
  HubConfigInvalid: 500
} as const

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

export const UnauthorizedError = Unauthorized.pipe(asProblem(problemStatus.Unauthorized))
export const RequestTooLargeError = RequestTooLarge.pipe(asProblem(problemStatus.RequestTooLarge))
export const CrossOriginRefusedError = CrossOriginRefused.pipe(asProblem(problemStatus.CrossOriginRefused))
export const LoginCodeInvalidError = LoginCodeInvalid.pipe(asProblem(problemStatus.LoginCodeInvalid))

// ---- the daemon's domain errors ----------------------------------------------------------------

export const AgentNotFoundError = AgentNotFound.pipe(asProblem(problemStatus.AgentNotFound))
export const AgentBusyError = AgentBusy.pipe(asProblem(problemStatus.AgentBusy))
export const RuntimeNotFoundError = RuntimeNotFound.pipe(asProblem(problemStatus.RuntimeNotFound))
export const ShuttingDownError = ShuttingDown.pipe(asProblem(problemStatus.ShuttingDown))
export const StillOpeningError = StillOpening.pipe(asProblem(problemStatus.StillOpening))
export const AgentNotResumableError = AgentNotResumable.pipe(asProblem(problemStatus.AgentNotResumable))
export const ProviderNotFoundError = ProviderNotFound.pipe(asProblem(problemStatus.ProviderNotFound))
export const ProviderFailedError = ProviderFailed.pipe(asProblem(problemStatus.ProviderFailed))
export const PermissionNotPendingError = PermissionNotPending.pipe(asProblem(problemStatus.PermissionNotPending))
export const AgentStoreFailedError = AgentStoreError.pipe(asProblem(problemStatus.AgentStoreError))
export const RuntimeCloseFailedError = RuntimeCloseFailed.pipe(asProblem(problemStatus.RuntimeCloseFailed))
/** A close that would end work (blockers, a provider's veto), asked without force; its body lists them. */
export const RuntimeCloseRefusedError = RuntimeCloseRefused.pipe(asProblem(problemStatus.RuntimeCloseRefused))
export const AgentDeleteRefusedError = AgentDeleteRefused.pipe(asProblem(problemStatus.AgentDeleteRefused))
export const RuntimePersistFailedError = RuntimePersistFailed.pipe(asProblem(problemStatus.RuntimePersistFailed))
export const PromptTooLargeError = PromptTooLarge.pipe(asProblem(problemStatus.PromptTooLarge))
export const ClusterUnavailableError = ClusterUnavailable.pipe(asProblem(problemStatus.ClusterUnavailable))
/** Retryable: the daemon is deciding whether to retire (a `Retry-After` header says when to try again). */
export const DaemonRetiringError = DaemonRetiring.pipe(asProblem(problemStatus.DaemonRetiring))
export const RetirementRefusedError = RetirementRefused.pipe(asProblem(problemStatus.RetirementRefused))
export const RetirementFailedError = RetirementFailed.pipe(asProblem(problemStatus.RetirementFailed))
export const TurnNotFoundError = TurnNotFound.pipe(asProblem(problemStatus.TurnNotFound))
export const WorkingDirectoryNotFoundError = WorkingDirectoryNotFound.pipe(asProblem(problemStatus.WorkingDirectoryNotFound))
export const ReservedLabelError = ReservedLabel.pipe(asProblem(problemStatus.ReservedLabel))
export const WarmReserveUnsupportedError = WarmReserveUnsupported.pipe(asProblem(problemStatus.WarmReserveUnsupported))
export const InvalidWarmReserveSizeError = InvalidWarmReserveSize.pipe(asProblem(problemStatus.InvalidWarmReserveSize))
export const ConfigReloadFailedError = ConfigReloadFailed.pipe(asProblem(problemStatus.ConfigReloadFailed))

// ---- the hub's errors --------------------------------------------------------------------------

export const HomeNotManagedError = HomeNotManaged.pipe(asProblem(problemStatus.HomeNotManaged))
export const HomeRetiredError = HomeRetired.pipe(asProblem(problemStatus.HomeRetired))
export const HomeStoppedError = HomeStopped.pipe(asProblem(problemStatus.HomeStopped))
export const HomeArchivedError = HomeArchived.pipe(asProblem(problemStatus.HomeArchived))
export const DaemonUnavailableError = DaemonUnavailable.pipe(asProblem(problemStatus.DaemonUnavailable))
export const DaemonIncompatibleError = DaemonIncompatible.pipe(asProblem(problemStatus.DaemonIncompatible))
export const DaemonStartFailedError = DaemonStartFailed.pipe(asProblem(problemStatus.DaemonStartFailed))
export const StaleIdentityError = StaleIdentity.pipe(asProblem(problemStatus.StaleIdentity))
export const ConfirmationRequiredError = ConfirmationRequired.pipe(asProblem(problemStatus.ConfirmationRequired))
export const HubConfigInvalidError = HubConfigInvalid.pipe(asProblem(problemStatus.HubConfigInvalid))
