/**
 * The daemon's rendezvous record, `<home>/daemon.json` (see `DaemonIdentity`): written atomically
 * (a private file renamed into place, so nobody reads half of it) once the listener is open, and
 * removed as the last step of a retirement or a shutdown, before the home lock is released.
 */
import type { Effect, Option } from "effect"
import * as path from "node:path"
import { DaemonIdentity } from "../../domain/retirement.ts"
import { jsonRecord } from "./atomicFile.ts"

export const rendezvousFile = (home: string) => path.join(home, "daemon.json")

const record = jsonRecord(DaemonIdentity)

export const writeRendezvous = (home: string, identity: DaemonIdentity): Effect.Effect<void> =>
  record.write(rendezvousFile(home), identity)

export const removeRendezvous = (home: string): Effect.Effect<void> => record.remove(rendezvousFile(home))

/** The record of the home's daemon, if one is there and readable. */
export const readRendezvous = (home: string): Option.Option<DaemonIdentity> => record.read(rendezvousFile(home))
