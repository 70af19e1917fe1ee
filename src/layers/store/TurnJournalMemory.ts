/**
 * An in-memory `TurnJournal` for tests and throwaway runs, with the SQLite journal's rules: one
 * record per `(agentId, clientMessageId)` and per `(recipient, messageId)`, oldest first. Each
 * build of {@link layer} starts empty.
 */
import { Effect, Layer, Option } from "effect"
import { AgentStoreError } from "../../domain/errors.ts"
import { isFinal, type TurnRecord } from "../../domain/turn.ts"
import { type Acceptance, type AcceptTurn, type JournaledFinish, TurnJournal } from "../../services/TurnJournal.ts"

const key = (agentId: string, id: string) => `${agentId}\u0000${id}`

/** A fresh, empty in-memory `TurnJournal`; each run of this effect gets its own maps. */
export const make: Effect.Effect<TurnJournal["Service"]> = Effect.sync(() => {
  // Insertion order is acceptance order.
  const records = new Map<string, TurnRecord>()
  const byClientId = new Map<string, string>()
  const byMessage = new Map<string, string>()
  const finishes = new Map<string, JournaledFinish>()

  const forget = (record: TurnRecord) => {
    records.delete(record.turnId)
    if (record.clientMessageId !== null) byClientId.delete(key(record.agentId, record.clientMessageId))
    for (const [message, turnId] of byMessage) if (turnId === record.turnId) byMessage.delete(message)
  }

  const find = (turnId: string | undefined) => Option.fromNullishOr(turnId === undefined ? undefined : records.get(turnId))

  return TurnJournal.of({
    accept: ({ messageIds = [], record }: AcceptTurn) =>
      Effect.sync((): Acceptance => {
        if (record.clientMessageId !== null) {
          const existing = find(byClientId.get(key(record.agentId, record.clientMessageId)))
          if (Option.isSome(existing)) return { _tag: "Existing", record: existing.value }
          byClientId.set(key(record.agentId, record.clientMessageId), record.turnId)
        }
        records.set(record.turnId, record)
        for (const message of messageIds) byMessage.set(key(record.agentId, message), record.turnId)
        return { _tag: "Accepted", record }
      }),
    update: (record) =>
      records.has(record.turnId)
        ? Effect.sync(() => void records.set(record.turnId, record))
        : Effect.fail(
          new AgentStoreError({
            operation: "journal.update",
            agentId: record.agentId,
            message: `Turn ${record.turnId} is not in the journal (pruned?)`
          })
        ),
    claim: (record) =>
      Effect.suspend(() => {
        const stored = records.get(record.turnId)
        if (stored === undefined) {
          return Effect.fail(
            new AgentStoreError({
              operation: "journal.claim",
              agentId: record.agentId,
              message: `Turn ${record.turnId} is not in the journal (pruned?)`
            })
          )
        }
        if (stored.state !== "accepted") return Effect.succeed(false)
        records.set(record.turnId, record)
        return Effect.succeed(true)
      }),
    get: (agentId, turnId) =>
      Effect.sync(() => Option.filter(find(turnId), (record) => record.agentId === agentId)),
    // As SQLite orders them: by `acceptedAt`, newest first; a tie, the later accepted (inserted) first.
    recent: (agentId, limit) =>
      Effect.sync(() =>
        [...records.values()]
          .filter((record) => record.agentId === agentId)
          .reverse()
          .sort((a, b) => b.acceptedAt - a.acceptedAt)
          .slice(0, Math.max(0, limit))
      ),
    byClientMessageId: (agentId, clientMessageId) => Effect.sync(() => find(byClientId.get(key(agentId, clientMessageId)))),
    byMessageId: (recipientId, messageId) => Effect.sync(() => find(byMessage.get(key(recipientId, messageId)))),
    unfinished: Effect.sync(() => [...records.values()].filter((record) => !isFinal(record.state))),
    unfinishedOf: (agentId) =>
      Effect.sync(() => [...records.values()].filter((record) => record.agentId === agentId && !isFinal(record.state))),
    prune: (endedBefore, keepPerAgent) =>
      Effect.sync(() => {
        const kept = new Map<string, number>()
        let removed = 0
        for (const record of [...records.values()].reverse()) {
          if (!isFinal(record.state)) continue
          const count = (kept.get(record.agentId) ?? 0) + 1
          kept.set(record.agentId, count)
          if (count > keepPerAgent || (record.endedAt ?? 0) < endedBefore) {
            forget(record)
            removed++
          }
        }
        return removed
      }),
    recordFinish: (agentId, outcome) =>
      Effect.sync(() => {
        const position = (finishes.get(agentId)?.position ?? 0) + 1
        finishes.set(agentId, { position, outcome })
        return position
      }),
    lastFinish: (agentId) => Effect.sync(() => Option.fromNullishOr(finishes.get(agentId))),
    removeAgent: (agentId) =>
      Effect.sync(() => {
        const removed = [...records.values()].filter((record) => record.agentId === agentId)
        for (const record of removed) forget(record)
        return removed.length
      })
  })
})

/** The in-memory `TurnJournal` as a layer; its turns live only as long as the layer. */
export const layer: Layer.Layer<TurnJournal> = Layer.effect(TurnJournal, make)
