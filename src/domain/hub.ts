import { Effect, Schema } from "effect"
import { closedJsonSchema } from "./config.ts"
import { GoDuration } from "./goDuration.ts"
import type { RetirementBlocker } from "./retirement.ts"

/**
 * The hub (R3–R6): one process per user that launches a daemon per managed home on demand,
 * routes requests to it, resumes a retired one on the next mutation (exactly once), and shows
 * what is resident. The daemon owns its idle timer; the hub observes and never retires one.
 */

/** The idle timeout the hub gives the daemons it launches when `hub.json` names none. */
export const defaultHubIdleTimeout = "1h"

/** A managed home's name: what `/v1/homes/{name}/…` and the CLI's `--hub NAME` address. */
export const HomeName = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    message: "a name is 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit"
  })
).pipe(Schema.annotate({ description: "The home's name (letters, digits, '.', '_', '-')." }))

const AbsolutePath = Schema.String.check(
  Schema.makeFilter((dir) => dir.startsWith("/") || "must be an absolute path")
)

/** One entry of `hub.json`'s `homes`: a named daemon home the hub launches and routes to. */
export const ManagedHome = Schema.Struct({
  name: HomeName,
  dir: AbsolutePath.pipe(Schema.annotate({ description: "The daemon's home directory (absolute)." })),
  archived: Schema.optionalKey(Schema.Boolean.pipe(Schema.annotate({
    description: "Archived: its data stays readable through a running daemon, new work is refused, and no daemon is started for it."
  })))
})
export type ManagedHome = typeof ManagedHome.Type

const uniqueNames = Schema.makeFilter((homes: ReadonlyArray<ManagedHome>) => {
  const seen = new Set<string>()
  for (const home of homes) {
    if (seen.has(home.name)) return `the name "${home.name}" is used twice`
    seen.add(home.name)
  }
  return true
})

/** `<hub home>/hub.json`: read again for every launch, so a change affects only daemons started after it. */
export const HubConfig = Schema.Struct({
  $schema: Schema.optionalKey(Schema.String),
  daemonIdleTimeout: Schema.optionalKey(GoDuration.pipe(Schema.annotate({
    description:
      `The idle timeout of the daemons the hub launches (a Go duration, e.g. "1h"). Default "${defaultHubIdleTimeout}"; "0s" disables their timer (it never means "the default"). A change affects daemons started after it, never a running one.`
  }))),
  homes: Schema.Array(ManagedHome).check(uniqueNames).pipe(
    Schema.annotate({ description: "The homes this hub manages, each with a name." }),
    Schema.withDecodingDefaultKey(Effect.succeed([]))
  )
}).pipe(Schema.annotate({ title: "Quiesce hub configuration" }))
export type HubConfig = typeof HubConfig.Type

const strict = { onExcessProperty: "error" } as const
/** Decodes `hub.json` text strictly (unknown keys are errors); the error message names the path of the problem. */
export const decodeHubConfigJson = Schema.decodeUnknownEffect(Schema.fromJsonString(HubConfig), strict)

/** The JSON Schema of `hub.json`, generated from the same Schema. */
export const hubConfigJsonSchema = (): unknown => closedJsonSchema(HubConfig)

/**
 * What a home's daemon is, as the hub sees it:
 * - `running`: a verified daemon (pid alive, start time as recorded, its instance id echoed);
 * - `retired`: no verified daemon (a clean retirement, a stop, or a record that is stale); a
 *   mutation starts one;
 * - `unavailable`: a verified process that refuses work (retiring) or does not answer; its exit
 *   is not yet confirmed, so nothing is started beside it (typed, retryable);
 * - `incompatible`: a live daemon that reports another protocol version: eligibility unknown,
 *   never presumed idle, never retired or stopped by the hub on its own;
 * - `stopped`: force-stopped by an operator; it starts again only on an explicit resume.
 */
export const HomeState = Schema.Literals(["running", "retired", "unavailable", "incompatible", "stopped"])
export type HomeState = typeof HomeState.Type

// ---- errors ------------------------------------------------------------------------------------

/** No home of that name in `hub.json`. */
export class HomeNotManaged extends Schema.TaggedError<HomeNotManaged>()("HomeNotManaged", {
  message: Schema.String,
  name: Schema.String
}, { httpApiStatus: 404 }) {}

/** The home's daemon is retired; a read does not start it (a mutation does). */
export class HomeRetired extends Schema.TaggedError<HomeRetired>()("HomeRetired", {
  message: Schema.String,
  name: Schema.String
}, { httpApiStatus: 409 }) {}

/** Force-stopped by an operator: nothing starts it but `quiesce daemons resume NAME`. */
export class HomeStopped extends Schema.TaggedError<HomeStopped>()("HomeStopped", {
  message: Schema.String,
  name: Schema.String
}, { httpApiStatus: 409 }) {}

/** Archived: its data is kept, new work is refused. */
export class HomeArchived extends Schema.TaggedError<HomeArchived>()("HomeArchived", {
  message: Schema.String,
  name: Schema.String
}, { httpApiStatus: 409 }) {}

/**
 * The home's daemon is alive but refuses work (it is retiring) or does not answer, and its exit
 * is not confirmed yet: retry the same request (same client message id) after `retryAfterSeconds`.
 */
export class DaemonUnavailable extends Schema.TaggedError<DaemonUnavailable>()("DaemonUnavailable", {
  message: Schema.String,
  name: Schema.String,
  retryAfterSeconds: Schema.Number
}, { httpApiStatus: 503 }) {}

/** The home's daemon speaks another protocol version: the hub neither routes to it nor retires it. */
export class DaemonIncompatible extends Schema.TaggedError<DaemonIncompatible>()("DaemonIncompatible", {
  message: Schema.String,
  name: Schema.String,
  protocolVersion: Schema.Number
}, { httpApiStatus: 409 }) {}

/** An action named a process identity that is no longer the home's daemon (exited, replaced, pid reused). */
export class StaleIdentity extends Schema.TaggedError<StaleIdentity>()("StaleIdentity", {
  message: Schema.String,
  name: Schema.String
}, { httpApiStatus: 409 }) {}

/** A force stop without the confirmation `NAME:PID`. */
export class ConfirmationRequired extends Schema.TaggedError<ConfirmationRequired>()("ConfirmationRequired", {
  message: Schema.String
}, { httpApiStatus: 400 }) {}

/** The hub could not start the home's daemon; the message carries the end of its log. */
export class DaemonStartFailed extends Schema.TaggedError<DaemonStartFailed>()("DaemonStartFailed", {
  message: Schema.String,
  name: Schema.String
}, { httpApiStatus: 502 }) {}

/** `hub.json` is invalid or cannot be read or written; the message names the file and the problem. */
export class HubConfigInvalid extends Schema.TaggedError<HubConfigInvalid>()("HubConfigInvalid", {
  message: Schema.String
}, { httpApiStatus: 500 }) {}

/** Why the hub could not route a request to a home's daemon: the route's errors, as one schema. */
export const RoutingError = Schema.Union([
  HomeNotManaged,
  HomeRetired,
  HomeStopped,
  HomeArchived,
  DaemonUnavailable,
  DaemonIncompatible,
  DaemonStartFailed,
  HubConfigInvalid
])
export type RoutingError = typeof RoutingError.Type

/** A blocker list as categories, for a row. */
export const blockerCategories = (blockers: ReadonlyArray<RetirementBlocker>): ReadonlyArray<string> =>
  [...new Set(blockers.map((b) => b.category))].sort()
