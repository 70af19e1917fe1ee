import { Deferred, Duration, Effect, Fiber, Layer, Schedule, Semaphore } from "effect"
import { DeliveryClosed, DeliveryFailed } from "../../domain/errors.ts"
import { AgentRegistry, type PromptError, type PromptReceipt } from "../../services/AgentRegistry.ts"
import { type AgentMessage, MessageDelivery } from "../../services/MessageDelivery.ts"

export interface MessageDeliveryOptions {
  /** Messages to one recipient arriving within this window are dispatched together. Default 2 s. */
  readonly batchWindow?: Duration.Input | undefined
  /** Backoff between dispatch attempts that failed for a reason that may pass. Default 1 s, doubling, at most 8 tries. */
  readonly retry?: Schedule.Schedule<unknown, PromptError> | undefined
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

/** Failures that will not pass by retrying. */
const isPermanent = (error: PromptError) =>
  error._tag === "AgentNotFound" || error._tag === "AgentNotResumable" || error._tag === "ProviderNotFound"

/** One prompt for a batch: each message headed by its sender, in arrival order. */
export const formatBatch = (messages: ReadonlyArray<AgentMessage>): string =>
  messages
    .map((message) => message.senderId === undefined ? message.text : `[message from agent ${message.senderId}]\n${message.text}`)
    .join("\n\n")

export const makeMessageDelivery = Effect.fnUntraced(function*(options: MessageDeliveryOptions = {}) {
  const registry = yield* AgentRegistry
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

  /** Dispatches everything queued for the recipient as one prompt. */
  const flush = (recipientId: string, recipient: Recipient): Effect.Effect<void> =>
    Effect.suspend(() => {
      const batch = recipient.queued
      if (batch.length === 0) return Effect.void
      recipient.queued = []
      recipient.dispatching++
      const text = formatBatch(batch.map((queued) => queued.message))
      return recipient.lane.withPermits(1)(
        registry.prompt(recipientId, text).pipe(
          Effect.retry({ schedule: retry, while: (error) => !isPermanent(error) }),
          Effect.matchEffect({
            onSuccess: (receipt) => Effect.forEach(batch, (queued) => Deferred.succeed(queued.acknowledged, receipt)),
            onFailure: (error) =>
              Effect.logWarning("Message dispatch failed").pipe(
                Effect.annotateLogs({ recipientId, error: error.message }),
                Effect.andThen(Effect.forEach(batch, (queued) =>
                  Deferred.fail(
                    queued.acknowledged,
                    new DeliveryFailed({ recipientId, message: `Dispatch to ${recipientId} failed: ${error.message}` })
                  )))
              )
          })
        )
      ).pipe(
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
    for (const [recipientId, recipient] of recipients) {
      for (const queued of recipient.queued) waiting.push(queued.acknowledged)
      const timer = recipient.flushTimer
      recipient.flushScheduled = false
      recipient.flushTimer = undefined
      if (timer !== undefined) yield* Fiber.interrupt(timer)
      yield* flush(recipientId, recipient).pipe(Effect.forkIn(scope))
    }
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

  return MessageDelivery.of({ enqueue, hasPending, close })
})

export const layer = (options?: MessageDeliveryOptions): Layer.Layer<MessageDelivery, never, AgentRegistry> =>
  Layer.effect(MessageDelivery, makeMessageDelivery(options))
