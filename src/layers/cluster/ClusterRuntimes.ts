/**
 * Every runner's live runtimes, for `GET /v1/runtimes?scope=cluster` on any runner (X6). Each
 * runner reports its own rows (the ones its `GET /v1/runtimes` gives) to a `cluster_runtimes`
 * table in the shared database every few seconds, and removes them when it stops; any runner
 * reads the table. A row is as old as its `reportedAt`; the rows of a runner that stopped
 * reporting (it died) are left out once they are three reports old.
 */
import { Array as Arr, Clock, Context, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { RuntimeRow } from "../../domain/runtimeRow.ts"
import { ClusterRuntimes } from "../../services/ClusterRuntimes.ts"
import { makeRuntimeRows } from "../collector/runtimeRows.ts"
import { columnTypes, Int64, retryLostConflicts } from "../store/sqlDialect.ts"


export const migrations = {
  "1_create_cluster_runtimes": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { millis } = columnTypes(sql)
    yield* sql`CREATE TABLE cluster_runtimes (
      runner TEXT NOT NULL,
      agent_id TEXT NOT NULL,
      row TEXT NOT NULL,
      reported_at ${millis} NOT NULL,
      PRIMARY KEY (runner, agent_id)
    )`
  })
}

const migrate = Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: "cluster_runtimes_migrations" })

const StoredRow = Schema.Struct({ runner: Schema.String, row: Schema.fromJsonString(RuntimeRow), reported_at: Int64 })
const decodeStored = Schema.decodeUnknownEffect(StoredRow)
const encodeRow = Schema.encodeEffect(Schema.fromJsonString(RuntimeRow))

/**
 * Reports this runner's (`runner`, its `host:port`) runtimes every `interval` and removes them
 * when the layer closes; provides the reader.
 */
export const layer = (runner: string, interval: Duration.Input = "5 seconds") =>
  Layer.effectContext(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* migrate
    const rows = yield* makeRuntimeRows
    const every = Duration.fromInputUnsafe(interval)

    const report = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const current = yield* rows.all
      const encoded = yield* Effect.forEach(current, (row) =>
        Effect.map(encodeRow(row), (text) => ({ runner, agent_id: row.agentId, row: text, reported_at: now })))
      yield* Effect.gen(function*() {
        yield* sql`DELETE FROM cluster_runtimes WHERE runner = ${runner}`
        if (Arr.isArrayNonEmpty(encoded)) yield* sql`INSERT INTO cluster_runtimes ${sql.insert(encoded)}`
      }).pipe(sql.withTransaction, retryLostConflicts)
    }).pipe(Effect.catch((error) =>
      Effect.logWarning("Reporting this runner's runtimes to the cluster failed").pipe(Effect.annotateLogs({ error: error.message }))
    ))
    yield* report.pipe(Effect.repeat(Schedule.spaced(every)), Effect.forkScoped)
    // A runner that stops in order leaves no rows behind.
    yield* Effect.addFinalizer(() => Effect.ignore(sql`DELETE FROM cluster_runtimes WHERE runner = ${runner}`))

    const list = Effect.gen(function*() {
      const since = (yield* Clock.currentTimeMillis) - 3 * Duration.toMillis(every)
      const stored = yield* sql`SELECT runner, row, reported_at FROM cluster_runtimes
        WHERE reported_at >= ${since} ORDER BY runner, agent_id`
      return yield* Effect.forEach(stored, (raw) =>
        Effect.map(decodeStored(raw), (decoded): RuntimeRow => ({
          ...decoded.row,
          runner: decoded.runner,
          reportedAt: new Date(decoded.reported_at).toISOString()
        })))
    }).pipe(Effect.catch((error) =>
      // What this runner itself hosts is still known.
      Effect.logWarning("Reading the cluster's runtimes failed; listing this runner's").pipe(
        Effect.annotateLogs({ error: error.message }),
        Effect.andThen(Effect.map(rows.all, (own) => own.map((row) => ({ ...row, runner }))))
      )
    ))
    return Context.make(ClusterRuntimes, { list })
  }))
