/**
 * The hub's daemons (R3–R6): the resident inventory, requests routed to a home's daemon (starting
 * one for a mutation when none runs, once per home, and carrying a request across a retirement),
 * and the operator's actions on a rendered identity: retire now, force stop, resume.
 *
 * The daemon owns its idle timer: the hub only observes (passive status reads) and recovers. It
 * never signals a daemon to retire it, and never acts on a record it has not verified.
 */
import { Context, Duration, Effect, Layer, Option, Schema, Semaphore } from "effect"
import { HttpClient } from "effect/http"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import {
  ConfirmationRequired,
  DaemonIncompatible,
  DaemonStartFailed,
  DaemonUnavailable,
  HomeArchived,
  HomeNotManaged,
  HomeRetired,
  HomeStopped,
  type HubConfig,
  HubConfigInvalid,
  type ManagedHome,
  StaleIdentity
} from "../../domain/hub.ts"
import {
  daemonProtocolVersion,
  type DaemonIdentity,
  RetirementFailed,
  RetirementRefused,
  retryWhileDecidingSeconds
} from "../../domain/retirement.ts"
import { liveLockHolder } from "../host/Home.ts"
import { readStat } from "../host/ProcessInspectionProcfs.ts"
import type { RetirementAttemptView } from "../http/Api.ts"
import type { DaemonRow, Inventory, RenderedIdentity, StopResult } from "../http/HubApi.ts"
import { ProcessInspection } from "../../services/ProcessInspection.ts"
import {
  daemonClient,
  type Discovered,
  discover,
  locate,
  recordedProcessAlive,
  type VerifiedDaemons
} from "./discovery.ts"
import { makeForwarder, type RoutedRequest, type RoutedResponse } from "./forward.ts"
import { clearStopped, findHome, hubDefault, isStopped, markStopped, readHubConfig } from "./hubFiles.ts"
import { launchDaemon } from "./launch.ts"

export type { RoutedRequest, RoutedResponse }

export type RoutingError =
  | HomeNotManaged
  | HomeRetired
  | HomeStopped
  | HomeArchived
  | DaemonUnavailable
  | DaemonIncompatible
  | DaemonStartFailed
  | HubConfigInvalid

export class HubDaemons extends Context.Service<HubDaemons, {
  /** One row per home: its verified daemon, or what it is without one. Passive: no daemon is started or kept. */
  readonly inventory: Effect.Effect<Inventory, HubConfigInvalid>
  /** Forwards a request to the home's daemon; only a mutation may start one. */
  readonly route: (name: string, request: RoutedRequest) => Effect.Effect<RoutedResponse, RoutingError>
  /** The daemon's own retire now, on the identity the caller saw. */
  readonly retire: (name: string, identity: RenderedIdentity) => Effect.Effect<
    RetirementAttemptView,
    | HomeNotManaged
    | StaleIdentity
    | DaemonIncompatible
    | DaemonUnavailable
    | RetirementRefused
    | RetirementFailed
    | HubConfigInvalid
  >
  /** SIGTERM, then SIGKILL of its group after the grace; the home then stays stopped until resumed. */
  readonly stop: (
    name: string,
    identity: RenderedIdentity,
    confirm: string
  ) => Effect.Effect<StopResult, HomeNotManaged | StaleIdentity | ConfirmationRequired | HubConfigInvalid>
  /** Lifts a force stop and starts the home's daemon. */
  readonly resume: (name: string) => Effect.Effect<
    DaemonRow,
    HomeNotManaged | HomeArchived | DaemonIncompatible | DaemonUnavailable | DaemonStartFailed | HubConfigInvalid
  >
}>()("quiesce/hub/HubDaemons") {}

export interface HubDaemonsOptions {
  readonly hubHome: string
  /** How long a mutation waits for a retiring or unresponsive daemon's exit to be confirmed. Default 60 s. */
  readonly unavailableWait?: Duration.Input | undefined
  /** How long a daemon may take to become ready. Default 30 s. */
  readonly readyTimeout?: Duration.Input | undefined
  /** How long a force stop waits after SIGTERM before it kills the daemon's group. Default 10 s. */
  readonly stopGrace?: Duration.Input | undefined
}

// ---- what a request is -------------------------------------------------------------------------

/**
 * Requests that never start a daemon although they are not reads: retire now, collection and
 * sweeps (a retired daemon has nothing to collect), and closing a runtime (a retired one has none).
 */
const neverResurrects = [/^\/v1\/daemon\/retire$/, /^\/v1\/sweep$/, /^\/v1\/runtimes\/[^/]+\/collect$/, /^\/v1\/agents\/[^/]+\/close$/]

const isRead = (method: string) => method === "GET" || method === "HEAD"

/** A mutation (create, prompt, permission answer, interrupt…): the only kind of request that may start a daemon. */
export const startsDaemon = (request: Pick<RoutedRequest, "method" | "path">) =>
  !isRead(request.method) && !neverResurrects.some((pattern) => pattern.test(request.path))

const promptPath = /^\/v1\/agents\/[^/]+\/prompts$/

const JsonObject = Schema.fromJsonString(Schema.Record(Schema.String, Schema.Unknown))
const decodeObject = Schema.decodeUnknownOption(JsonObject)

/**
 * A prompt without a client message id gets one here, so that the hub's own retries of it (across
 * a retirement, after a connection that broke) are answered from the daemon's journal and never
 * run it twice. A body the daemon would refuse anyway is passed on as it is.
 */
const withClientMessageId = (request: RoutedRequest): RoutedRequest => {
  if (request.method !== "POST" || !promptPath.test(request.path)) return request
  const body = decodeObject(new TextDecoder().decode(request.body))
  if (Option.isNone(body) || body.value["clientMessageId"] !== undefined) return request
  const payload = { ...body.value, clientMessageId: `hub-${randomBytes(12).toString("hex")}` }
  return { ...request, body: new TextEncoder().encode(JSON.stringify(payload)) }
}

/** A request the daemon may receive again without doing it twice: it carries its client message id. */
const repeatable = (request: RoutedRequest) => request.method === "POST" && promptPath.test(request.path)

const Refusal = Schema.fromJsonString(Schema.Struct({ _tag: Schema.String, retryAfterSeconds: Schema.optionalKey(Schema.Number) }))
const decodeRefusal = Schema.decodeUnknownOption(Refusal)

/** A 503 from a daemon that is retiring or shutting down: the request was not admitted. */
const notAdmitted = (response: RoutedResponse) => {
  if (response.status !== 503) return Option.none()
  const refusal = decodeRefusal(new TextDecoder().decode(response.body))
  return Option.isSome(refusal) && (refusal.value._tag === "DaemonRetiring" || refusal.value._tag === "ShuttingDown")
    ? Option.some(refusal.value)
    : Option.none()
}

// ---- rows --------------------------------------------------------------------------------------

const ticksPerSecond = 100

/** When a process started, from its start time in ticks since boot. */
const startedAt = (startTime: number | null): string | null => {
  if (startTime === null) return null
  try {
    const line = fs.readFileSync("/proc/stat", "utf8").split("\n").find((l) => l.startsWith("btime "))
    const boot = line === undefined ? NaN : Number(line.slice(6))
    return Number.isFinite(boot) ? new Date((boot + startTime / ticksPerSecond) * 1000).toISOString() : null
  } catch {
    return null
  }
}

const emptyRow = (home: ManagedHome) => ({
  name: home.name,
  home: home.dir,
  archived: home.archived === true,
  pid: null,
  startTime: null,
  startedAt: null,
  instanceId: null,
  protocolVersion: null,
  compatible: null,
  packageVersion: null,
  idleTimeout: null,
  phase: null,
  deadline: null,
  blockers: [],
  lastAttempt: null,
  failure: null,
  memoryBytes: null,
  canRetire: false
})

const identityFields = (identity: DaemonIdentity) => ({
  pid: identity.pid,
  startTime: identity.startTime,
  startedAt: startedAt(identity.startTime),
  instanceId: identity.instanceId,
  protocolVersion: identity.protocolVersion,
  compatible: identity.protocolVersion === daemonProtocolVersion,
  packageVersion: identity.packageVersion,
  idleTimeout: identity.idleTimeout
})

const archivedNote = (home: ManagedHome) =>
  home.archived === true ? ` Archived: new work is refused (quiesce hub unarchive ${home.name}).` : ""

const rowOf = (home: ManagedHome, found: Discovered, stopped: boolean, memoryBytes: number | null): DaemonRow => {
  switch (found.state) {
    case "running": {
      const { status } = found
      const note = status.failure !== null
        ? `Its retirement failed (${status.failure.kind}); it refuses work and keeps its runtimes until an operator stops it ` +
          `(quiesce daemons stop ${home.name} --confirm ${home.name}:${status.pid}) and resumes it.`
        : status.phase === "retiring"
        ? "Deciding whether to retire: mutations wait for the outcome."
        : status.idleTimeout.millis === null
        ? "Serving; it has no idle timer, so it stays until stopped."
        : "Serving; it retires itself once idle for its timeout, and the next mutation brings it back."
      return {
        ...emptyRow(home),
        ...identityFields(found.daemon.identity),
        state: "running",
        idleTimeout: status.idleTimeout,
        phase: status.phase,
        deadline: status.deadline,
        blockers: [...new Set(status.blockers.map((b) => b.category))].sort(),
        lastAttempt: status.lastAttempt,
        failure: status.failure,
        memoryBytes,
        canRetire: home.archived !== true,
        note: note + archivedNote(home)
      }
    }
    case "unavailable":
      return {
        ...emptyRow(home),
        ...identityFields(found.identity),
        state: "unavailable",
        memoryBytes,
        note: `Alive but unavailable: ${found.reason}. Its exit is not confirmed, so nothing is started beside it; ` +
          `mutations wait for it, then resume the home.` + archivedNote(home)
      }
    case "incompatible":
      return {
        ...emptyRow(home),
        ...identityFields(found.identity),
        state: "incompatible",
        memoryBytes,
        note: `It speaks daemon protocol ${found.identity.protocolVersion}, this hub ${daemonProtocolVersion}: its state is ` +
          `unknown, so the hub never routes to it, retires it or stops it on its own. Stop it explicitly ` +
          `(quiesce daemons stop ${home.name} --confirm ${home.name}:${found.identity.pid}), then resume it.` + archivedNote(home)
      }
    case "absent":
      return stopped
        ? {
          ...emptyRow(home),
          state: "stopped",
          note: `Force-stopped: it starts again only on quiesce daemons resume ${home.name}.` + archivedNote(home)
        }
        : {
          ...emptyRow(home),
          state: "retired",
          note: (found.stale === null ? "" : `Its record is stale (${found.stale}) and is not acted on. `) +
            "No daemon runs: the next mutation starts one and resumes its agents; reads never do." + archivedNote(home)
        }
  }
}

// ---- the service -------------------------------------------------------------------------------

const poll = Duration.millis(100)

export const layer = (options: HubDaemonsOptions): Layer.Layer<HubDaemons, never, HttpClient.HttpClient | ProcessInspection> =>
  Layer.effect(
    HubDaemons,
    Effect.gen(function*() {
      const http = yield* HttpClient.HttpClient
      const inspection = yield* ProcessInspection
      const { hubHome } = options
      const unavailableWait = Duration.toMillis(Duration.fromInputUnsafe(options.unavailableWait ?? "60 seconds"))
      const readyTimeoutMillis = Duration.toMillis(Duration.fromInputUnsafe(options.readyTimeout ?? "30 seconds"))
      const stopGrace = Duration.toMillis(Duration.fromInputUnsafe(options.stopGrace ?? "10 seconds"))

      // Daemons that answered with their own id: while their records stand, no status call per request.
      const verifiedInstances: VerifiedDaemons = new Map()
      // One launch at a time per home (across processes, the daemon's home lock).
      const lanes = new Map<string, Semaphore.Semaphore>()
      const laneOf = (name: string) => {
        let lane = lanes.get(name)
        if (lane === undefined) lanes.set(name, lane = Semaphore.makeUnsafe(1))
        return lane
      }

      const homeNamed = (config: HubConfig, name: string) => {
        const home = findHome(config, name)
        return home === undefined
          ? Effect.fail(new HomeNotManaged({ name, message: `The hub manages no home named "${name}" (see quiesce hub list)` }))
          : Effect.succeed(home)
      }

      const memoryOf = (identity: DaemonIdentity) =>
        inspection.sample(identity.pid, identity.startTime ?? undefined).pipe(
          Effect.map((sample) => Option.isSome(sample) ? sample.value.rssBytes : null)
        )

      const rowFor = (home: ManagedHome) =>
        Effect.gen(function*() {
          const found = yield* discover(home)
          const identity = found.state === "running" ? found.daemon.identity : found.state === "absent" ? null : found.identity
          const memory = identity === null ? null : yield* memoryOf(identity)
          return rowOf(home, found, isStopped(hubHome, home.name), memory)
        })

      const inventory = Effect.gen(function*() {
        const config = yield* readHubConfig(hubHome)
        const daemons = yield* Effect.forEach(config.homes, rowFor, { concurrency: 8 })
        return { protocolVersion: daemonProtocolVersion, hubDefaultIdleTimeout: hubDefault(config), daemons }
      })

      /**
       * Starts the home's daemon unless one is there by the time this caller's turn comes (another
       * caller, or another hub, started it). Not interruptible: a caller that goes away does not
       * leave a half-started daemon for the next one to start beside.
       */
      const ensureStarted = (home: ManagedHome, config: HubConfig) =>
        laneOf(home.name).withPermit(Effect.gen(function*() {
          const found = yield* discover(home)
          if (found.state !== "absent") return
          const launched = yield* launchDaemon({
            hubHome,
            home,
            idleTimeout: hubDefault(config).value,
            readyTimeoutMillis
          }).pipe(Effect.result)
          if (launched._tag === "Success") {
            yield* Effect.logInfo(`Started the daemon of ${home.name}`).pipe(
              Effect.annotateLogs({ pid: launched.success.pid, home: home.dir, idleTimeout: hubDefault(config).value })
            )
            return
          }
          // Lost a race to another starter (another hub's daemon holds the home lock): that one
          // serves once it is ready.
          const until = Date.now() + readyTimeoutMillis
          while (liveLockHolder(home.dir) !== undefined && Date.now() < until) {
            if ((yield* discover(home)).state !== "absent") return
            yield* Effect.sleep(poll)
          }
          if ((yield* discover(home)).state !== "absent") return
          return yield* launched.failure
        })).pipe(Effect.uninterruptible)

      const unavailable = (home: ManagedHome, why: string) =>
        new DaemonUnavailable({
          name: home.name,
          message: `The daemon of ${home.name} is unavailable: ${why}. Retry the same request (with the same client ` +
            "message id); it resumes the home once the daemon's exit is confirmed",
          retryAfterSeconds: retryWhileDecidingSeconds
        })

      const forward = makeForwarder()

      const route = (name: string, received: RoutedRequest): Effect.Effect<RoutedResponse, RoutingError> =>
        Effect.gen(function*() {
          const request = withClientMessageId(received)
          const mutation = startsDaemon(request)
          const until = Date.now() + unavailableWait
          const waitOrGiveUp = (home: ManagedHome, why: string) =>
            Date.now() > until ? Effect.fail(unavailable(home, why)) : Effect.sleep(poll)
          while (true) {
            const config = yield* readHubConfig(hubHome)
            const home = yield* homeNamed(config, name)
            if (!isRead(request.method) && home.archived === true) {
              return yield* new HomeArchived({
                name,
                message: `The home ${name} is archived: its data is kept and new work is refused (quiesce hub unarchive ${name})`
              })
            }
            const found = yield* locate(home, verifiedInstances)
            switch (found.state) {
              case "incompatible":
                return yield* new DaemonIncompatible({
                  name,
                  protocolVersion: found.identity.protocolVersion,
                  message: `The daemon of ${name} (pid ${found.identity.pid}) speaks protocol ${found.identity.protocolVersion}, ` +
                    `this hub ${daemonProtocolVersion}; it is left alone. Stop it explicitly, then resume the home`
                })
              case "absent": {
                if (isStopped(hubHome, name)) {
                  return yield* new HomeStopped({
                    name,
                    message: `The home ${name} was force-stopped; start it again with: quiesce daemons resume ${name}`
                  })
                }
                if (!mutation) {
                  return yield* new HomeRetired({
                    name,
                    message: `The daemon of ${name} is retired (its agents are saved); a read does not start it, the next ` +
                      "mutation (a prompt, say) does"
                  })
                }
                yield* ensureStarted(home, config)
                continue
              }
              case "unavailable":
                if (!mutation) return yield* unavailable(home, found.reason)
                yield* waitOrGiveUp(home, found.reason)
                continue
              case "verified":
              case "running": {
                const answer = yield* forward(found.daemon, request).pipe(Effect.result)
                if (answer._tag === "Failure") {
                  const code = answer.failure.code
                  // Refused: nothing reached the daemon. Otherwise only a repeatable request is sent again.
                  if (mutation && (code === "ECONNREFUSED" || repeatable(request))) {
                    yield* waitOrGiveUp(home, `the connection failed (${code ?? answer.failure.message})`)
                    continue
                  }
                  return yield* unavailable(home, `the connection failed (${code ?? answer.failure.message})`)
                }
                const refusal = notAdmitted(answer.success)
                if (!mutation || Option.isNone(refusal)) return answer.success
                // A failed commit holds the daemon until an operator acts: its own answer says so.
                if ((refusal.value.retryAfterSeconds ?? 0) > retryWhileDecidingSeconds) return answer.success
                // Not admitted while it decides: wait for the outcome (it exits, or serves on), then again.
                yield* waitOrGiveUp(home, "it is retiring")
                continue
              }
            }
          }
        })

      /** The home's daemon, if it is still the process the caller saw. */
      const verified = (home: ManagedHome, identity: RenderedIdentity) =>
        Effect.gen(function*() {
          const found = yield* discover(home)
          const current = found.state === "running" ? found.daemon.identity : found.state === "absent" ? null : found.identity
          if (
            current === null || current.pid !== identity.pid || current.startTime !== identity.startTime ||
            current.instanceId !== identity.instanceId || !recordedProcessAlive(current)
          ) {
            return yield* new StaleIdentity({
              name: home.name,
              message: `The daemon of ${home.name} is no longer pid ${identity.pid} (instance ${identity.instanceId}): ` +
                "nothing was done; list the daemons again and act on what is there now"
            })
          }
          return { found, current }
        })

      const retire = (name: string, identity: RenderedIdentity) =>
        Effect.gen(function*() {
          const home = yield* homeNamed(yield* readHubConfig(hubHome), name)
          const { found } = yield* verified(home, identity)
          if (found.state === "incompatible") {
            return yield* new DaemonIncompatible({
              name,
              protocolVersion: found.identity.protocolVersion,
              message: `The daemon of ${name} speaks protocol ${found.identity.protocolVersion}: it cannot be retired safely`
            })
          }
          if (found.state !== "running") return yield* unavailable(home, found.state === "unavailable" ? found.reason : "it is gone")
          return yield* daemonClient(found.daemon).pipe(
            Effect.flatMap((api) => api.daemon.retire()),
            Effect.provideService(HttpClient.HttpClient, http),
            Effect.catchIf(
              (error) => !(error instanceof RetirementRefused || error instanceof RetirementFailed),
              (error) => Effect.fail(unavailable(home, `its retire now could not be completed (${error.message})`))
            )
          )
        })

      const groupLeader = (pid: number) => readStat(pid)?.pgid === pid

      const signal = (target: number, name: NodeJS.Signals) => {
        try {
          process.kill(target, name)
        } catch {
          // Gone already.
        }
      }

      const stop = (name: string, identity: RenderedIdentity, confirm: string) =>
        Effect.gen(function*() {
          const home = yield* homeNamed(yield* readHubConfig(hubHome), name)
          const expected = `${name}:${identity.pid}`
          if (confirm !== expected) {
            return yield* new ConfirmationRequired({
              message: `Force stop of ${name} (pid ${identity.pid}) needs --confirm ${expected}: running work and watches ` +
                "may be interrupted, and the home stays stopped until quiesce daemons resume"
            })
          }
          const { current } = yield* verified(home, identity)
          // Marked first: a mutation arriving while it stops must not start a replacement.
          yield* markStopped(hubHome, name, current.pid)
          yield* Effect.logWarning(`Force-stopping the daemon of ${name}`).pipe(Effect.annotateLogs({ pid: current.pid }))
          signal(current.pid, "SIGTERM")
          const deadline = Date.now() + stopGrace
          while (recordedProcessAlive(current) && Date.now() < deadline) yield* Effect.sleep(poll)
          const killed = recordedProcessAlive(current)
          if (killed) {
            // Its group when it leads one (every daemon a hub starts does); the process alone otherwise.
            signal(groupLeader(current.pid) ? -current.pid : current.pid, "SIGKILL")
            while (recordedProcessAlive(current)) yield* Effect.sleep(poll)
          }
          return { name, pid: current.pid, killed }
        })

      const resume = (name: string) =>
        Effect.gen(function*() {
          const config = yield* readHubConfig(hubHome)
          const home = yield* homeNamed(config, name)
          if (home.archived === true) {
            return yield* new HomeArchived({ name, message: `The home ${name} is archived (quiesce hub unarchive ${name})` })
          }
          yield* clearStopped(hubHome, name)
          const found = yield* discover(home)
          if (found.state === "incompatible") {
            return yield* new DaemonIncompatible({
              name,
              protocolVersion: found.identity.protocolVersion,
              message: `The daemon of ${name} speaks protocol ${found.identity.protocolVersion}; stop it before resuming`
            })
          }
          if (found.state === "unavailable") return yield* unavailable(home, found.reason)
          if (found.state === "absent") yield* ensureStarted(home, config)
          return yield* rowFor(home)
        })

      return HubDaemons.of({ inventory, route, retire, stop, resume })
    })
  )
