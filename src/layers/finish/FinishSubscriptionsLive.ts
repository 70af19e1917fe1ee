/**
 * The live `FinishSubscriptions` (D2): each caller's intent to be told when a target agent
 * finishes is stored first, with the target's finish position (the first finish past it is owed),
 * watched (through `AgentOperations`: this daemon's registry, or on a
 * cluster the runner that hosts the target; or on another server), turned
 * into a saved notification and delivered as a message to the caller, then forgotten.
 *
 * @module
 */
import { Cause, Clock, Deferred, type Duration, Effect, Fiber, Layer, Option, Random, Schedule, type Scope } from "effect"
import { FinishStoreError, FinishSubscriptionsClosed, FinishWatchFailed } from "../../domain/errors.ts"
import type { FinishOutcome, FinishSubscription } from "../../domain/finish.ts"
import type { RetirementBlocker } from "../../domain/retirement.ts"
import { ActivityClock } from "../../services/ActivityClock.ts"
import { AgentOperations } from "../../services/AgentOperations.ts"
import { FinishStore } from "../../services/FinishStore.ts"
import { type FinishRegistrationInput, FinishSubscriptions } from "../../services/FinishSubscriptions.ts"
import { MessageDelivery } from "../../services/MessageDelivery.ts"
import { RemoteFinishes } from "../../services/RemoteFinishes.ts"
import { TurnJournal } from "../../services/TurnJournal.ts"

/** Tuning for finish subscriptions: how failed watches, saves and deliveries are retried. */
export interface FinishSubscriptionsOptions {
  /** Backoff between attempts to watch, save or deliver that failed for a reason that may pass. */
  readonly retry?: Schedule.Schedule<unknown, unknown> | undefined
  /** How long a watch of a local target waits before it is issued again (from its position). Default 30 s. */
  readonly rewatchInterval?: Duration.Input | undefined
}

/** The notification the caller receives when its target finishes. */
export const formatNotification = (subscription: FinishSubscription, outcome: FinishOutcome): string => {
  const where = subscription.serverId === null ? "" : ` on server ${subscription.serverId}`
  const head = `[finish notification] Agent ${subscription.targetAgentId}${where} ${
    outcome.kind === "needs-permission" ? "needs a permission decision" : outcome.kind
  }.`
  return outcome.lastReply === null ? head : `${head}\nLast reply:\n${outcome.lastReply}`
}

interface Entry {
  subscription: FinishSubscription
  watch: Fiber.Fiber<void, unknown> | undefined
  released: boolean
  /** The target finished: its notification is saved and being delivered. */
  delivering: boolean
}

const idPart = Effect.map(Random.nextIntBetween(0, 0xffff_ffff), (n) => n.toString(16).padStart(8, "0"))

/**
 * Builds the service: recovers the stored subscriptions in the background (every caller counts as
 * protected until that is done) and stops the watches when the scope closes, leaving the durable
 * records for the next start. {@link layer} wraps it.
 */
export const makeFinishSubscriptions = Effect.fnUntraced(function*(
  options: FinishSubscriptionsOptions = {}
): Effect.fn.Return<
  FinishSubscriptions["Service"],
  never,
  FinishStore | MessageDelivery | AgentOperations | RemoteFinishes | TurnJournal | Scope.Scope
> {
  const store = yield* FinishStore
  const journal = yield* TurnJournal
  const delivery = yield* MessageDelivery
  const operations = yield* AgentOperations
  const remote = yield* RemoteFinishes
  const noteActivity = yield* ActivityClock.noter
  const scope = yield* Effect.scope
  const retry = options.retry ?? Schedule.min([Schedule.exponential("1 second"), Schedule.spaced("1 minute")])
  const rewatchInterval = options.rewatchInterval ?? "30 seconds"

  let closed = false
  let recovering = true
  const recoveredLatch = Deferred.makeUnsafe<void>()
  const registering = new Map<string, number>()
  /** Records held for each caller: pending, watched or being delivered. */
  const heldByCaller = new Map<string, number>()
  const entries = new Map<string, Entry>()

  const bump = (counts: Map<string, number>, key: string, by: number) => {
    const next = (counts.get(key) ?? 0) + by
    if (next <= 0) counts.delete(key)
    else counts.set(key, next)
  }

  const hold = (subscription: FinishSubscription): Entry => {
    const entry: Entry = { subscription, watch: undefined, released: false, delivering: subscription.notification !== null }
    entries.set(subscription.id, entry)
    bump(heldByCaller, subscription.callerAgentId, 1)
    return entry
  }

  /** The caller stops being protected by this record; once only. */
  const release = (entry: Entry) => {
    if (entry.released) return
    entry.released = true
    entries.delete(entry.subscription.id)
    bump(heldByCaller, entry.subscription.callerAgentId, -1)
  }

  /**
   * A watch from a position, issued again every `rewatchInterval` until it is answered: a request
   * left with a runner that stopped hosting the target (its shard moved) may never be answered,
   * and a new one, from the same position, misses nothing.
   */
  const fromPosition = (
    watch: Effect.Effect<FinishOutcome, FinishWatchFailed>
  ): Effect.Effect<FinishOutcome, FinishWatchFailed> =>
    Effect.gen(function*() {
      // In a fiber of its own, so that giving up on it never waits for its interruption (a
      // request to a runner that is gone may take long to interrupt).
      const fiber = yield* Effect.forkIn(watch, scope)
      const answered = yield* Fiber.join(fiber).pipe(
        Effect.timeoutOption(rewatchInterval),
        Effect.onInterrupt(() => Effect.forkIn(Fiber.interrupt(fiber), scope))
      )
      if (Option.isSome(answered)) return answered.value
      yield* Effect.forkIn(Fiber.interrupt(fiber), scope)
      return yield* fromPosition(watch)
    })

  const awaitLocal = (subscription: FinishSubscription): Effect.Effect<FinishOutcome, FinishWatchFailed> =>
    operations.awaitFinish(subscription.targetAgentId, { after: subscription.afterFinish ?? undefined }).pipe(
        // A target that does not exist will never finish; the caller is told it is gone.
        Effect.catchTag("AgentNotFound", () => Effect.succeed<FinishOutcome>({ kind: "closed", lastReply: null })),
        // The target's runner could not be reached (its shard is moving): the watch is retried.
        Effect.catchTag("ClusterUnavailable", (error) =>
          Effect.fail(new FinishWatchFailed({ targetAgentId: subscription.targetAgentId, serverId: null, message: error.message })))
    )

  const awaitTarget = (subscription: FinishSubscription): Effect.Effect<FinishOutcome, FinishWatchFailed> =>
    subscription.serverId !== null
      ? remote.awaitFinish(subscription.serverId, subscription.targetAgentId)
      // Without a position (a record stored before positions), a watch issued again would miss a
      // finish in between: it is issued once.
      : subscription.afterFinish === null
      ? awaitLocal(subscription)
      : fromPosition(awaitLocal(subscription))

  // Asked of the caller's host (on a cluster, this runner may not know an agent made elsewhere);
  // a host that cannot be reached now is no sign that the caller is gone.
  const callerExists = (agentId: string) =>
    operations.get(agentId).pipe(
      Effect.as(true),
      Effect.catchTags({ AgentNotFound: () => Effect.succeed(false), ClusterUnavailable: () => Effect.succeed(true) })
    )

  /** Delivers the saved notification until the caller's provider acknowledges it. */
  const deliver = (subscription: FinishSubscription, notification: string) =>
    Effect.gen(function*() {
      const acknowledged = yield* delivery.enqueue({
        recipientId: subscription.callerAgentId,
        text: notification,
        senderId: subscription.targetAgentId,
        // A notification delivered before a restart (whose record was not yet removed) is not sent again.
        id: `finish-${subscription.id}`
      })
      return yield* acknowledged
    }).pipe(
      Effect.tapError((error) =>
        Effect.logWarning("Finish notification not delivered yet").pipe(
          Effect.annotateLogs({ subscription: subscription.id, error: error.message })
        )
      ),
      // Delivery closing means shutdown: the record stays and the next start delivers it.
      Effect.retry({ schedule: retry, while: (error) => error._tag !== "DeliveryClosed" })
    )

  /** One subscription's life: watch, save the notification, deliver, then forget (D2). */
  const watch = (entry: Entry) =>
    Effect.gen(function*() {
      const subscription = entry.subscription
      let notification = subscription.notification
      if (notification === null) {
        const outcome = yield* awaitTarget(subscription).pipe(Effect.retry({ schedule: retry }))
        notification = formatNotification(subscription, outcome)
        entry.delivering = true
        yield* noteActivity
        // Saved only if no other watch of it saved one first, and it was not removed meanwhile
        // (rejected, or delivered by another runner): exactly one watch delivers it.
        const claimed = yield* store.claimNotification(subscription.id, notification).pipe(Effect.retry({ schedule: retry }))
        if (!claimed) {
          yield* Effect.logDebug("A finish notification is delivered by another watch, or its subscription is gone").pipe(
            Effect.annotateLogs({ subscription: subscription.id })
          )
          release(entry)
          return
        }
      }
      if (!(yield* callerExists(subscription.callerAgentId))) {
        yield* Effect.logWarning("Dropping finish subscription of a caller that no longer exists").pipe(
          Effect.annotateLogs({ subscription: subscription.id, callerAgentId: subscription.callerAgentId })
        )
      } else {
        const exit = yield* Effect.exit(deliver(subscription, notification))
        if (exit._tag === "Failure") return
      }
      yield* store.remove(subscription.id).pipe(Effect.retry({ schedule: retry }))
      release(entry)
      yield* noteActivity
    }).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.logWarning("Finish subscription watch stopped").pipe(
          Effect.annotateLogs({ subscription: entry.subscription.id, cause: Cause.pretty(cause) })
        )
      )
    )

  const startWatch = (entry: Entry) =>
    Effect.suspend(() => {
      if (closed || entry.watch !== undefined || entry.released) return Effect.void
      return watch(entry).pipe(
        Effect.forkIn(scope),
        Effect.map((fiber) => {
          if (fiber.pollUnsafe() === undefined) entry.watch = fiber
        })
      )
    })

  const register = Effect.fn("FinishSubscriptions.register")(function*(
    input: FinishRegistrationInput,
    options?: { readonly held?: boolean }
  ) {
    if (closed) return yield* new FinishSubscriptionsClosed({ message: "Finish subscriptions are closed" })
    yield* noteActivity
    const caller = input.callerAgentId
    bump(registering, caller, 1)
    return yield* Effect.gen(function*() {
      const held = options?.held === true
      const serverId = input.serverId ?? null
      // Where the target's finishes stand now: the first one past it is owed, even when it comes
      // before the watch reaches the target's host (on a cluster, another runner).
      const afterFinish = serverId !== null ? null : yield* journal.lastFinish(input.targetAgentId).pipe(
        Effect.map(Option.match({ onNone: () => 0, onSome: (last) => last.position })),
        Effect.mapError((error) =>
          new FinishStoreError({
            operation: "register",
            message: `Reading the finish position of ${input.targetAgentId} failed: ${error.message}`
          })
        )
      )
      const subscription: FinishSubscription = {
        id: `finish-${yield* idPart}${yield* idPart}`,
        callerAgentId: caller,
        targetAgentId: input.targetAgentId,
        serverId,
        state: held ? "pending" : "accepted",
        createdAt: yield* Clock.currentTimeMillis,
        afterFinish,
        notification: null
      }
      // Committed before it is accepted: a registration that returns is durable.
      yield* store.put(subscription)
      const entry = hold(subscription)
      let settled = false
      const accept = Effect.suspend(() => {
        if (settled) return Effect.void
        settled = true
        if (entry.subscription.state === "accepted") return startWatch(entry)
        entry.subscription = { ...entry.subscription, state: "accepted" }
        return store.put(entry.subscription).pipe(Effect.andThen(startWatch(entry)))
      })
      // The durable record goes first, so a crash in between never leaves a watch without intent.
      const reject = Effect.suspend(() => {
        if (entry.released) return Effect.void
        settled = true
        return store.remove(subscription.id).pipe(
          Effect.andThen(Effect.suspend(() => {
            const fiber = entry.watch
            release(entry)
            return fiber === undefined ? Effect.void : Fiber.interrupt(fiber)
          }))
        )
      })
      if (!held) yield* accept
      return { id: subscription.id, accept, reject }
    }).pipe(Effect.ensuring(Effect.sync(() => bump(registering, caller, -1))))
  })

  // Recovery: until the stored intents are loaded, nobody knows who is waiting, so every caller
  // counts as protected (D2).
  yield* Effect.gen(function*() {
    const stored = yield* store.list.pipe(
      Effect.tapError((error) =>
        Effect.logError("Recovering finish subscriptions failed; retrying").pipe(
          Effect.annotateLogs({ error: error.message })
        )
      ),
      Effect.retry({ schedule: retry })
    )
    const callers = new Map<string, boolean>()
    const recovered: Array<Entry> = []
    for (const subscription of stored) {
      let exists = callers.get(subscription.callerAgentId)
      if (exists === undefined) callers.set(subscription.callerAgentId, exists = yield* callerExists(subscription.callerAgentId))
      if (!exists) {
        yield* Effect.logWarning("Dropping finish subscription of a caller that no longer exists").pipe(
          Effect.annotateLogs({ subscription: subscription.id, callerAgentId: subscription.callerAgentId })
        )
        // The stale record stays for the next recovery to drop; recovery itself goes on.
        yield* store.remove(subscription.id).pipe(
          Effect.catch((error) =>
            Effect.logWarning("Could not remove the finish subscription of a missing caller").pipe(
              Effect.annotateLogs({ subscription: subscription.id, error: error.message })
            )
          )
        )
        continue
      }
      // A registration still held when the server stopped was committed: it is honoured.
      recovered.push(hold(subscription))
    }
    // Every stored intent now protects its own caller, so the blanket protection can end before
    // the watches are re-attached.
    recovering = false
    for (const entry of recovered) yield* startWatch(entry)
    yield* Deferred.succeed(recoveredLatch, undefined)
  }).pipe(Effect.forkScoped)

  const close = Effect.gen(function*() {
    closed = true
    const watching = [...entries.values()].flatMap((entry) => entry.watch === undefined ? [] : [entry.watch])
    yield* Effect.forEach(watching, Fiber.interrupt, { discard: true })
  })
  // Built after message delivery, so closed before it: no new notification starts during shutdown.
  yield* Effect.addFinalizer(() => close)

  return FinishSubscriptions.of({
    register,
    hasPendingForCaller: (agentId) =>
      Effect.sync(() => recovering || registering.has(agentId) || heldByCaller.has(agentId)),
    recovered: Deferred.await(recoveredLatch),
    retirementBlockers: Effect.sync(() => {
      const blockers: Array<RetirementBlocker> = []
      if (recovering) blockers.push({ category: "finish-recovery" })
      for (const caller of registering.keys()) blockers.push({ category: "finish-registration", agentId: caller })
      for (const entry of entries.values()) {
        const { callerAgentId: agentId, serverId, state, targetAgentId } = entry.subscription
        // A watch of a local target is durable and comes back with the daemon; the others need this process.
        if (state === "pending") blockers.push({ category: "finish-held", agentId, detail: `of ${targetAgentId}` })
        else if (entry.delivering) blockers.push({ category: "finish-notification", agentId, detail: `of ${targetAgentId}` })
        else if (serverId !== null) blockers.push({ category: "finish-remote-watch", agentId, detail: `of ${targetAgentId} on ${serverId}` })
      }
      return blockers
    }),
    close
  })
})

/**
 * The live finish subscriptions, over the finish store, message delivery, the agent operations,
 * remote finishes and the turn journal (where each target's finishes stand).
 */
export const layer = (
  options?: FinishSubscriptionsOptions
): Layer.Layer<FinishSubscriptions, never, FinishStore | MessageDelivery | AgentOperations | RemoteFinishes | TurnJournal> =>
  Layer.effect(FinishSubscriptions, makeFinishSubscriptions(options))
