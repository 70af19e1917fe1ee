/**
 * The project's one SQLite state database: a `SqlClient` on a file, and every durable store
 * (`AgentStore`, `FinishStore`, `TurnJournal`, `RuntimeLedger`) over that single connection. Each
 * store migrates its own tables with its own migrations table, so they share the file without
 * coordinating.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { AgentStoreError } from "../../domain/errors.ts"
import type { FinishStoreError } from "../../domain/errors.ts"
import type { AgentStore } from "../../services/AgentStore.ts"
import type { FinishStore } from "../../services/FinishStore.ts"
import type { RuntimeLedger } from "../../services/RuntimeLedger.ts"
import type { TurnJournal } from "../../services/TurnJournal.ts"
import * as SqlAgentStore from "./SqlAgentStore.ts"
import * as SqliteClient from "./SqliteClient.ts"
import * as SqlFinishStore from "./SqlFinishStore.ts"
import * as SqliteRuntimeLedger from "./SqliteRuntimeLedger.ts"
import * as SqlTurnJournal from "./SqlTurnJournal.ts"

/**
 * A `SqlClient` on the SQLite file `filename`, created (with its parent directory) if
 * missing. The database closes with the layer. Failures have operation `"open"`.
 */
export const layer = (filename: string): Layer.Layer<SqlClient.SqlClient, AgentStoreError> =>
  Layer.effect(
    SqlClient.SqlClient,
    Effect.gen(function*() {
      yield* SqlAgentStore.ensureParentDirectory(filename)
      // Built in the layer's scope, so the connection lives exactly as long as this layer.
      const client = yield* Layer.build(SqliteClient.layer({ filename }))
      return Context.get(client, SqlClient.SqlClient)
    }).pipe(Effect.catchTag("SqlError", (error) =>
      Effect.fail(
        new AgentStoreError({ operation: "open", message: `Cannot open database ${filename}: ${error.message}` })
      )
    ))
  )

/** Every durable store over the one `SqlClient` given, each migrating its own tables as it is built. */
export const storesFromClient: Layer.Layer<
  AgentStore | FinishStore | TurnJournal | RuntimeLedger,
  AgentStoreError | FinishStoreError,
  SqlClient.SqlClient
> = Layer.mergeAll(
  SqlAgentStore.layerFromClient,
  SqlFinishStore.layerFromClient,
  SqlTurnJournal.layerFromClient,
  SqliteRuntimeLedger.layerFromClient
)

/**
 * `AgentStore`, `FinishStore`, `TurnJournal` and `RuntimeLedger` over ONE connection to the SQLite file
 * `filename` (created and migrated as needed).
 */
export const layerStores = (
  filename: string
): Layer.Layer<AgentStore | FinishStore | TurnJournal | RuntimeLedger, AgentStoreError | FinishStoreError> =>
  storesFromClient.pipe(Layer.provide(layer(filename)))
