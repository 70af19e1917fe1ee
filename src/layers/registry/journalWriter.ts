/**
 * The turn owner's writer of the journal: every turn record it writes goes through here, so that
 * a failing store is known and nothing it refused is lost.
 */
import { Effect } from "effect"
import type { TurnRecord } from "../../domain/turn.ts"
import type { TurnJournal } from "../../services/TurnJournal.ts"

/** The journal with retried writes, and what the store refused. */
export interface JournalWriter {
  /** The journal, whose `update` remembers a refused record and writes it again after the next success. */
  readonly journal: TurnJournal["Service"]
  /** Writes again every record the journal refused (a retirement attempt calls it first). */
  readonly retryWrites: Effect.Effect<void>
  /** The first record the store refused and that is not yet written, and why; none while the store writes. */
  readonly failingWrite: () => { readonly turnId: string; readonly message: string } | undefined
}

/** A writer over the journal. */
export const makeJournalWriter = (journal: TurnJournal["Service"]): JournalWriter => {
  /**
   * Records the journal refused, newest per turn: written again after the next write that
   * succeeds. While any is left the store is failing, and the daemon may not retire (R2).
   */
  const unwritten = new Map<string, TurnRecord>()
  let lastWriteError = ""
  const writeAgain = Effect.suspend(() =>
    Effect.forEach([...unwritten.values()], (record) =>
      journal.update(record).pipe(
        Effect.andThen(Effect.sync(() => {
          if (unwritten.get(record.turnId) === record) unwritten.delete(record.turnId)
        })),
        Effect.ignore
      ), { discard: true })
  )
  return {
    journal: {
      ...journal,
      update: (record) =>
        journal.update(record).pipe(
          Effect.tapError((error) =>
            Effect.sync(() => {
              unwritten.set(record.turnId, record)
              lastWriteError = error.message
            })
          ),
          Effect.tap(() => {
            unwritten.delete(record.turnId)
            return unwritten.size === 0 ? Effect.void : writeAgain
          })
        )
    },
    retryWrites: writeAgain,
    failingWrite: () => unwritten.size === 0 ? undefined : { turnId: [...unwritten.keys()][0]!, message: lastWriteError }
  }
}
