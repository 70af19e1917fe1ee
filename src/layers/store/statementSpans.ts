/**
 * A store's write is one span, named after the operation (`SqlTurnJournal.accept`), that includes
 * the time it waited for its group's commit. effect's sql client would add a span for each
 * statement and each transaction under it: they were two of every five spans a prompt exported,
 * and the operation's span already covers what an operator reads from them. A plain read (one
 * statement) keeps effect's statement span, named after the database, with its query.
 */
import { Effect, References } from "effect"

/** Runs `effect` without spans of its own: the statements and transactions inside it are not traced. */
export const withoutStatementSpans = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, References.TracerEnabled, false)
