/**
 * The shared store of a cluster: a pool of connections to one PostgreSQL database, and the
 * stores every runner must see alike over it (`AgentStore`, `FinishStore`, `TurnJournal`). They
 * are the same SQL stores as on SQLite (see `sqlDialect.ts` for what differs). The
 * `RuntimeLedger` is not among them: it names processes of one machine, so it stays in each
 * runner's own SQLite home.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import type { SqlClient } from "effect/sql"
import { AgentStoreError } from "../../domain/errors.ts"
import type { FinishStoreError } from "../../domain/errors.ts"
import type { AgentStore } from "../../services/AgentStore.ts"
import type { FinishStore } from "../../services/FinishStore.ts"
import type { TurnJournal } from "../../services/TurnJournal.ts"
import * as SqlAgentStore from "./SqlAgentStore.ts"
import * as SqlFinishStore from "./SqlFinishStore.ts"
import { failureText } from "./sqlDialect.ts"
import * as SqlTurnJournal from "./SqlTurnJournal.ts"

/** Where `url` points, for messages: host, port and database, never the user or password. */
export const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `${parsed.hostname}${parsed.port === "" ? "" : `:${parsed.port}`}${parsed.pathname}`
  } catch {
    return "(a URL that does not parse)"
  }
}

/**
 * A pool of connections to the PostgreSQL database at `url`, as both `PgClient` and `SqlClient`;
 * closed with the layer. A database that cannot be reached fails with operation `"open"`.
 */
export const layer = (
  url: string,
  options: { readonly maxConnections?: number } = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, AgentStoreError> =>
  // Built in the layer's scope, so the pool lives exactly as long as this layer.
  Layer.effectContext(
    Effect.gen(function*() {
      const context = yield* Layer.build(PgClient.layer({
        url: Redacted.make(url),
        applicationName: "quiesce",
        ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections })
      }))
      // The pool connects on first use: one query now makes an unreachable server an opening failure.
      yield* Context.get(context, PgClient.PgClient)`SELECT 1`
      return context
    }).pipe(Effect.catchTag("SqlError", (error) =>
      Effect.fail(
        new AgentStoreError({ operation: "open", message: `Cannot connect to PostgreSQL at ${describeUrl(url)}: ${failureText(error)}` })
      )
    ))
  )

/** The stores a cluster's runners share, over the one `SqlClient` given, each migrated as it is built. */
export const sharedStoresFromClient: Layer.Layer<
  AgentStore | FinishStore | TurnJournal,
  AgentStoreError | FinishStoreError,
  SqlClient.SqlClient
> = Layer.mergeAll(SqlAgentStore.layerFromClient, SqlFinishStore.layerFromClient, SqlTurnJournal.layerFromClient)

/** The shared stores over a pool to the PostgreSQL database at `url`. */
export const layerSharedStores = (
  url: string
): Layer.Layer<AgentStore | FinishStore | TurnJournal, AgentStoreError | FinishStoreError> =>
  sharedStoresFromClient.pipe(Layer.provide(layer(url)))
