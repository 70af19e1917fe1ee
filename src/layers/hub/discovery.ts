/**
 * How the hub finds a home's daemon: through the daemon's rendezvous record (`daemon.json`), and
 * only there (no process scan). A record counts only when its pid is alive, its start time is the
 * recorded one, and the daemon answers with the record's instance id; anything else is stale and
 * is never acted on (a reused pid is neither adopted nor signalled).
 */
import { Duration, Effect, Option } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import * as fs from "node:fs"
import * as path from "node:path"
import { daemonProtocolVersion, type DaemonIdentity } from "../../domain/retirement.ts"
import type { ManagedHome } from "../../domain/hub.ts"
import { tokenProblem } from "../host/Home.ts"
import { isExited, readStat } from "../../platform/procfs.ts"
import { readRendezvous, rendezvousFile } from "../host/rendezvous.ts"
import type { DaemonStatusView } from "../../api/daemon.ts"
import { QuiesceApi } from "../../api/QuiesceApi.ts"

/** A verified daemon, with what it takes to talk to it. */
export interface Reachable {
  readonly identity: DaemonIdentity
  readonly baseUrl: string
  readonly token: string
}

export type Discovered =
  | { readonly state: "running"; readonly daemon: Reachable; readonly status: DaemonStatusView }
  /** Alive as recorded, but not answering (or answering as another instance): its exit is not confirmed. */
  | { readonly state: "unavailable"; readonly identity: DaemonIdentity; readonly reason: string }
  | { readonly state: "incompatible"; readonly identity: DaemonIdentity }
  /** No verified daemon; `stale` says why a record that is there was disregarded. */
  | { readonly state: "absent"; readonly stale: string | null }

/** Why a record's process is not the one that wrote it (or cannot be shown to be), or `undefined` when it is. */
const staleness = (identity: DaemonIdentity): string | undefined => {
  if (identity.startTime === null) return `the record names no start time, so pid ${identity.pid} cannot be verified`
  const stat = readStat(identity.pid)
  if (stat === undefined || isExited(stat)) return `the recorded process ${identity.pid} has exited`
  if (stat.startTime !== identity.startTime) {
    return `pid ${identity.pid} now belongs to another process (start time ${stat.startTime}, recorded ${identity.startTime})`
  }
  return undefined
}

const hostOf = (host: string) => host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host

const readToken = (dir: string): string | undefined => {
  try {
    const token = fs.readFileSync(path.join(dir, "token"), "utf8").trim()
    return tokenProblem(token) === undefined ? token : undefined
  } catch {
    return undefined
  }
}

/** How to talk to the daemon a record names; `undefined` when its home's token is unusable. */
const reachable = (home: ManagedHome, identity: DaemonIdentity): Reachable | undefined => {
  const token = readToken(home.dir)
  return token === undefined ? undefined : { identity, token, baseUrl: `http://${hostOf(identity.host)}:${identity.port}` }
}

/** A daemon this hub verified (it answered with its record's instance id), by home directory, with its record's stat. */
export type VerifiedDaemons = Map<string, { readonly stamp: string; readonly daemon: Reachable }>

const recordStamp = (dir: string) => {
  const stat = fs.statSync(rendezvousFile(dir), { throwIfNoEntry: false })
  return stat === undefined ? undefined : `${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`
}

export type Located = Discovered | { readonly state: "verified"; readonly daemon: Reachable }

/**
 * The home's daemon for a request. A daemon verified before still counts while its record is the
 * same file and its process lives with the recorded start time, so a routed request costs a stat
 * and a procfs read instead of a status call; anything else is discovered afresh.
 */
export const locate = (home: ManagedHome, verified: VerifiedDaemons): Effect.Effect<Located, never, HttpClient.HttpClient> =>
  Effect.suspend((): Effect.Effect<Located, never, HttpClient.HttpClient> => {
    const known = verified.get(home.dir)
    if (known !== undefined && known.stamp === recordStamp(home.dir) && staleness(known.daemon.identity) === undefined) {
      return Effect.succeed({ state: "verified", daemon: known.daemon } as const)
    }
    verified.delete(home.dir)
    const stamp = recordStamp(home.dir)
    return discover(home).pipe(
      Effect.tap((found) => Effect.sync(() => {
        if (found.state === "running" && stamp !== undefined && stamp === recordStamp(home.dir)) {
          verified.set(home.dir, { stamp, daemon: found.daemon })
        }
      }))
    )
  })

/** A typed client of a daemon's API. */
export const daemonClient = (daemon: Reachable) =>
  HttpApiClient.make(QuiesceApi, {
    baseUrl: daemon.baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(daemon.token))
  })

/** How long the hub waits for a daemon's status before it calls the daemon unavailable. */
const statusTimeout = Duration.seconds(3)

/** What the home's daemon is now. Reads the daemon's status, which is passive: it never counts as activity. */
export const discover = (home: ManagedHome): Effect.Effect<Discovered, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const record = readRendezvous(home.dir)
    if (Option.isNone(record)) return { state: "absent", stale: null } as const
    const identity = record.value
    const stale = staleness(identity)
    if (stale !== undefined) return { state: "absent", stale } as const
    if (identity.protocolVersion !== daemonProtocolVersion) return { state: "incompatible", identity } as const
    const daemon = reachable(home, identity)
    if (daemon === undefined) {
      return { state: "unavailable", identity, reason: `the token file in ${home.dir} is missing or unusable` } as const
    }
    const answer = yield* daemonClient(daemon).pipe(
      Effect.flatMap((api) => api.daemon.status()),
      Effect.timeout(statusTimeout),
      Effect.result
    )
    if (answer._tag === "Failure") {
      return { state: "unavailable", identity, reason: `it does not answer on ${daemon.baseUrl}` } as const
    }
    const status = answer.success
    if (status.instanceId !== identity.instanceId || status.pid !== identity.pid) {
      return {
        state: "unavailable",
        identity,
        reason: `another daemon (pid ${status.pid}, instance ${status.instanceId}) answers on ${daemon.baseUrl}`
      } as const
    }
    return { state: "running", daemon, status } as const
  })
