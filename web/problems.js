// @ts-check
// What each problem type of the API means, in a sentence a person reads: the pages show it, then
// the problem's own detail, and never the tag itself (a tag is for programs: the CLI's --json,
// scripts).

/**
 * Each problem type the daemon, the hub or the page itself answers with, by its tag (see
 * src/api/errors.ts and src/api/requestErrors.ts); `NoAnswer` is the page's own, for a request
 * that got no answer at all.
 * @type {ReadonlyMap<string, string>}
 */
const sentences = new Map(Object.entries({
  NoAnswer: "The server does not answer.",
  Unauthorized: "You are not signed in.",
  RequestTooLarge: "The request is too large.",
  CrossOriginRefused: "Refused: the request did not come from this page.",
  LoginCodeInvalid: "Not signed in.",
  InvalidRequest: "The request is not valid.",
  UnsupportedMediaType: "The request is not JSON.",
  RouteNotFound: "The server has no such page or action.",
  MethodNotAllowed: "The server does not allow that action here.",
  InternalError: "The server failed unexpectedly.",
  AgentNotFound: "There is no such agent.",
  AgentBusy: "The agent is busy.",
  RuntimeNotFound: "The agent has no live runtime: it was released already.",
  ShuttingDown: "The daemon is shutting down.",
  StillOpening: "The agent's runtime is still starting.",
  AgentNotResumable: "The agent's session cannot be resumed.",
  ProviderNotFound: "No such provider is configured.",
  ProviderFailed: "The provider failed.",
  PermissionNotPending: "That permission is no longer pending.",
  AgentStoreError: "The daemon could not read or write its store.",
  RuntimeCloseFailed: "The runtime could not be closed.",
  RuntimeCloseRefused: "Not closed: that would end its work.",
  AgentDeleteRefused: "Not deleted: that would end its work.",
  RuntimePersistFailed: "The runtime's session could not be saved.",
  RuntimeProbeFailed: "The provider could not say whether the runtime may be released.",
  RuntimeProbeTimedOut: "The provider did not say in time whether the runtime may be released.",
  PromptTooLarge: "The prompt is too large.",
  ClusterUnavailable: "The cluster is unavailable.",
  DaemonRetiring: "The daemon is retiring.",
  RetirementRefused: "Not retired: work keeps it resident.",
  RetirementFailed: "The daemon's retirement failed.",
  TurnNotFound: "There is no such turn.",
  WorkingDirectoryNotFound: "The working directory does not exist.",
  ReservedLabel: "That label is reserved.",
  WarmReserveUnsupported: "This provider keeps no warm reserve.",
  InvalidWarmReserveSize: "That warm reserve size is not valid.",
  ConfigReloadFailed: "The configuration could not be reloaded.",
  HomeNotManaged: "The hub manages no such home.",
  HomeRetired: "This home is retired: no daemon runs for it.",
  HomeStopped: "This home was force-stopped.",
  HomeArchived: "This home is archived.",
  DaemonUnavailable: "The home's daemon does not answer.",
  DaemonIncompatible: "The home's daemon runs another version.",
  DaemonStartFailed: "The home's daemon could not be started.",
  StaleIdentity: "The daemon changed since the page listed it: nothing was done.",
  ConfirmationRequired: "This needs a confirmation.",
  HubConfigInvalid: "The hub's configuration is not valid."
}))

/**
 * The sentence for a problem type; one the page does not know is described by its status alone.
 * @param {string} tag
 * @param {number} [status]
 */
export const problemSentence = (tag, status) =>
  sentences.get(tag) ?? (status === undefined || status === 0
    ? "Something failed."
    : status >= 500
    ? "The server failed."
    : "The server refused the request.")
