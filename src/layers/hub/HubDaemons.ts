/**
 * The hub's daemons (R3–R6): the resident inventory, requests routed to a home's daemon (starting
 * one for a mutation when none runs, once per home, and carrying a request across a retirement),
 * and the operator's actions on a rendered identity: retire now, force stop, resume.
 *
 * The daemon owns its idle timer: the hub only observes (passive status reads) and recovers. It
 * never signals a daemon to retire it, and never acts on a record it has not verified.
 */
import { Clock, Deferred, Duration, Effect, Layer, Option, Semaphore, type Stream } from "effect"
import { HttpClient } from "effect/http"
import {
  ConfirmationRequired,
  DaemonIncompatible,
  type DaemonStartFailed,
  DaemonUnavailable,
  HomeArchived,
  HomeNotManaged,
  HomeRetired,
  HomeStopped,
  type HubConfig,
  type ManagedHome,
  type RoutingError,
  StaleIdentity
} from "../../domain/hub.ts"
import { sumMemoryTotals } from "../../domain/memoryTotals.ts"
import { agentAttributes } from "../../domain/spans.ts"
import type { DaemonRow, PreparedRequest, RenderedIdentity, RoutedResponse } from "../../domain/hubDaemons.ts"
import {
  daemonProtocolVersion,
  type DaemonIdentity,
  RetirementFailed,
  RetirementRefused,
  retryWhileDecidingSeconds
} from "../../domain/retirement.ts"
import { liveLockHolder } from "../host/Home.ts"
import { readStat, recordedProcessAlive } from "../../platform/procfs.ts"
import { HubDaemons } from "../../services/HubDaemons.ts"
import { ProcessInspection } from "../../services/ProcessInspection.ts"
import {
  daemonClient,
  discover as discoverWithClient,
  locate as locateWithClient,
  type VerifiedDaemons
} from "./discovery.ts"
import { type ForwardFailed, makeForwarder, openStream } from "./forward.ts"
import { clearStopped, daemonLogFile, findHome, hubDefault, isStopped, markStopped, readHubConfig } from "./hubFiles.ts"
import { launchDaemon } from "./launch.ts"
import { relay, type Whereabouts } from "./relay.ts"
import { isRead, notAdmitted } from "./requests.ts"
import { savedStoreAnswer } from "./savedAnswers.ts"
import { makeSavedMemory } from "./savedMemory.ts"
import { identityOf, rowOf } from "./rows.ts"

/** How a start ended: one was started (it may have retired at once), one is there, one holds the lock unseen, or the home is stopped. */
type StartOutcome = "started" | "present" | "held" | "stopped"

/** The hub's home (its `hub.json`, logs and stop markers) and how long it waits on daemons. */
export interface HubDaemonsOptions {
  readonly hubHome: string
  /** How long a mutation waits for a retiring or unresponsive daemon's exit to be confirmed. Default 60 s. */
  readonly unavailableWait?: Duration.Input | undefined
  /** How long a daemon may take to become ready. Default 30 s. */
  readonly readyTimeout?: Duration.Input | undefined
  /**
   * How long a force stop waits after SIGTERM before it kills the daemon's group, at least: a
   * daemon whose record names a shutdown deadline gets that deadline and 5 s. Default 10 s.
   */
  readonly stopGrace?: Duration.Input | undefined
}

/** How long a request other than a waiting prompt may take at the daemon before the hub gives up on it. */
const responseTimeoutMillis = 120_000

/** How many daemons one request may start (one that retires at once is started again, but not forever). */
const startsPerRequest = 3

// ---- the service -------------------------------------------------------------------------------

const poll = Duration.millis(100)

/** How often a relay of live events looks for its home's daemon while there is none. */
const relayPoll = Duration.millis(500)

/** How long one discovery of every home serves the inventory. */
const inventorySnapshotTtl = Duration.seconds(1)

/**
 * The hub's daemons over the homes listed in `hub.json`, found through their rendezvous records
 * and reached over HTTP; daemons it starts are detached and outlive the hub.
 */
export const layer = (options: HubDaemonsOptions): Layer.Layer<HubDaemons, never, HttpClient.HttpClient | ProcessInspection> =>
  Layer.effect(
    HubDaemons,
    Effect.gen(function*() {
      const http = yield* HttpClient.HttpClient
      // Every status call to a daemon goes through the hub's client (node:http in the hub program).
      const discover = (home: ManagedHome) => discoverWithClient(home).pipe(Effect.provideService(HttpClient.HttpClient, http))
      const locate = (home: ManagedHome, verified: VerifiedDaemons) =>
        locateWithClient(home, verified).pipe(Effect.provideService(HttpClient.HttpClient, http))
      const inspection = yield* ProcessInspection
      const { hubHome } = options
      const unavailableWait = Duration.toMillis(Duration.fromInputUnsafe(options.unavailableWait ?? "60 seconds"))
      const readyTimeoutMillis = Duration.toMillis(Duration.fromInputUnsafe(options.readyTimeout ?? "30 seconds"))
      const stopGrace = Duration.toMillis(Duration.fromInputUnsafe(options.stopGrace ?? "10 seconds"))

      // Daemons that answered with their own id: while their records stand, no status call per request.
      const verifiedDaemons: VerifiedDaemons = new Map()
      // One launch at a time per home (across processes, the daemon's home lock).
      const lanes = new Map<string, Semaphore.Semaphore>()
      const starting = new Map<string, Deferred.Deferred<StartOutcome, DaemonStartFailed>>()
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

      const archivedError = (name: string) =>
        new HomeArchived({
          name,
          message: `The home ${name} is archived: its data is kept and readable, nothing else is done (quiesce hub unarchive ${name})`
        })

      const stoppedError = (name: string) =>
        new HomeStopped({ name, message: `The home ${name} was force-stopped; start it again with: quiesce daemons resume ${name}` })

      const incompatibleError = (name: string, identity: DaemonIdentity, what: string) =>
        new DaemonIncompatible({
          name,
          protocolVersion: identity.protocolVersion,
          message: `The daemon of ${name} (pid ${identity.pid}) speaks protocol ${identity.protocolVersion}, this hub ` +
            `${daemonProtocolVersion}: ${what}`
        })

      /**
       * The memory of each daemon found, from ONE sampling query (one deadline, one scan of /proc):
       * a query per home would crowd the others out of the sampling slots. A sample of another
       * process than the record names (its pid reused) is unmeasured.
       */
      const memoryOfAll = (identities: ReadonlyArray<DaemonIdentity | null>) =>
        Effect.gen(function*() {
          const pids = identities.flatMap((identity) => identity === null ? [] : [identity.pid])
          const samples = yield* inspection.sampleAll(pids)
          return identities.map((identity) => {
            if (identity === null) return null
            const sample = samples.get(identity.pid) ?? Option.none()
            return Option.isSome(sample) && sample.value.startTime === identity.startTime ? sample.value.rssBytes : null
          })
        })

      const savedMemory = makeSavedMemory()

      const rowsFor = (homes: ReadonlyArray<ManagedHome>) =>
        Effect.gen(function*() {
          const found = yield* Effect.forEach(homes, discover, { concurrency: 8 })
          const memory = yield* memoryOfAll(found.map(identityOf))
          const rows = homes.map((home, i) => rowOf(home, found[i]!, isStopped(hubHome, home.name), memory[i]!))
          // A home without a daemon counts what its releases gave back, from its saved store.
          return yield* Effect.forEach(rows, (row) =>
            row.state === "retired" || row.state === "stopped"
              ? Effect.map(savedMemory(row.home), (totals): DaemonRow => totals === undefined ? row : { ...row, memoryTotals: totals })
              : Effect.succeed(row), { concurrency: 8 })
        })

      const discoverAll = Effect.gen(function*() {
        const config = yield* readHubConfig(hubHome)
        const daemons = yield* rowsFor(config.homes)
        const counted = daemons.flatMap((row) => row.memoryTotals === undefined ? [] : [row.memoryTotals])
        return {
          protocolVersion: daemonProtocolVersion,
          hubDefaultIdleTimeout: hubDefault(config),
          daemons,
          ...(counted.length === 0 ? {} : { memoryTotals: sumMemoryTotals(counted) })
        }
      })
      /**
       * One discovery serves every caller within a second (pages left open poll it): however many
       * watch, each daemon gets at most one status read a second. An action forgets it at once.
       */
      const [inventory, forgetInventory] = yield* Effect.cachedInvalidateWithTTL(discoverAll, inventorySnapshotTtl)

      /**
       * One start at a time per home, under the home's lane (which a force stop also takes): the
       * home is checked again inside it — stopped, a daemon there by now (another caller's, or
       * another hub's), or a live process holding the home lock without a record yet (starting or
       * exiting: nothing is started beside it).
       */
      const startOnce = (home: ManagedHome, config: HubConfig): Effect.Effect<StartOutcome, DaemonStartFailed> =>
        laneOf(home.name).withPermit(Effect.gen(function*() {
          yield* Effect.annotateCurrentSpan("quiesce.home", home.name)
          if (isStopped(hubHome, home.name)) return "stopped" as const
          if ((yield* discover(home)).state !== "absent") return "present" as const
          if (liveLockHolder(home.dir) !== undefined) return "held" as const
          const launchedAt = yield* Clock.currentTimeMillis
          const launched = yield* launchDaemon({
            hubHome,
            home,
            idleTimeout: hubDefault(config).value,
            readyTimeoutMillis
          }).pipe(Effect.result)
          if (launched._tag === "Success") {
            if (launched.success === "retired") return "started" as const
            // From the launch to the daemon's record (its start to ready, and the hub's poll).
            const took = (yield* Clock.currentTimeMillis) - launchedAt
            yield* Effect.logInfo(`Started the daemon of ${home.name}`).pipe(
              Effect.annotateLogs({ pid: launched.success.pid, home: home.dir, idleTimeout: hubDefault(config).value, launchTook: `${took}ms` })
            )
            return "started" as const
          }
          // Lost a race to another starter (another hub's daemon holds the home lock): that one
          // serves once it is ready.
          if ((yield* discover(home)).state !== "absent") return "present" as const
          if (liveLockHolder(home.dir) !== undefined) return "held" as const
          return yield* launched.failure
        })).pipe(
          Effect.tap((outcome) => Effect.annotateCurrentSpan("quiesce.start.outcome", outcome)),
          Effect.withSpan("Hub.startDaemon")
        )

      /**
       * Starts the home's daemon, or waits for the start already under way and shares its outcome.
       * The start itself is not interruptible: a caller that goes away does not leave a
       * half-started daemon for the next one to start beside.
       */
      const ensureStarted = (home: ManagedHome, config: HubConfig): Effect.Effect<StartOutcome, DaemonStartFailed> =>
        Effect.suspend(() => {
          const under = starting.get(home.name)
          if (under !== undefined) return Deferred.await(under)
          const outcome = Deferred.makeUnsafe<StartOutcome, DaemonStartFailed>()
          starting.set(home.name, outcome)
          return startOnce(home, config).pipe(
            Effect.exit,
            Effect.flatMap((exit) => Deferred.done(outcome, exit)),
            Effect.ensuring(Effect.andThen(Effect.sync(() => starting.delete(home.name)), forgetInventory)),
            Effect.uninterruptible,
            Effect.andThen(Deferred.await(outcome))
          )
        })

      const unavailable = (home: ManagedHome, why: string, prompt?: PreparedRequest["prompt"]) =>
        new DaemonUnavailable({
          name: home.name,
          message: `The daemon of ${home.name} is unavailable: ${why}. Retry the same request` + (
            prompt === undefined
              ? ""
              : ` with client message id ${prompt.clientMessageId}${prompt.injected ? " (the hub gave it that id)" : ""}, which returns the same turn`
          ) + "; the home is resumed once the daemon's exit is confirmed",
          retryAfterSeconds: retryWhileDecidingSeconds
        })

      const forward = makeForwarder()

      const route = (name: string, prepared: PreparedRequest): Effect.Effect<RoutedResponse, RoutingError> =>
        Effect.gen(function*() {
          const { mutation, prompt, request } = prepared
          const until = Date.now() + unavailableWait
          const waitOrGiveUp = (home: ManagedHome, why: string) =>
            Date.now() > until ? Effect.fail(unavailable(home, why, prompt)) : Effect.sleep(poll)
          let starts = 0
          while (true) {
            const config = yield* readHubConfig(hubHome)
            const home = yield* homeNamed(config, name)
            if (!isRead(request.method) && home.archived === true) return yield* archivedError(name)
            const found = yield* locate(home, verifiedDaemons)
            switch (found.state) {
              case "incompatible":
                return yield* incompatibleError(name, found.identity, "it is left alone: stop it explicitly, then resume the home")
              case "absent": {
                const stopped = isStopped(hubHome, name)
                // Its agents and turns are read from its saved store: a read never starts a daemon.
                const saved = mutation ? Option.none() : savedStoreAnswer(home.dir, request, stopped ? "stopped" : "retired")
                if (Option.isSome(saved)) {
                  return yield* saved.value.pipe(Effect.catchTag("HomeHeld", () =>
                    Effect.fail(unavailable(home, "a process holds its home lock without a record (starting or exiting)"))
                  ))
                }
                if (stopped) return yield* stoppedError(name)
                if (!mutation) {
                  return yield* new HomeRetired({
                    name,
                    message: `The daemon of ${name} is retired (its agents are saved: their list and turns are read from ` +
                      "its saved store); a read does not start it, the next mutation (a prompt, say) does"
                  })
                }
                if (starts >= startsPerRequest) {
                  return yield* unavailable(home, `its daemon was started ${starts} times and did not stay (see ${daemonLogFile(hubHome, name)})`, prompt)
                }
                const outcome = yield* ensureStarted(home, config)
                if (outcome === "stopped") return yield* stoppedError(name)
                if (outcome === "held") yield* waitOrGiveUp(home, "a process holds its home lock without a record (starting or exiting)")
                if (outcome === "started") starts++
                continue
              }
              case "unavailable":
                if (!mutation) return yield* unavailable(home, found.reason, prompt)
                yield* waitOrGiveUp(home, found.reason)
                continue
              case "verified":
              case "running": {
                const answer = yield* forward(found.daemon, request, {
                  responseTimeoutMillis: prompt?.waits === true ? undefined : responseTimeoutMillis
                }).pipe(Effect.result)
                if (answer._tag === "Failure") {
                  // Verified afresh next time: a daemon that stopped answering is not routed to on trust.
                  verifiedDaemons.delete(home.dir)
                  const why = `the request failed (${answer.failure.code ?? answer.failure.message})`
                  // Refused: nothing reached the daemon. Otherwise only a prompt (it carries its id) is sent again.
                  if (mutation && (answer.failure.code === "ECONNREFUSED" || prompt !== undefined)) {
                    yield* waitOrGiveUp(home, why)
                    continue
                  }
                  return yield* unavailable(home, why, prompt)
                }
                const refusal = notAdmitted(answer.success)
                if (!mutation || Option.isNone(refusal)) return answer.success
                // A failed commit holds the daemon until an operator acts: its own answer says so.
                if ((refusal.value.retryAfterSeconds ?? 0) > retryWhileDecidingSeconds) return answer.success
                // Not admitted while it decides (or shuts down): wait for the outcome (it exits, or
                // serves on), then again. A prompt it had accepted is a repeat by then.
                yield* waitOrGiveUp(home, "it is retiring")
                continue
              }
            }
          }
        }).pipe(Effect.withSpan("Hub.route", {
          attributes: { "quiesce.home": name, "http.request.method": prepared.request.method, "url.path": prepared.request.path }
        }))

      /** Where the home's daemon is for a relay of `path` (an agent's events): the relay never starts one. */
      const whereabouts = (name: string, path: string) =>
        Effect.gen(function*() {
          const home = yield* homeNamed(yield* readHubConfig(hubHome), name)
          const found = yield* locate(home, verifiedDaemons)
          if (found.state === "incompatible") {
            return yield* incompatibleError(name, found.identity, "its events cannot be relayed: stop it explicitly, then resume the home")
          }
          const where: Whereabouts = found.state === "running" || found.state === "verified"
            ? {
              _tag: "running",
              instanceId: found.daemon.identity.instanceId,
              open: (lastEventId) =>
                openStream(found.daemon, path, lastEventId === undefined ? {} : { "last-event-id": lastEventId }).pipe(
                  // Verified afresh next time: a daemon that stopped answering is not opened on trust.
                  Effect.tapError(() => Effect.sync(() => verifiedDaemons.delete(home.dir)))
                )
            }
            : { _tag: "none" }
          return { home, where }
        })

      const follow = (name: string, agentId: string | undefined, lastEventId: string | undefined) =>
        Effect.gen(function*() {
          const agentPath = agentId === undefined ? undefined : `/v1/agents/${encodeURIComponent(agentId)}`
          const path = agentPath === undefined ? "/v1/events" : `${agentPath}/events`
          const { home, where } = yield* whereabouts(name, path)
          let first: Stream.Stream<Uint8Array, ForwardFailed> | undefined
          if (where._tag === "running") {
            // Opened before the reader is answered: a prompt it sends next is followed whole. A
            // refusal (an unknown agent) is the reader's answer; a daemon that cannot answer now
            // (stopping, unreachable) is waited for as none.
            const opened = yield* Effect.result(where.open(lastEventId))
            if (opened._tag === "Success") {
              if (opened.success._tag === "stream") first = opened.success.body
              else if (opened.success.response.status < 500) return { _tag: "answer", response: opened.success.response } as const
            }
          } else if (agentPath !== undefined) {
            // No daemon: an agent its saved store does not know is refused as the daemon would refuse it.
            const read = { method: "GET", path: agentPath, search: "", contentType: undefined, body: new Uint8Array() }
            const saved = savedStoreAnswer(home.dir, read, isStopped(hubHome, name) ? "stopped" : "retired")
            if (Option.isSome(saved)) {
              const answer = yield* Effect.result(saved.value)
              if (answer._tag === "Success" && answer.success.status === 404) return { _tag: "answer", response: answer.success } as const
            }
          }
          return {
            _tag: "stream",
            body: relay({ whereabouts: Effect.map(whereabouts(name, path), ({ where }) => where), poll: relayPoll }, {
              lastEventId,
              instanceId: where._tag === "running" ? where.instanceId : undefined,
              first
            })
          } as const
        }).pipe(Effect.withSpan("Hub.follow", {
          attributes: { "quiesce.home": name, ...(agentId === undefined ? {} : agentAttributes(agentId)) }
        }))

      /** The home's daemon, if it is still the process the caller saw. */
      const verified = (home: ManagedHome, identity: RenderedIdentity) =>
        Effect.gen(function*() {
          const found = yield* discover(home)
          const current = identityOf(found)
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
          if (home.archived === true) return yield* archivedError(name)
          const { found } = yield* verified(home, identity)
          if (found.state === "incompatible") return yield* incompatibleError(name, found.identity, "it cannot be retired safely")
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
          // Under the home's lane: no start runs while the identity is checked, marked and signalled.
          return yield* laneOf(name).withPermit(Effect.gen(function*() {
            const { current } = yield* verified(home, identity)
            // Marked first: a mutation arriving while it stops must not start a replacement.
            yield* markStopped(hubHome, name, current.pid)
            yield* Effect.logWarning(`Force-stopping the daemon of ${name}`).pipe(Effect.annotateLogs({ pid: current.pid }))
            signal(current.pid, "SIGTERM")
            // A daemon's record says how long its orderly shutdown may take: it gets that, and 5 s
            // more (as quiesce stop waits), before its group is killed mid-shutdown.
            const shutdownGrace = Math.max(stopGrace, (current.shutdownDeadlineMillis ?? 0) + 5_000)
            const graceEnds = Date.now() + shutdownGrace
            while (recordedProcessAlive(current) && Date.now() < graceEnds) yield* Effect.sleep(poll)
            const killed = recordedProcessAlive(current)
            if (killed) {
              // Its group when it leads one (every daemon a hub starts does); the process alone otherwise.
              signal(groupLeader(current.pid) ? -current.pid : current.pid, "SIGKILL")
              const killEnds = Date.now() + stopGrace
              while (recordedProcessAlive(current) && Date.now() < killEnds) yield* Effect.sleep(poll)
            }
            return { name, pid: current.pid, killed, exited: !recordedProcessAlive(current) }
          }))
          // Once begun, a stop runs to its end even if the caller goes away.
        }).pipe(Effect.uninterruptible)

      const resume = (name: string) =>
        Effect.gen(function*() {
          const config = yield* readHubConfig(hubHome)
          const home = yield* homeNamed(config, name)
          if (home.archived === true) return yield* archivedError(name)
          const found = yield* discover(home)
          if (found.state === "incompatible") return yield* incompatibleError(name, found.identity, "stop it before resuming")
          if (found.state === "unavailable") return yield* unavailable(home, found.reason)
          // The stop is lifted only once nothing stands in the way of the start.
          yield* clearStopped(hubHome, name)
          if (found.state === "absent") {
            const outcome = yield* ensureStarted(home, config)
            if (outcome === "held") return yield* unavailable(home, "a process holds its home lock without a record")
          }
          return (yield* rowsFor([home]))[0]!
        })

      const thenForget = <A, E>(action: Effect.Effect<A, E>) => Effect.ensuring(action, forgetInventory)
      return HubDaemons.of({
        inventory,
        // A change routed to a daemon (its own retire now, say) may change its row too.
        route: (name, prepared) => isRead(prepared.request.method) ? route(name, prepared) : thenForget(route(name, prepared)),
        follow,
        retire: (name, identity) => thenForget(retire(name, identity)),
        stop: (name, identity, confirm) => thenForget(stop(name, identity, confirm)),
        resume: (name) => thenForget(resume(name))
      })
    })
  )
