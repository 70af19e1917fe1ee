/**
 * Finding the daemon or the hub a command talks to: the record of the home's running daemon or the
 * hub's address, the token beside it, and a typed client of its API (through the hub with --hub).
 */
import { Console, Effect, Option } from "effect"
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import * as fs from "node:fs"
import * as path from "node:path"
import { tokenProblem } from "../../layers/host/Home.ts"
import { recordedProcessAlive } from "../../platform/procfs.ts"
import { readRendezvous } from "../../layers/host/rendezvous.ts"
import { HubApi, QuiesceApiViaHub, savedStoreHeader } from "../../api/HubApi.ts"
import { defaultHubHome, hubTokenFile, readHubAddress, readHubConfig } from "../../layers/hub/hubFiles.ts"
import type { DaemonIdentity } from "../../domain/retirement.ts"
import { homeDirectory, hubHomeDirectory, viaHub } from "./root.ts"
import { UsageError } from "./usageError.ts"

/** Reads a token file for a client; the message says what to do when it is unusable. */
const readClientToken = (tokenFile: string, restart: string) =>
  Effect.gen(function*() {
    const token = yield* Effect.try({
      try: () => fs.readFileSync(tokenFile, "utf8").trim(),
      catch: (error) =>
        new UsageError({
          message: `Cannot read the API token file ${tokenFile}: ${error instanceof Error ? error.message : String(error)}`
        })
    })
    const problem = tokenProblem(token)
    if (problem !== undefined) {
      return yield* new UsageError({ message: `The API token file ${tokenFile} ${problem}. Delete it and ${restart} to have a new one made` })
    }
    return token
  })

/** Where the hub of the hub home `hubHome` listens, and its token. */
export const hubConnectionAt = (hubHome: string) => Effect.gen(function*() {
  const address = readHubAddress(hubHome)
  // The token goes only to the process that wrote the address: alive, with the recorded start time.
  if (Option.isNone(address) || !recordedProcessAlive(address.value)) {
    return yield* new UsageError({ message: `No hub is running for ${hubHome}. Start one with: quiesce hub` })
  }
  const token = yield* readClientToken(hubTokenFile(hubHome), "restart the hub")
  return { baseUrl: `http://${address.value.host}:${address.value.port}`, token }
})

/** Where the hub of the hub home the command names listens, and its token. */
export const hubConnection = Effect.flatMap(hubHomeDirectory, hubConnectionAt)

/** A typed client of the hub's own API, of the hub at `connection`. */
const hubClientOf = <E, R>(connection: Effect.Effect<{ readonly baseUrl: string; readonly token: string }, E, R>) =>
  Effect.flatMap(connection, ({ baseUrl, token }) =>
    HttpApiClient.make(HubApi, { baseUrl, transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token)) }))

/** A typed client of the hub's own API. */
export const hubClient = hubClientOf(hubConnection)

/** The record of the daemon of the home at `root`, while the process it names lives. */
export const liveDaemonRecord = (root: string): Option.Option<DaemonIdentity> =>
  Option.filter(readRendezvous(root), recordedProcessAlive)

/**
 * The hub that manages the home at `root`, if the default hub home's `hub.json` lists it: the
 * home's name there, and whether that hub runs. An unreadable `hub.json` names none.
 */
export const managingHub = (root: string) =>
  Effect.gen(function*() {
    const hubHome = path.resolve(defaultHubHome())
    const config = yield* Effect.option(readHubConfig(hubHome))
    const home = Option.flatMap(config, (config) => Option.fromUndefinedOr(config.homes.find((home) => path.resolve(home.dir) === root)))
    return Option.map(home, (home) => ({
      hubHome,
      name: home.name,
      running: Option.exists(readHubAddress(hubHome), recordedProcessAlive)
    }))
  })

/** What to do without a daemon when a hub manages the home: go through the hub (started first if it does not run). */
const hubWay = (root: string) =>
  Effect.map(managingHub(root), Option.match({
    onNone: () => "",
    onSome: ({ name, running }) =>
      `; or, as it is the home ${name} of a hub, which starts its daemon when needed, ` +
      `${running ? "" : "start the hub (quiesce hub) and "}go through it: quiesce --hub ${name} …`
  }))

/** The home's daemon as its record names it, while that process lives. */
export const runningDaemon = Effect.gen(function*() {
  const root = path.resolve(yield* homeDirectory)
  const record = readRendezvous(root)
  if (Option.isNone(record) || !recordedProcessAlive(record.value)) {
    return yield* new UsageError({
      message: `No daemon is running for ${root}${
        Option.isSome(record) ? ` (its record names pid ${record.value.pid}, which has exited)` : ""
      }. Start one with: quiesce --home ${root} daemon${yield* hubWay(root)}`
    })
  }
  return { root, identity: record.value }
})

/** Where the daemon of the home listens, and its token, from its record (it counts only while its process lives). */
export const daemonConnection = Effect.gen(function*() {
  const { identity: listening, root } = yield* runningDaemon
  const tokenFile = path.join(root, "token")
  if (!fs.existsSync(tokenFile)) {
    return yield* new UsageError({
      message: `The API token file ${tokenFile} was deleted while the daemon (pid ${listening.pid}) runs. ` +
        `Restart the daemon (quiesce --home ${root} daemon) to have a new one made`
    })
  }
  const token = yield* readClientToken(tokenFile, "restart the daemon")
  const host = listening.host === "0.0.0.0" ? "127.0.0.1" : listening.host.includes(":") ? `[${listening.host}]` : listening.host
  return { baseUrl: `http://${host}:${listening.port}`, token }
})

/** What a read the hub answered from a home's saved store says, by why no daemon runs for the home. */
const savedStoreNote = (name: string, state: string) =>
  `The home ${name} is ${state === "stopped" ? "force-stopped" : "retired"}: the hub read this from its saved store (read-only); ` +
  (state === "stopped" ? `quiesce daemons resume ${name} starts it again` : "its next prompt starts its daemon")

/**
 * A typed client for the daemon of the home, authenticated with its token; with `--hub NAME`, the
 * same API through the hub (`/v1/…` becomes `/v1/homes/NAME/…`), authenticated with the hub's.
 */
export const client = Effect.gen(function*() {
  const name = yield* viaHub
  if (Option.isSome(name)) {
    const { baseUrl, token } = yield* hubConnection
    const prefix = `/v1/homes/${encodeURIComponent(name.value)}/`
    let told = false
    // A read the hub answered from the home's saved store (no daemon runs for it) is said once, on stderr.
    const tellSavedStore = (response: HttpClientResponse.HttpClientResponse) => {
      const state = response.headers[savedStoreHeader]
      if (state === undefined || told) return Effect.void
      told = true
      return Console.error(savedStoreNote(name.value, state))
    }
    return yield* HttpApiClient.make(QuiesceApiViaHub, {
      baseUrl,
      transformClient: (client) =>
        client.pipe(
          HttpClient.mapRequest((request) =>
            HttpClientRequest.bearerToken(HttpClientRequest.updateUrl(request, (url) => url.replace("/v1/", prefix)), token)
          ),
          HttpClient.tap(tellSavedStore)
        )
    })
  }
  const { baseUrl, token } = yield* daemonConnection
  return yield* HttpApiClient.make(QuiesceApiViaHub, {
    baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token))
  })
})

/** A one-time login link to the hub's page, asked of the hub. */
export const hubLoginLink = Effect.flatMap(hubClient, (api) => api.session.link())

/** A one-time login link to the page of the hub of the hub home `hubHome`, asked of it. */
export const hubLoginLinkAt = (hubHome: string) => Effect.flatMap(hubClientOf(hubConnectionAt(hubHome)), (api) => api.session.link())

/** A one-time login link to the daemon's page, asked of the daemon (with `--hub`, through the hub). */
export const daemonLoginLink = Effect.flatMap(client, (api) => api.session.link())
