/**
 * The turn owner's book of the turns this process carries: the handles by turn id and by client
 * message id, the turns a provider has taken, and every write of a turn's state to the journal
 * (durable before anyone hears of it). `turnDispatch.ts` moves turns through it; `prompts.ts`
 * finds them in it.
 */
import type { AgentEvent } from "../../domain/agentEvent.ts"
import { Cause, Clock, Deferred, Effect, Exit, Option, type Scope } from "effect"
import type { AgentStoreError } from "../../domain/errors.ts"
import { type Disposition, isFinal, type TurnError, type TurnRecord } from "../../domain/turn.ts"
import type { PromptReceipt } from "../../services/AgentRegistry.ts"
import type { TurnJournal } from "../../services/TurnJournal.ts"
import type { JournalWriter } from "./journalWriter.ts"
import type { ResidencyPort } from "./residencyPort.ts"
import type { TurnHandle, TurnOutcome } from "./turnHandle.ts"

/** The key of a client message id, per agent. */
export const clientKey = (agentId: string, clientMessageId: string) => `${agentId}\u0000${clientMessageId}`

/** An error as a turn records it. */
export const turnError = (error: unknown): TurnError =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string" &&
    "message" in error && typeof error.message === "string"
    ? { _tag: error._tag, message: error.message }
    : { _tag: "Defect", message: String(error) }

/** The error a cause records: its failure, or the cause itself for a defect. */
export const causeError = (cause: Cause.Cause<unknown>): TurnError => {
  const failure = Cause.findErrorOption(cause)
  return Option.isSome(failure) ? turnError(failure.value) : { _tag: "Defect", message: Cause.pretty(cause) }
}

/** What the provider got of a prompt that ended without running (see `record`). */
export type Reach = "taken" | "refused" | "unknown"

/** The turns in flight here, and the journal writes that move them on. */
export type TurnBook = ReturnType<typeof makeTurnBook>

/**
 * A book over the journal (`journal` for reads and unretried writes, `writer` for the retried
 * ones); the writes that are not waited for run in `turnScope`.
 */
export const makeTurnBook = (
  journal: TurnJournal["Service"],
  writer: JournalWriter,
  port: ResidencyPort,
  turnScope: Scope.Scope,
  publish: (agentId: string, event: AgentEvent, now: number) => void
) => {
  /** Turns in flight in this process, by turn id, and by client message id. */
  const handles = new Map<string, TurnHandle>()
  const byClient = new Map<string, TurnHandle>()
  /** Turns a provider has taken and not yet ended: the shutdown waits for their outcome. */
  const taken = new Set<TurnHandle>()
  /**
   * Turns this process claimed and has not ended: their next hand-over is written, not claimed
   * again (a write back to `accepted` the store refused would otherwise read as another's claim).
   */
  const claimedHere = new Set<string>()

  const receiptOf = (record: TurnRecord): PromptReceipt => ({
    agentId: record.agentId,
    turnId: record.turnId,
    sessionId: port.liveOf(record.agentId)?.sessionId ?? port.recordOf(record.agentId)?.persistence?.sessionId ?? null,
    state: record.state,
    disposition: record.disposition,
    joinedTurnId: record.joinedTurnId,
    resumed: record.resumed,
    error: record.error,
    ...(isFinal(record.state) ? { output: record.reply } : {})
  })

  const logWriteFailure = (record: TurnRecord, error: AgentStoreError) =>
    Effect.logWarning("Recording a turn failed").pipe(
      Effect.annotateLogs({ agentId: record.agentId, turnId: record.turnId, state: record.state, error: error.message })
    )

  /** Takes an accepted record into the book; the caller starts carrying it. */
  const track = (record: TurnRecord): TurnHandle => {
    const handle: TurnHandle = { record, dispatched: Deferred.makeUnsafe(), ended: Deferred.makeUnsafe() }
    handles.set(record.turnId, handle)
    if (record.clientMessageId !== null) byClient.set(clientKey(record.agentId, record.clientMessageId), handle)
    return handle
  }

  /**
   * Records a final state and lets go of the handle; `announce` then answers whoever waits on it.
   * `reach` says what the provider got: `"taken"` (as recorded), `"refused"` (it certainly never
   * acted on the prompt, so a repeat may run it), or `"unknown"` (it may have: never run again).
   */
  const record = (handle: TurnHandle, outcome: TurnOutcome, reach: Reach = "taken") =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const final: TurnRecord = {
        ...handle.record,
        ...outcome,
        ...(reach === "refused" ? { disposition: null, joinedTurnId: null, dispatchedAt: null } : {}),
        ...(reach === "unknown" ? { dispatchedAt: handle.record.dispatchedAt ?? now } : {}),
        endedAt: now
      }
      handle.record = final
      taken.delete(handle)
      claimedHere.delete(final.turnId)
      // Durable first: a repeat that no longer finds the handle reads this from the journal.
      yield* writer.journal.update(final).pipe(Effect.catch((error) => logWriteFailure(final, error)))
      publish(final.agentId, { _tag: "turn-ended", turnId: final.turnId, state: final.state, reply: final.reply, error: final.error }, now)
      handles.delete(final.turnId)
      if (final.clientMessageId !== null && byClient.get(clientKey(final.agentId, final.clientMessageId)) === handle) {
        byClient.delete(clientKey(final.agentId, final.clientMessageId))
      }
    })

  const announce = (handle: TurnHandle) => {
    const receipt = receiptOf(handle.record)
    Deferred.doneUnsafe(handle.dispatched, Exit.succeed(receipt))
    Deferred.doneUnsafe(handle.ended, Exit.succeed(receipt))
  }

  const settle = (handle: TurnHandle, outcome: TurnOutcome, reach: Reach = "taken") =>
    Effect.andThen(record(handle, outcome, reach), Effect.sync(() => announce(handle)))

  /**
   * Marks the prompt as being handed to the provider, durably, before it is: a crash from here on
   * can never run it a second time (a recovery finds it `running` and reports it interrupted).
   * False when the journal refused the write: the prompt then fails without reaching the provider.
   */
  const markRunning = (handle: TurnHandle, disposition: Disposition, joinedTurnId: string | null, resumed: boolean) =>
    Effect.gen(function*() {
      const record: TurnRecord = { ...handle.record, state: "running", disposition, joinedTurnId, resumed, dispatchedAt: null }
      const claimed = yield* Effect.exit(
        claimedHere.has(record.turnId) ? Effect.as(writer.journal.update(record), true) : writer.journal.claim(record)
      )
      if (Exit.isFailure(claimed)) {
        yield* settle(handle, { state: "failed", reply: null, error: causeError(claimed.cause) }, "refused")
        return false
      }
      if (!claimed.value) {
        yield* letGo(handle)
        return false
      }
      claimedHere.add(record.turnId)
      handle.record = record
      return true
    })

  /**
   * A turn another process claimed first, or that waits for a host this process no longer is: it
   * runs there, never here. Its callers are answered with the journal's record of it, and nothing
   * is written.
   */
  const letGo = (handle: TurnHandle) =>
    Effect.gen(function*() {
      const stored = yield* journal.get(handle.record.agentId, handle.record.turnId).pipe(Effect.orElseSucceed(Option.none))
      if (Option.isSome(stored)) handle.record = stored.value
      taken.delete(handle)
      // Only this handle's entry: a second handle of the same turn in this process keeps its own.
      if (handles.get(handle.record.turnId) === handle) handles.delete(handle.record.turnId)
      if (handle.record.clientMessageId !== null && byClient.get(clientKey(handle.record.agentId, handle.record.clientMessageId)) === handle) {
        byClient.delete(clientKey(handle.record.agentId, handle.record.clientMessageId))
      }
      yield* Effect.logWarning("This turn runs elsewhere (another process took it, or its agent moved); not run here").pipe(
        Effect.annotateLogs({ agentId: handle.record.agentId, turnId: handle.record.turnId, state: handle.record.state })
      )
      announce(handle)
    })

  /**
   * The provider has taken the prompt (`dispatchedAt`). Written after the fact, and not waited
   * for (the journal keeps writes in order, so the turn's end cannot be overtaken by it): a crash
   * before it is durable leaves a handover whose arrival is unknown, which a recovery tells apart
   * from a turn that ran.
   */
  const markTaken = (handle: TurnHandle) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const record: TurnRecord = { ...handle.record, dispatchedAt: now }
      handle.record = record
      publish(record.agentId, { _tag: "turn-running", turnId: record.turnId }, now)
      yield* writer.journal.update(record).pipe(
        Effect.catch((error) => logWriteFailure(record, error)),
        Effect.forkIn(turnScope, { startImmediately: true })
      )
    })

  /** Back to `accepted`: the provider did not take the prompt after all (it could not steer). */
  const markAccepted = (handle: TurnHandle) => {
    const record: TurnRecord = { ...handle.record, state: "accepted", disposition: null, joinedTurnId: null, dispatchedAt: null }
    handle.record = record
    return writer.journal.update(record).pipe(Effect.catch((error) => logWriteFailure(record, error)))
  }

  return {
    receiptOf,
    track,
    record,
    announce,
    settle,
    markRunning,
    letGo,
    markTaken,
    markAccepted,
    /** The provider took this turn: the shutdown waits for its outcome. */
    noteTaken: (handle: TurnHandle) => void taken.add(handle),
    /** The turn in flight here with this id. */
    inFlight: (turnId: string) => handles.get(turnId),
    /** The turn in flight here with this client message id. */
    byClient: (agentId: string, clientMessageId: string) => byClient.get(clientKey(agentId, clientMessageId)),
    /** Turns a provider is running for this process: the shutdown waits for their outcomes. */
    running: (): ReadonlyArray<TurnHandle> => [...taken],
    /** Every turn this process carries, not yet ended (accepted, waiting for a runtime, or running). */
    carried: (): ReadonlyArray<TurnRecord> => [...handles.values()].map((handle) => handle.record)
  }
}
