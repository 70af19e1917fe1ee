/**
 * What a hub keeps in its home: `hub.json` (the homes it manages and the daemons' idle timeout),
 * `hub.json`'s edits by the CLI, the markers of force-stopped homes, the daemons' logs, and the
 * hub's own rendezvous record. Every file is written atomically (a private file renamed in place).
 */
import { Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { formatGoDuration } from "../../domain/goDuration.ts"
import { jsonRecord, writeAtomically } from "../host/atomicFile.ts"
import { stateDirectory } from "../host/Home.ts"
import {
  decodeHubConfigJson,
  defaultHubIdleTimeout,
  type HubConfig,
  HubConfigInvalid,
  type ManagedHome
} from "../../domain/hub.ts"

/** The hub's default port (a daemon's is 7377). */
export const defaultHubPort = 7378

/** The hub's home: `--home`, else `$QUIESCE_HUB_HOME`, else `$XDG_STATE_HOME/quiesce/hub` (`~/.local/state/quiesce/hub`). */
export const defaultHubHome = (): string => process.env["QUIESCE_HUB_HOME"] || path.join(stateDirectory(), "hub")

export const hubConfigFile = (hubHome: string) => path.join(hubHome, "hub.json")
export const hubTokenFile = (hubHome: string) => path.join(hubHome, "token")
export const hubAddressFile = (hubHome: string) => path.join(hubHome, "hub.address.json")
export const daemonLogFile = (hubHome: string, name: string) => path.join(hubHome, "logs", `${name}.log`)
const stoppedFile = (hubHome: string, name: string) => path.join(hubHome, "stopped", `${name}.json`)

const describe = (error: unknown) => error instanceof Error ? error.message : String(error)

/** The last `hub.json` decoded, by file, with the stat it was read at. */
const decoded = new Map<string, { readonly stamp: string; readonly config: HubConfig }>()

const stampOf = (file: string) => {
  const stat = fs.statSync(file, { throwIfNoEntry: false })
  return stat === undefined ? "absent" : `${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`
}

const decodeFile = (file: string, stamp: string) =>
  Effect.gen(function*() {
    const text = yield* Effect.try({
      try: () => (stamp === "absent" ? "{}" : fs.readFileSync(file, "utf8")),
      catch: (error) => new HubConfigInvalid({ message: `${file}: ${describe(error)}` })
    })
    const config = yield* decodeHubConfigJson(text).pipe(
      Effect.mapError((error) => new HubConfigInvalid({ message: `${file}: ${error.message}` }))
    )
    decoded.set(file, { stamp, config })
    return config
  })

/**
 * Reads `hub.json` (absent: no homes, the default timeout); strict, the error names the file and
 * the path. Read for every decision, so an edit counts from the next one; decoded again only when
 * the file changed.
 */
export const readHubConfig = (hubHome: string): Effect.Effect<HubConfig, HubConfigInvalid> =>
  Effect.suspend(() => {
    const file = hubConfigFile(hubHome)
    let stamp: string
    try {
      stamp = stampOf(file)
    } catch (error) {
      return Effect.fail(new HubConfigInvalid({ message: `${file}: ${describe(error)}` }))
    }
    const known = decoded.get(file)
    return known !== undefined && known.stamp === stamp ? Effect.succeed(known.config) : decodeFile(file, stamp)
  })

/** The file's own JSON (not the decoded value): edits keep what the user wrote, durations included. */
const readRawHubConfig = (hubHome: string): Effect.Effect<Record<string, unknown>, HubConfigInvalid> =>
  Effect.gen(function*() {
    yield* readHubConfig(hubHome)
    const file = hubConfigFile(hubHome)
    if (!fs.existsSync(file)) return {}
    const raw: unknown = JSON.parse(fs.readFileSync(file, "utf8"))
    return typeof raw === "object" && raw !== null && !Array.isArray(raw) ? { ...raw } : {}
  })

const homesOf = (raw: Record<string, unknown>): Array<unknown> => Array.isArray(raw["homes"]) ? [...raw["homes"]] : []

const nameOf = (entry: unknown) =>
  typeof entry === "object" && entry !== null && "name" in entry ? entry.name : undefined

/** Edits `hub.json`'s homes; the result is validated before it is written. */
const editHomes = Effect.fn("editHomes")(function*(
  hubHome: string,
  edit: (homes: Array<unknown>) => Effect.Effect<Array<unknown>, HubConfigInvalid>
) {
  const raw = yield* readRawHubConfig(hubHome)
  const next = { ...raw, homes: yield* edit(homesOf(raw)) }
  const text = JSON.stringify(next, null, 2) + "\n"
  const decoded = yield* decodeHubConfigJson(text).pipe(
    Effect.mapError((error) => new HubConfigInvalid({ message: `${hubConfigFile(hubHome)}: ${error.message}` }))
  )
  yield* Effect.try({
    try: () => writeAtomically(hubConfigFile(hubHome), text),
    catch: (error) => new HubConfigInvalid({ message: `Cannot write ${hubConfigFile(hubHome)}: ${describe(error)}` })
  })
  return decoded
})

const unknownHome = (hubHome: string, name: string) =>
  new HubConfigInvalid({ message: `${hubConfigFile(hubHome)} has no home named "${name}" (see quiesce hub list)` })

export const addHome = (hubHome: string, name: string, dir: string) =>
  editHomes(hubHome, (homes) =>
    homes.some((entry) => nameOf(entry) === name)
      ? Effect.fail(new HubConfigInvalid({ message: `${hubConfigFile(hubHome)} already has a home named "${name}"` }))
      : Effect.succeed([...homes, { name, dir: path.resolve(dir) }]))

export const removeHome = (hubHome: string, name: string) =>
  editHomes(hubHome, (homes) =>
    homes.some((entry) => nameOf(entry) === name)
      ? Effect.succeed(homes.filter((entry) => nameOf(entry) !== name))
      : Effect.fail(unknownHome(hubHome, name)))

/** Marks a home archived (or not): `"archived": true` in its entry, or no such key. */
export const setArchived = (hubHome: string, name: string, archived: boolean) =>
  editHomes(hubHome, (homes) =>
    homes.some((entry) => nameOf(entry) === name)
      ? Effect.succeed(homes.map((entry) => {
        if (nameOf(entry) !== name || typeof entry !== "object" || entry === null) return entry
        const copy: Record<string, unknown> = { ...entry }
        if (archived) copy["archived"] = true
        else delete copy["archived"]
        return copy
      }))
      : Effect.fail(unknownHome(hubHome, name)))

/** The idle timeout the hub gives a daemon launched now, and where it comes from. */
export const hubDefault = (config: HubConfig) =>
  config.daemonIdleTimeout === undefined
    ? { value: defaultHubIdleTimeout, source: "default" as const }
    : { value: formatGoDuration(config.daemonIdleTimeout), source: "hub.json" as const }

export const findHome = (config: HubConfig, name: string): ManagedHome | undefined =>
  config.homes.find((home) => home.name === name)

// ---- force-stopped homes -----------------------------------------------------------------------

export const isStopped = (hubHome: string, name: string) => fs.existsSync(stoppedFile(hubHome, name))

export const markStopped = (hubHome: string, name: string, pid: number) =>
  Effect.sync(() => writeAtomically(stoppedFile(hubHome, name), JSON.stringify({ pid, at: Date.now() }) + "\n"))

export const clearStopped = (hubHome: string, name: string) =>
  Effect.sync(() => fs.rmSync(stoppedFile(hubHome, name), { force: true }))

// ---- the hub's rendezvous ----------------------------------------------------------------------

/** Where a running hub listens, for the CLI: `<hub home>/hub.address.json`. No token. */
export const HubAddress = Schema.Struct({
  pid: Schema.Number,
  /** The hub process's start time (procfs): a client checks it before it sends the token. */
  startTime: Schema.NullOr(Schema.Number),
  host: Schema.String,
  port: Schema.Number,
  instanceId: Schema.String
})
export type HubAddress = typeof HubAddress.Type

const addressRecord = jsonRecord(HubAddress)

export const writeHubAddress = (hubHome: string, address: HubAddress) => addressRecord.write(hubAddressFile(hubHome), address)

export const removeHubAddress = (hubHome: string) => addressRecord.remove(hubAddressFile(hubHome))

export const readHubAddress = (hubHome: string): Option.Option<HubAddress> => addressRecord.read(hubAddressFile(hubHome))
