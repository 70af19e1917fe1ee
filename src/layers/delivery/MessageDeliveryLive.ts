/**
 * The live `MessageDelivery` (D1): messages to an agent are queued per recipient, batched over a
 * short window into one prompt through `AgentOperations` (the registry's, or on a cluster the
 * runner that hosts the recipient), retried while the failure may pass, and never sent twice when
 * the turn journal shows a turn already carried them.
 *
 * @module
 */
import { Deferred, Duration, Effect, Fiber, Layer, Option, Schedule, Semaphore } from "effect"
import { type ClusterUnavailable, DeliveryClosed, DeliveryFailed } from "../../domain/errors.ts"
import type { TurnRecord } from "../../domain/turn.ts"
import { ActivityClock } from "../../services/ActivityClock.ts"
import { AgentOperations } from "../../services/AgentOperations.ts"
import type { PromptError, PromptReceipt } from "../../services/AgentRegistry.ts"
import { type AgentMessage, MessageDelivery } from "../../services/MessageDelivery.ts"
import { TurnJournal } from "../../services/TurnJournal.ts"
import { randomId } from "../../platform/ids.ts"

/** Tuning for message delivery: the batching window, dispatch retries and the shutdown wait. */
export interface MessageDeliveryOptions {
  /** Messages to one recipient arriving within this window are dispatched together. Default 2 s. */
  readonly batchWindow?: Duration.Input | undefined
  /** Backoff between dispatch attempts that failed for a reason that may pass. Default 1 s, doubling, at most 8 tries. */
  readonly retry?: Schedule.Schedule<unknown, DispatchError> | undefined
  /** How long shutdown waits for acknowledgements before giving up on them. Default 30 s. */
  readonly closeTimeout?: Duration.Input | undefined
}

interface Queued {
  readonly message: AgentMessage
  readonly acknowledged: Deferred.Deferred<PromptReceipt, DeliveryFailed>
}

interface Recipient {
  queued: Array<Queued>
  /** Batches taken from the queue whose dispatch the provider has not acknowledged. */
  dispatching: number
  /** Set from the first message of a batch until its window ends. */
  flushScheduled: boolean
  flushTimer: Fiber.Fiber<void> | undefined
  /** Batches to one recipient go out one at a time, in order. */
  readonly lane: Semaphore.Semaphore
}

/** A dispatch that did not reach the provider: a refusal of the prompt, or its turn failing before it ran. */
type DispatchError = PromptError | ClusterUnavailable | { readonly _tag: string; readonly message: string }

/**
 * Failures that will not pass by retrying (a shutdown: durable senders deliver again after the
 * restart). `ClusterUnavailable` passes: the recipient's shard is moving.
 */
const isPermanent = (error: DispatchError) =>
  error._tag === "AgentNotFound" || error._tag === "AgentNotResumable" || error._tag === "ProviderNotFound" ||
  error._tag === "PromptTooLarge" || error._tag === "ShuttingDown"

/**
 * A turn the daemon was handing to the provider when it stopped (a crash, or a shutdown while the
 * provider had not yet taken it): whether the message arrived is unknown. A message is then sent
 * again — a duplicate notification is better than a lost one. A turn the provider had taken is
 * delivered, however it ended.
 */
const cutByStop = (record: TurnRecord) =>
  record.state === "interrupted" && record.error?._tag === "DaemonStopped" && record.dispatchedAt === null

/** One prompt for a batch: each message headed by its sender, in arrival order. */
export const formatBatch = (messages: ReadonlyArray<AgentMessage>): string =>
  messages
    .map((message) => message.senderId === undefined ? message.text : `[message from agent ${message.senderId}]\n${message.text}`)
    .join("\n\n")

/**
 * Builds the service over the agent operations and the turn journal. When the scope closes, admission
 * stops, what is queued is dispatched at once and acknowledgements are awaited up to the close
 * timeout. {@link layer} wraps it.
 */
export const makeMessageDelivery = Effect.fnUntraced(function*(options: MessageDeliveryOptions = {}) {
  const operations = yield* AgentOperations
  const journal = yield* TurnJournal
  const noteActivity = yield* ActivityClock.noter
  const scope = yield* Effect.scope
  const batchWindow = Duration.fromInputUnsafe(options.batchWindow ?? "2 seconds")
  const retry = options.retry ?? Schedule.max([Schedule.exponential("1 second"), Schedule.recurs(7)])
  const recipients = new Map<string, Recipient>()
  let closed = false

  const recipientOf = (recipientId: string): Recipient => {
    let recipient = recipients.get(recipientId)
    if (recipient === undefined) {
      recipient = {
        queued: [],
        dispatching: 0,
        flushScheduled: false,
        flushTimer: undefined,
        lane: Semaphore.makeUnsafe(1)
      }
      recipients.set(recipientId, recipient)
    }
    return recipient
  }

  const forget = (recipientId: string, recipient: Recipient) => {
    if (recipient.queued.length === 0 && recipient.dispatching === 0 && !recipient.flushScheduled) {
      recipients.delete(recipientId)
    }
  }

  /**
   * Dispatches one prompt to the recipient's host, until the provider has it. The client message id
   * is the batch's own, so a retry re-runs the same turn (only if it never reached the provider).
   */
  const dispatch = (recipientId: string, text: string, clientMessageId: string, messageIds: ReadonlyArray<string>) =>
    operations.prompt(recipientId, text, { clientMessageId, messageIds }).pipe(
      Effect.flatMap((receipt): Effect.Effect<PromptReceipt, DispatchError> =>
        receipt.state === "failed" && receipt.disposition === null
          ? Effect.fail(receipt.error ?? { _tag: "DispatchFailed", message: "the prompt did not reach the provider" })
          : Effect.succeed(receipt)
      ),
      Effect.retry({ schedule: retry, while: (error) => !isPermanent(error) })
    )

  const acknowledge = (recipientId: string, batch: ReadonlyArray<Queued>) =>
    Effect.matchEffect({
      onSuccess: (receipt: PromptReceipt) => Effect.forEach(batch, (queued) => Deferred.succeed(queued.acknowledged, receipt)),
      onFailure: (error: DispatchError) =>
        Effect.logWarning("Message dispatch failed").pipe(
          Effect.annotateLogs({ recipientId, error: error.message }),
          Effect.andThen(Effect.forEach(batch, (queued) =>
            Deferred.fail(
              queued.acknowledged,
              new DeliveryFailed({ recipientId, message: `Dispatch to ${recipientId} failed: ${error.message}` })
            )))
        )
    })

  /**
   * The turn that already carried a message, if one did: delivered before a restart (the record
   * that queued it was not yet cleared), it is acknowledged with that turn, never sent twice.
   */
  const deliveredIn = (recipientId: string, queued: Queued) =>
    queued.message.id === undefined
      ? Effect.succeed(Option.none<TurnRecord>())
      : journal.byMessageId(recipientId, queued.message.id).pipe(
        Effect.catch((error) =>
          Effect.logWarning("Reading the turn journal for a delivered message failed; sending it").pipe(
            Effect.annotateLogs({ recipientId, messageId: queued.message.id, error: error.message }),
            Effect.as(Option.none<TurnRecord>())
          )
        )
      )

  const flushBatch = (recipientId: string, batch: ReadonlyArray<Queued>) =>
    Effect.gen(function*() {
      const fresh: Array<Queued> = []
      const earlier = new Map<string, { readonly record: TurnRecord; readonly batch: Array<Queued> }>()
      for (const queued of batch) {
        const found = yield* deliveredIn(recipientId, queued)
        if (Option.isNone(found)) fresh.push(queued)
        else if (cutByStop(found.value)) {
          yield* Effect.logWarning("A message the daemon was delivering when it stopped is sent again").pipe(
            Effect.annotateLogs({ recipientId, messageId: queued.message.id, turnId: found.value.turnId })
          )
          fresh.push(queued)
        } else {
          const entry = earlier.get(found.value.turnId) ?? { record: found.value, batch: [] }
          entry.batch.push(queued)
          earlier.set(found.value.turnId, entry)
        }
      }
      for (const { batch: again, record } of earlier.values()) {
        // Delivery always names its batches, so the turn is found again by that name.
        if (record.clientMessageId === null) return yield* Effect.die(new Error(`delivered turn ${record.turnId} has no client message id`))
        yield* dispatch(recipientId, record.text, record.clientMessageId, []).pipe(acknowledge(recipientId, again))
      }
      if (fresh.length === 0) return
      // A message enqueued twice in one window is sent once; both are acknowledged with its turn.
      const seen = new Set<string>()
      const distinct = fresh.filter((queued) => {
        const id = queued.message.id
        if (id === undefined) return true
        if (seen.has(id)) return false
        seen.add(id)
        return true
      })
      const clientMessageId = yield* randomId("delivery")
      const text = formatBatch(distinct.map((queued) => queued.message))
      yield* dispatch(recipientId, text, clientMessageId, [...seen]).pipe(acknowledge(recipientId, fresh))
    })

  /** Dispatches everything queued for the recipient as one prompt. */
  const flush = (recipientId: string, recipient: Recipient): Effect.Effect<void> =>
    Effect.suspend(() => {
      const batch = recipient.queued
      if (batch.length === 0) return Effect.void
      recipient.queued = []
      recipient.dispatching++
      return recipient.lane.withPermits(1)(flushBatch(recipientId, batch)).pipe(
        Effect.ensuring(Effect.sync(() => {
          recipient.dispatching--
          forget(recipientId, recipient)
        })),
        Effect.asVoid
      )
    })

  const scheduleFlush = (recipientId: string, recipient: Recipient) =>
    Effect.sleep(batchWindow).pipe(
      Effect.andThen(Effect.sync(() => {
        recipient.flushScheduled = false
        recipient.flushTimer = undefined
      })),
      Effect.andThen(flush(recipientId, recipient)),
      Effect.forkIn(scope),
      Effect.map((fiber) => {
        if (recipient.flushScheduled) recipient.flushTimer = fiber
      })
    )

  const enqueue = (message: AgentMessage) =>
    Effect.suspend(() => {
      if (closed) return Effect.fail(DeliveryClosed.of(message.recipientId))
      const recipient = recipientOf(message.recipientId)
      const acknowledged = Deferred.makeUnsafe<PromptReceipt, DeliveryFailed>()
      recipient.queued.push({ message, acknowledged })
      const awaitAck = Deferred.await(acknowledged)
      if (recipient.flushScheduled) return Effect.succeed(awaitAck)
      recipient.flushScheduled = true
      return Effect.as(scheduleFlush(message.recipientId, recipient), awaitAck)
    })

  const hasPending = (recipientId: string) =>
    Effect.sync(() => {
      const recipient = recipients.get(recipientId)
      return recipient !== undefined && (recipient.queued.length > 0 || recipient.dispatching > 0)
    })

  const close = Effect.gen(function*() {
    closed = true
    const waiting: Array<Deferred.Deferred<PromptReceipt, DeliveryFailed>> = []
    const flushes: Array<Effect.Effect<void>> = []
    for (const [recipientId, recipient] of recipients) {
      for (const queued of recipient.queued) waiting.push(queued.acknowledged)
      const timer = recipient.flushTimer
      recipient.flushScheduled = false
      recipient.flushTimer = undefined
      if (timer !== undefined) yield* Fiber.interrupt(timer)
      flushes.push(flush(recipientId, recipient))
    }
    // Run by close itself, not forked into the layer's scope: when the layer's finalizer closes,
    // that scope is already closed, and a fiber forked into it never runs.
    yield* Effect.all(flushes, { concurrency: "unbounded", discard: true })
    yield* Effect.forEach(waiting, (ack) => Effect.exit(Deferred.await(ack)), { discard: true })
    // Batches already dispatching when closing began are awaited through their lanes.
    yield* Effect.forEach([...recipients.values()], (recipient) => recipient.lane.withPermits(1)(Effect.void), {
      discard: true
    })
  }).pipe(Effect.withSpan("MessageDelivery.close"))

  // Shutdown closes delivery before the registry closes agents (this layer is built after it).
  const closeTimeout = Duration.fromInputUnsafe(options.closeTimeout ?? "30 seconds")
  yield* Effect.addFinalizer(() =>
    close.pipe(
      Effect.timeoutOption(closeTimeout),
      Effect.flatMap((done) =>
        done._tag === "Some"
          ? Effect.void
          : Effect.logWarning("Message delivery closed with unacknowledged dispatches").pipe(
            Effect.annotateLogs({ timeout: Duration.format(closeTimeout) })
          )
      )
    )
  )

  return MessageDelivery.of({
    // A message admitted is activity (the daemon's idle timer starts over).
    enqueue: (message) => Effect.andThen(noteActivity, enqueue(message)),
    hasPending,
    pendingRecipients: Effect.sync(() =>
      [...recipients].flatMap(([recipientId, recipient]) =>
        recipient.queued.length > 0 || recipient.dispatching > 0 ? [recipientId] : []
      )
    ),
    close
  })
})

/** The live message delivery, over the agent operations' prompt path and the turn journal. */
export const layer = (options?: MessageDeliveryOptions): Layer.Layer<MessageDelivery, never, AgentOperations | TurnJournal> =>
  Layer.effect(MessageDelivery, makeMessageDelivery(options))
