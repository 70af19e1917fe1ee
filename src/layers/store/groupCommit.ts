/**
 * Group commit: writes submitted at about the same time run in one transaction and share its
 * commit — one sync of the write-ahead log for all of them, where each would otherwise pay its
 * own. A writer takes everything waiting, runs each write in turn (each in a savepoint of its own
 * when it opens a transaction itself), commits, answers each with its own outcome, and goes on
 * until nothing waits.
 *
 * A write that fails fails alone: SQLite undoes only its statement (or its savepoint), and the
 * others commit. PostgreSQL aborts the whole transaction on a failed statement, so there each
 * write runs in a savepoint of its own (`isolate`). A commit that fails fails them all: none of them is durable, so none is told it
 * is. A caller that stops waiting does not stop its write. A write (or a group) that lost a
 * conflict with another database client's transaction (a deadlock between runners) is submitted
 * again, a bounded number of times (`retryLostConflicts`).
 */
import { Cause, Deferred, Effect, Exit, type Scope } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import { retryLostConflicts } from "./sqlDialect.ts"

interface Job {
  /** Runs the write; returns how to answer its caller once the commit is known to have succeeded. */
  readonly run: Effect.Effect<() => void>
  /** Answers its caller when the commit failed (or the writer died): nothing of it is durable. */
  readonly abandon: (cause: Cause.Cause<SqlError.SqlError>) => void
}

export interface GroupCommit {
  /** Runs `write` in the next group transaction; succeeds once that transaction has committed. */
  readonly submit: <A, E>(write: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
}

/**
 * Group commit over a client's transactions (`transaction` is `sql.withTransaction`, or a
 * stand-in in tests). `isolate` wraps each write on its own inside the group's transaction.
 */
export const make = (
  transaction: SqlClient.SqlClient["withTransaction"],
  isolate: <A, E>(write: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError> = (write) => write
): Effect.Effect<GroupCommit, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    let waiting: Array<Job> = []
    let writing = false
    let closed = false
    // Whatever still waits when the store closes is answered, never left hanging.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        const left = waiting
        waiting = []
        for (const job of left) job.abandon(Cause.interrupt())
      })
    )

    const drain: Effect.Effect<void> = Effect.gen(function*() {
      while (waiting.length > 0) {
        const group = waiting
        waiting = []
        const committed = yield* Effect.exit(transaction(Effect.forEach(group, (job) => job.run)))
        if (Exit.isSuccess(committed)) for (const answer of committed.value) answer()
        else for (const job of group) job.abandon(committed.cause)
      }
    }).pipe(Effect.ensuring(Effect.sync(() => (writing = false))))

    const submitOnce = <A, E>(write: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError.SqlError> =>
      Effect.suspend(() => {
        if (closed) return Effect.interrupt
        const done = Deferred.makeUnsafe<A, E | SqlError.SqlError>()
        waiting.push({
          run: Effect.map(Effect.exit(isolate(write)), (exit) => () => Deferred.doneUnsafe(done, exit)),
          abandon: (cause) => Deferred.doneUnsafe(done, Exit.failCause(cause))
        })
        if (writing) return Deferred.await(done)
        // The writer starts on the next tick, so that the writes submitted in this one join it
        // (node:sqlite is synchronous: a writer started at once would always write alone).
        writing = true
        return Effect.forkIn(drain, scope).pipe(Effect.andThen(Deferred.await(done)))
      })

    // A write that lost a conflict with another runner's transaction (a deadlock) was undone with
    // its savepoint, or with its group: it goes again, into a later group.
    const submit = <A, E>(write: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError.SqlError> => retryLostConflicts(submitOnce(write))

    return { submit }
  })
