/**
 * A home's saved store, read while no daemon holds the home: its agents, sessions, labels and
 * recent turns, in the shapes the daemon's API answers with, for the CLI and the hub to answer reads
 * of a retired or stopped home without starting its daemon (which would count as activity).
 *
 * Only while no live process holds `<home>/daemon.lock` (H2): a running daemon answers for itself.
 * The SQLite file is opened read-only and never created, written or migrated; a missing file (or
 * one a daemon never migrated) holds no agents yet. The reads run in one short deferred
 * transaction: under WAL they take no lock a writer waits for, so a daemon that starts meanwhile
 * opens, migrates and serves as usual (SQLite leaves an empty `-wal` and `-shm` beside the file,
 * which that daemon uses).
 */
import { Effect, Option, Schema } from "effect"
import { Reactivity } from "effect/reactivity"
import { type SqlClient, SqlError } from "effect/sql"
import * as fs from "node:fs"
import * as path from "node:path"
import type { AgentSummary } from "../../api/agents.ts"
import type { TurnView } from "../../api/turns.ts"
import { agentSummary, turnView } from "../../api/views.ts"
import type { AgentRecord } from "../../domain/agent.ts"
import { AgentNotFound, AgentStoreError, TurnNotFound } from "../../domain/errors.ts"
import { databaseFileOf, liveLockHolder } from "../host/Home.ts"
import { loadConfig } from "../host/loadConfig.ts"
import * as SqlAgentStore from "./SqlAgentStore.ts"
import * as SqliteClient from "./SqliteClient.ts"
import { failureText } from "./sqlDialect.ts"
import * as SqlTurnJournal from "./SqlTurnJournal.ts"

/** A live process holds the home's lock (its daemon, running, starting or exiting): it answers, not its saved store. */
export class HomeHeld extends Schema.TaggedError<HomeHeld>()("HomeHeld", {
  home: Schema.String,
  pid: Schema.Number,
  message: Schema.String
}) {
  static readonly of = (home: string, pid: number) =>
    new HomeHeld({
      home,
      pid,
      message: `A daemon (pid ${pid}) holds ${home}, so it answers for its agents, not its saved store: ask it again in a moment`
    })
}

/** The reads a saved store answers, each as the daemon's API answers it. Nothing in it is resident. */
export interface SavedReads {
  /** Whether the home has a store file at all (none: no agent was ever created there). */
  readonly found: boolean
  /** Every agent, oldest first, released. */
  readonly agents: Effect.Effect<ReadonlyArray<AgentSummary>, AgentStoreError>
  readonly agent: (agentId: string) => Effect.Effect<AgentSummary, AgentNotFound | AgentStoreError>
  /** The agent's newest turns, newest accepted first, at most `limit`. */
  readonly turns: (agentId: string, limit: number) => Effect.Effect<ReadonlyArray<TurnView>, AgentNotFound | AgentStoreError>
  readonly turn: (agentId: string, turnId: string) => Effect.Effect<TurnView, AgentNotFound | TurnNotFound | AgentStoreError>
}

/** A saved agent as a daemon would list it: no runtime holds it; its provider counts if the home's config has it. */
const savedSummary = (providers: ReadonlySet<string>) => (record: AgentRecord): AgentSummary =>
  agentSummary({ record, resident: false, pid: null, pendingPermissions: [], providerAvailable: providers.has(record.provider) })

/**
 * The provider ids the home's daemon would serve (its `config.json`). A config the daemon could not
 * start with serves none: its agents read as not configured, which is what a start would find.
 */
const configuredProviders = (home: string) =>
  loadConfig(path.join(home, "config.json")).pipe(
    Effect.map((config): ReadonlySet<string> => new Set(Object.keys(config.providers))),
    Effect.orElseSucceed((): ReadonlySet<string> => new Set())
  )

/** A store with none of the tables: no agent yet, and so none found by id. */
const emptyReads: SavedReads = {
  found: false,
  agents: Effect.succeed([]),
  agent: (agentId) => Effect.fail(AgentNotFound.of(agentId)),
  turns: (agentId) => Effect.fail(AgentNotFound.of(agentId)),
  turn: (agentId) => Effect.fail(AgentNotFound.of(agentId))
}

/** The reads over an open read-only client; tables a daemon never made read as empty. */
const readsOver = Effect.fnUntraced(function*(sql: SqlClient.SqlClient, providers: ReadonlySet<string>) {
  const tables = new Set(
    (yield* sql<{ readonly name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'`).map((row) => row.name)
  )
  if (!tables.has("agents")) return { ...emptyReads, found: true }
  // A store saved by an older daemon lacks the columns later migrations add; read it as it is.
  const agentColumns = new Set(
    (yield* sql<{ readonly name: string }>`SELECT name FROM pragma_table_info('agents')`).map((row) => row.name)
  )
  const agents = SqlAgentStore.reads(sql, { hasReleaseNote: agentColumns.has("release_note") })
  const journal = tables.has("turns") ? SqlTurnJournal.reads(sql) : undefined
  const summary = savedSummary(providers)
  const stored = (agentId: string) =>
    agents.get(agentId).pipe(Effect.flatMap(Option.match({
      onNone: () => Effect.fail(AgentNotFound.of(agentId)),
      onSome: Effect.succeed
    })))
  const recent = (agentId: string, limit: number) =>
    journal === undefined ? Effect.succeed([]) : Effect.map(journal.recent(agentId, limit), (records) => records.map(turnView))
  const one = (agentId: string, turnId: string) =>
    (journal === undefined ? Effect.succeedNone : journal.get(agentId, turnId)).pipe(Effect.flatMap(Option.match({
      onNone: () => Effect.fail(TurnNotFound.of(agentId, turnId)),
      onSome: (record) => Effect.succeed(turnView(record))
    })))
  const reads: SavedReads = {
    found: true,
    agents: Effect.map(agents.list, (records) => records.map(summary)),
    agent: (agentId) => Effect.map(stored(agentId), summary),
    turns: (agentId, limit) => Effect.andThen(stored(agentId), recent(agentId, limit)),
    turn: (agentId, turnId) => Effect.andThen(stored(agentId), one(agentId, turnId))
  }
  return reads
})

const openFailure = (file: string) => (error: { readonly message: string; readonly cause?: unknown }) =>
  new AgentStoreError({ operation: "open", message: `Cannot read the saved store ${file}: ${failureText(error)}` })

/**
 * Runs `read` on the saved store of the daemon home `home`, read-only, in one short transaction;
 * fails with `HomeHeld` when a live process holds the home (its daemon answers instead).
 */
export const readSavedStore = <A, E>(
  home: string,
  read: (reads: SavedReads) => Effect.Effect<A, E>
): Effect.Effect<A, E | HomeHeld | AgentStoreError> =>
  Effect.gen(function*() {
    const root = path.resolve(home)
    const holder = liveLockHolder(root)
    if (holder !== undefined) return yield* HomeHeld.of(root, holder)
    const providers = yield* configuredProviders(root)
    const file = databaseFileOf(root)
    // Read-only never creates the file; an absent one is a home where no agent was created yet.
    if (!fs.existsSync(file)) return yield* read(emptyReads)
    return yield* Effect.scoped(Effect.gen(function*() {
      const sql = yield* SqliteClient.make({ filename: file, readonly: true, busyTimeout: "2 seconds" }).pipe(
        Effect.mapError(openFailure(file))
      )
      // One snapshot for the whole read, ended as soon as it is done.
      return yield* sql.withTransaction(
        Effect.flatMap(Effect.mapError(readsOver(sql, providers), openFailure(file)), read)
      ).pipe(Effect.mapError((error) => error instanceof SqlError.SqlError ? openFailure(file)(error) : error))
    })).pipe(Effect.provide(Reactivity.layer))
  })
