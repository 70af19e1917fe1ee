/**
 * Where the read commands (`agents list`, `agents show`, `turns list`, `turns show`) get their
 * answer: the home's daemon while one runs (through the hub with --hub, which answers from the
 * saved store itself for a home without a daemon); without a daemon, the home's saved store, read
 * read-only (`layers/store/savedStore.ts`) and said in one line on stderr. The answer has the
 * daemon's shape either way (`--json` too). A read never starts a daemon, nor counts as activity.
 */
import { Console, Effect, Option } from "effect"
import * as path from "node:path"
import type { SavedReads } from "../../layers/store/savedStore.ts"
import { client, liveDaemonRecord } from "./connection.ts"
import { homeDirectory, viaHub } from "./root.ts"

/** The typed client of the daemon's API (directly, or through the hub). */
export type DaemonApi = Effect.Success<typeof client>

/** What a read from the saved store says on stderr. */
const savedStoreNote = (root: string, found: boolean) =>
  `No daemon is running for ${root}: read from its saved store (read-only)${found ? "" : ", which does not exist yet"}.`

/**
 * A read command's answer: `fromDaemon` asks the daemon (or the hub); without a daemon for the
 * home, `fromStore` reads its saved store. A process that holds the home without a record (a
 * daemon starting or exiting) fails it with `HomeHeld`: asked again a moment later, that daemon answers.
 */
export const daemonOrSavedStore = <A, E, R, E2>(
  fromDaemon: (api: DaemonApi) => Effect.Effect<A, E, R>,
  fromStore: (reads: SavedReads) => Effect.Effect<A, E2>
) =>
  Effect.gen(function*() {
    if (Option.isSome(yield* viaHub)) return yield* Effect.flatMap(client, fromDaemon)
    const root = path.resolve(yield* homeDirectory)
    if (Option.isSome(liveDaemonRecord(root))) return yield* Effect.flatMap(client, fromDaemon)
    // Loaded only here: a client command that talks to a daemon loads no store (node:sqlite).
    const { readSavedStore } = yield* Effect.promise(() => import("../../layers/store/savedStore.ts"))
    return yield* readSavedStore(root, (reads) => Effect.andThen(Console.error(savedStoreNote(root, reads.found)), fromStore(reads)))
  })
