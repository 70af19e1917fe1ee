/**
 * The owner of turns: acceptance of prompts into the durable journal, their dispatch to the
 * runtime (`turnDispatch.ts`: one turn at a time per runtime, queued behind the running one unless
 * the provider can steer into it), the turn's outcome, and the recovery of a previous process's
 * journal at start. It holds its own state (the book of turns in flight, the journal writer, the
 * prompts being accepted, each runtime's turn slot) and sees the residency only through its port
 * (`ResidencyPort`).
 *
 * Every accepted prompt is carried by one fiber in the registry's scope, never by its caller: a
 * caller that goes away (a client abort) stops waiting and nothing else. What a caller waits for
 * is a `TurnHandle`; a repeat of a client message id waits for the same one, or reads the journal.
 */
import type { AgentEvent } from "../../domain/agentEvent.ts"
import { Clock, Deferred, Effect, Exit, Option, type Scope } from "effect"
import {
  AgentBusy,
  AgentNotFound,
  PromptTooLarge,
  ShuttingDown,
  TurnNotFound
} from "../../domain/errors.ts"
import type { FinishKind } from "../../domain/finish.ts"
import { agentAttributes } from "../../domain/spans.ts"
import type { DaemonRetiring } from "../../domain/retirement.ts"
import { isRetryable, type TurnRecord } from "../../domain/turn.ts"
import type { PromptError, PromptOptions, PromptReceipt } from "../../services/AgentRegistry.ts"
import type { TurnJournal } from "../../services/TurnJournal.ts"
import { randomId } from "../../platform/ids.ts"
import { makeJournalWriter } from "./journalWriter.ts"
import type { LiveAgent } from "./LiveAgent.ts"
import type { ResidencyPort } from "./residencyPort.ts"
import { clientKey, makeTurnBook, turnError } from "./turnBook.ts"
import { makeTurnDispatch } from "./turnDispatch.ts"
import type { TurnHandle } from "./turnHandle.ts"
import { idleWaiter, isIdle } from "./turnSlot.ts"

/** What the turn owner is made with: the journal, its two scopes, the prompt bound, and its port. */
export interface PromptsConfig {
  readonly journal: TurnJournal["Service"]
  /** Where the fibers that carry prompts to the provider run; closed first at shutdown. */
  readonly carryScope: Scope.Scope
  /** Where the fibers that wait for running turns run; closed after the runtimes are. */
  readonly turnScope: Scope.Scope
  /** The largest prompt accepted, measured JSON-encoded (as it travels to a provider). */
  readonly maxPromptBytes: number
  /** The residency, as far as the turn owner sees it. */
  readonly residency: ResidencyPort
  /** Tells the agent's finish watches of a turn's end. */
  readonly announceFinish: (agentId: string, kind: FinishKind) => void
  /** Shows the agent's live event stream an event (a no-op when the host keeps none). */
  readonly publish: (agentId: string, event: AgentEvent, now: number) => void
}

/** A prompt as the live event stream shows it: its first 2,000 characters, so one event stays small. */
const shownPrompt = (text: string) => text.length > 2_000 ? `${text.slice(0, 2_000)}…` : text

/** What a prompt resolved to: a turn in flight here, or a record that needs nobody. */
type Resolution = { readonly handle: TurnHandle } | { readonly record: TurnRecord }

/** The owner of turns (see the module's comment). */
export type Prompts = ReturnType<typeof makePrompts>

/** Makes the owner of turns. */
export const makePrompts = (config: PromptsConfig) => {
  const port = config.residency
  const writer = makeJournalWriter(config.journal)
  const journal = writer.journal
  const book = makeTurnBook(config.journal, writer, port, config.turnScope, config.publish)
  const { start } = makeTurnDispatch({
    port,
    book,
    carryScope: config.carryScope,
    turnScope: config.turnScope,
    announceFinish: config.announceFinish
  })
  /** Prompts past admission and not yet carried (nor refused): a retirement waits for them. */
  let accepting = 0
  /** The same, per agent. */
  const acceptingFor = new Map<string, number>()
  /** Client ids being looked up or accepted right now: a concurrent repeat waits for the same answer. */
  const resolving = new Map<string, Deferred.Deferred<Resolution, PromptError>>()
  /** Completed when the shutdown begins: every waiting caller is answered then. */
  const stopping = Deferred.makeUnsafe<void>()

  /** What an existing record resolves to: the turn in flight, a retry of one that never ran, or the record. */
  const resolveExisting = (record: TurnRecord) =>
    Effect.gen(function*() {
      const inFlight = book.inFlight(record.turnId)
      if (inFlight !== undefined) return { handle: inFlight } satisfies Resolution
      if (!isRetryable(record)) return { record } satisfies Resolution
      return yield* admitted(record.agentId, record.text, Effect.gen(function*() {
        // It never reached the provider: running it now cannot run it twice. Same turn, same id.
        const retried: TurnRecord = { ...record, state: "accepted", error: null, endedAt: null }
        // Not through the retrying journal: a retry the caller was told failed is not run later.
        yield* config.journal.update(retried)
        return { handle: yield* start(retried) } satisfies Resolution
      }))
    })

  /** The checks a new prompt passes before it is accepted. */
  const admissible = (agentId: string, text: string) =>
    Effect.gen(function*() {
      const refused = port.refusal(agentId)
      if (refused !== undefined) return yield* refused
      const record = port.recordOf(agentId)
      if (record === undefined) return yield* AgentNotFound.of(agentId)
      const bytes = Buffer.byteLength(JSON.stringify(text))
      if (bytes > config.maxPromptBytes) return yield* PromptTooLarge.of(agentId, bytes, config.maxPromptBytes)
      yield* port.requireRunnable(record)
    })

  /**
   * Runs `accept` for a prompt that passed admission, counted in `accepting` until it is carried
   * or refused. The admission state is read again in the step that counts it: a retirement that
   * paused admission either refuses this prompt or sees it.
   */
  const admitted = <A, E>(agentId: string, text: string, accept: Effect.Effect<A, E>) =>
    admissible(agentId, text).pipe(Effect.andThen(Effect.suspend((): Effect.Effect<A, E | ShuttingDown | DaemonRetiring | AgentNotFound> => {
      // Counted per agent in the same step: a delete either refuses this prompt or waits it out.
      const refused = port.refusal(agentId)
      if (refused !== undefined) return Effect.fail(refused)
      accepting++
      acceptingFor.set(agentId, (acceptingFor.get(agentId) ?? 0) + 1)
      return accept.pipe(Effect.ensuring(Effect.sync(() => {
        accepting--
        const left = (acceptingFor.get(agentId) ?? 1) - 1
        if (left === 0) acceptingFor.delete(agentId)
        else acceptingFor.set(agentId, left)
      })))
    })))

  const resolve = (agentId: string, text: string, clientMessageId: string | null, messageIds: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      if (port.recordOf(agentId) === undefined) return yield* AgentNotFound.of(agentId)
      // The journal first: a repeat is answered whatever the admission state.
      if (clientMessageId !== null) {
        const found = yield* journal.byClientMessageId(agentId, clientMessageId)
        if (Option.isSome(found)) return yield* resolveExisting(found.value)
      }
      return yield* admitted(agentId, text, acceptNew(agentId, text, clientMessageId, messageIds))
    })

  const acceptNew = (agentId: string, text: string, clientMessageId: string | null, messageIds: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const record: TurnRecord = {
        turnId: yield* randomId("turn"),
        agentId,
        clientMessageId,
        text,
        state: "accepted",
        disposition: null,
        joinedTurnId: null,
        resumed: false,
        reply: null,
        error: null,
        acceptedAt: yield* Clock.currentTimeMillis,
        dispatchedAt: null,
        endedAt: null
      }
      const accepted = yield* journal.accept({ record, messageIds })
      if (accepted._tag === "Existing") return yield* resolveExisting(accepted.record)
      config.publish(agentId, { _tag: "turn-accepted", turnId: record.turnId, prompt: shownPrompt(text) }, record.acceptedAt)
      return { handle: yield* start(accepted.record) } satisfies Resolution
    })

  /** Waits for the handle as far as the caller asked; the shutdown answers every waiter at once. */
  const answer = (resolution: Resolution, wait: boolean): Effect.Effect<PromptReceipt, ShuttingDown> => {
    if ("record" in resolution) return Effect.succeed(book.receiptOf(resolution.record))
    const { handle } = resolution
    const target = wait ? handle.ended : handle.dispatched
    return Effect.suspend(() => {
      if (Deferred.isDoneUnsafe(target)) return Deferred.await(target)
      const shutDown = Effect.fail(ShuttingDown.waiting(handle.record.turnId))
      if (Deferred.isDoneUnsafe(stopping)) return shutDown
      return Effect.raceFirst(Deferred.await(target), Deferred.await(stopping).pipe(Effect.andThen(shutDown)))
    })
  }

  const prompt = Effect.fn("AgentRegistry.prompt")(function*(agentId: string, text: string, options?: PromptOptions) {
    const wait = options?.wait === true
    const clientMessageId = options?.clientMessageId ?? null
    const messageIds = options?.messageIds ?? []
    // Delivered messages are found again through their turn's client message id.
    if (messageIds.length > 0 && clientMessageId === null) {
      return yield* Effect.die(new Error("a prompt carrying delivered messages needs a client message id"))
    }
    // Uninterruptible: a caller that goes away mid-acceptance leaves an accepted turn behind, carried
    // to its end like any other; never half an acceptance.
    const attributes = agentAttributes(agentId, port.recordOf(agentId)?.provider)
    yield* Effect.annotateCurrentSpan(attributes)
    const accept = Effect.uninterruptible(resolve(agentId, text, clientMessageId, messageIds)).pipe(
      Effect.withSpan("Turn.accept", { attributes })
    )
    if (clientMessageId === null) return yield* answer(yield* accept, wait)
    const key = clientKey(agentId, clientMessageId)
    const inFlight = book.byClient(agentId, clientMessageId)
    if (inFlight !== undefined) return yield* answer({ handle: inFlight }, wait)
    const pending = resolving.get(key)
    if (pending !== undefined) return yield* answer(yield* Deferred.await(pending), wait)
    const resolution = Deferred.makeUnsafe<Resolution, PromptError>()
    resolving.set(key, resolution)
    const resolved = yield* accept.pipe(Effect.onExit((exit) =>
      Effect.sync(() => {
        resolving.delete(key)
        Deferred.doneUnsafe(resolution, exit)
      })
    ))
    return yield* answer(resolved, wait)
  })

  const turn = (agentId: string, turnId: string) =>
    Effect.gen(function*() {
      if (port.recordOf(agentId) === undefined) return yield* AgentNotFound.of(agentId)
      const inFlight = book.inFlight(turnId)
      if (inFlight !== undefined && inFlight.record.agentId === agentId) return inFlight.record
      const stored = yield* journal.get(agentId, turnId)
      if (Option.isNone(stored)) return yield* TurnNotFound.of(agentId, turnId)
      return stored.value
    })

  const turns = (agentId: string, limit: number) =>
    Effect.gen(function*() {
      if (port.recordOf(agentId) === undefined) return yield* AgentNotFound.of(agentId)
      const stored = yield* journal.recent(agentId, limit)
      // A turn this process carries is reported as `turn` reports it: its record as last written here.
      return stored.map((record) => book.inFlight(record.turnId)?.record ?? record)
    })

  /**
   * Takes over the journal a previous process left: a turn that was `running` had reached its
   * provider, which is gone now — it is recorded interrupted and never run again; an `accepted`
   * turn had not, and is dispatched now, in acceptance order. `agentId` limits it to one agent's
   * turns (a cluster's runner takes over an agent when it starts hosting it, not at its start).
   */
  const recover = Effect.fnUntraced(function*(agentId?: string) {
    const stored = yield* (agentId === undefined ? config.journal.unfinished : config.journal.unfinishedOf(agentId))
    const unfinished = stored.filter((record) => book.inFlight(record.turnId) === undefined)
    let interrupted = 0
    let redispatched = 0
    for (const record of unfinished) {
      const now = yield* Clock.currentTimeMillis
      if (port.recordOf(record.agentId) === undefined) {
        yield* config.journal.update({ ...record, state: "failed", error: turnError(AgentNotFound.of(record.agentId)), endedAt: now })
      } else if (record.state === "running") {
        interrupted++
        // A failing write fails the start, before anything is dispatched: nothing to write again later.
        yield* config.journal.update({
          ...record,
          state: "interrupted",
          error: {
            _tag: "DaemonStopped",
            message: record.dispatchedAt === null
              ? "The daemon stopped while handing this turn to its provider (whether it arrived is unknown); it was not run again"
              : "The daemon stopped while this turn was running; it was not run again"
          },
          endedAt: now
        })
      } else {
        redispatched++
        yield* start(record)
      }
    }
    if (interrupted + redispatched > 0) {
      yield* Effect.logInfo("Recovered the turn journal").pipe(
        Effect.annotateLogs({ interrupted, redispatched, ...(agentId === undefined ? {} : { agentId }) })
      )
    }
  })

  /** Every caller still waiting is answered `ShuttingDown` (their turns stay recorded). */
  const stopWaiting = Effect.sync(() => Deferred.doneUnsafe(stopping, Exit.void))

  /**
   * Refuses a delete while one of the agent's turns has not ended, or a prompt admitted before
   * the delete began is not yet one (it will be): nothing accepted is lost.
   */
  const refuseDelete = (agentId: string): Effect.Effect<void, AgentBusy> =>
    Effect.suspend(() => {
      const unfinished = book.carried().find((record) => record.agentId === agentId)
      if (unfinished !== undefined) return Effect.fail(AgentBusy.of(agentId, unfinished.turnId, unfinished.state))
      // Admitted before the delete began and not yet a turn: it will be one, so it refuses too.
      if ((acceptingFor.get(agentId) ?? 0) > 0) return Effect.fail(AgentBusy.accepting(agentId))
      return Effect.void
    })

  /** Interrupts the runtime's running turn, if any: a failure it ends with from now on is the interruption. */
  const interrupt = (agent: LiveAgent) =>
    Effect.suspend(() => {
      const active = agent.slot.turn
      if (active === undefined) return Effect.void
      // A failure the turn ends with from now on is the interruption, not the turn's own error.
      active.interruptRequested = true
      return agent.session.interrupt
    })

  /** Waits until the agent's runtime (if any) has no foreground turn, nothing queued and nothing admitted. */
  const awaitIdle = (agentId: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const agent = port.liveOf(agentId)
      if (agent === undefined || isIdle(agent.slot)) return Effect.void
      const waiter = idleWaiter(agent.slot)
      // The slot freed; a queued prompt may take it next, so look again.
      return Deferred.await(waiter).pipe(Effect.andThen(Effect.yieldNow), Effect.andThen(awaitIdle(agentId)))
    })

  return {
    prompt,
    turn,
    turns,
    recover,
    stopWaiting,
    interrupt,
    awaitIdle,
    refuseDelete,
    /** Turns a provider is running for this process: the shutdown waits for their outcomes. */
    running: book.running,
    /** Every turn this process carries, not yet ended (accepted, waiting for a runtime, or running). */
    carried: book.carried,
    failingWrite: writer.failingWrite,
    /** Writes again every record the journal refused (a retirement attempt calls it first). */
    retryWrites: writer.retryWrites,
    /** Prompts past admission and not yet carried (nor refused). */
    accepting: () => accepting
  }
}
