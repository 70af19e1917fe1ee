/**
 * The daemon's rendezvous record, `<home>/daemon.json` (see `DaemonIdentity`): written atomically
 * (a private file renamed into place, so nobody reads half of it) once the listener is open, and
 * removed as the last step of a retirement or a shutdown, before the home lock is released.
 */
import { Effect, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { DaemonIdentity } from "../../domain/retirement.ts"

export const rendezvousFile = (home: string) => path.join(home, "daemon.json")

const encodeIdentity = Schema.encodeSync(Schema.fromJsonString(DaemonIdentity))
const decodeIdentity = Schema.decodeUnknownOption(Schema.fromJsonString(DaemonIdentity))

export const writeRendezvous = (home: string, identity: DaemonIdentity): Effect.Effect<void> =>
  Effect.sync(() => {
    const file = rendezvousFile(home)
    const temporary = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`
    fs.writeFileSync(temporary, encodeIdentity(identity) + "\n", { mode: 0o600 })
    fs.renameSync(temporary, file)
  })

export const removeRendezvous = (home: string): Effect.Effect<void> =>
  Effect.sync(() => fs.rmSync(rendezvousFile(home), { force: true }))

/** The record of the home's daemon, if one is there and readable. */
export const readRendezvous = (home: string): Option.Option<DaemonIdentity> => {
  try {
    return decodeIdentity(fs.readFileSync(rendezvousFile(home), "utf8"))
  } catch {
    return Option.none()
  }
}
