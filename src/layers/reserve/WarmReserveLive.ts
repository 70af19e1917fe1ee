/**
 * The warm reserve (H4): per provider, a target number of started processes that hold no session,
 * kept in the `RuntimeLedger` under `warm:<provider>` so that a daemon that crashed leaves none
 * behind. Taking one starts its replacement at once; an idle one past `maxIdle` is replaced first
 * and closed once its replacement is ready; a failed start (or a ready process that died on its
 * own) backs off exponentially, so a broken command cannot become a respawn storm.
 */
import { Cause, Clock, Duration, Effect, Exit, Layer, Option } from "effect"
import { InvalidWarmReserveSize, WarmReserveUnsupported } from "../../domain/errors.ts"
import type { WarmProcess } from "../../domain/provider.ts"
import { maxWarmReserve, warmLedgerId, type WarmReserveView } from "../../domain/warmReserve.ts"
import { ProviderRegistry } from "../../services/ProviderRegistry.ts"
import { RuntimeLedger } from "../../services/RuntimeLedger.ts"
import { WarmReserve } from "../../services/WarmReserve.ts"
import { randomId } from "../../platform/ids.ts"
import { forgetProcess, recordProcess } from "../registry/runtimeRecords.ts"

/** Tuning for the warm reserve: each provider's starting target, idle replacement and start backoff. */
export interface WarmReserveOptions {
  /** Each provider's target when the reserve opens, by provider id. */
  readonly targets?: Readonly<Record<string, number>> | undefined
  /** How long a warm process may wait unbound before it is replaced. Default 1 h; 0 keeps it for ever. */
  readonly maxIdle?: Duration.Input | undefined
  /** The wait after a first failed start; it doubles with each further failure. Default 1 s. */
  readonly retryDelay?: Duration.Input | undefined
  /** The longest wait between failed starts. Default 1 min. */
  readonly maxRetryDelay?: Duration.Input | undefined
}

interface Entry {
  readonly pool: Pool
  readonly process: WarmProcess
  readonly marker: string
  readonly readyAt: number
  /** Past `maxIdle`: replaced, and closed once the replacement is ready. */
  expiring: boolean
  /** Taken by an agent: it is the agent's from now on. */
  taken: boolean
  closing: boolean
  /** Its `warm:` ledger entry is gone (it exited, or the agent's entry covers it). */
  forgotten: boolean
}

interface Pool {
  readonly provider: string
  readonly startWarm: (marker: string) => Effect.Effect<WarmProcess, { readonly message: string }>
  target: number
  /** Oldest first. */
  readonly ready: Array<Entry>
  starting: number
  /** Rounds of failures in a row (failed starts, ready processes that died); the wait doubles with each. */
  failures: number
  lastFailure: string | null
  lastFailureAt: number
  retryAt: number | null
}

const make = Effect.fnUntraced(function*(options: WarmReserveOptions) {
  const providers = yield* ProviderRegistry
  const ledger = yield* RuntimeLedger
  const scope = yield* Effect.scope
  const maxIdle = Duration.fromInputUnsafe(options.maxIdle ?? "1 hour")
  const retryDelay = Duration.toMillis(Duration.fromInputUnsafe(options.retryDelay ?? "1 second"))
  const maxRetryDelay = Duration.toMillis(Duration.fromInputUnsafe(options.maxRetryDelay ?? "1 minute"))
  const pools = new Map<string, Pool>()
  /** Every process the reserve started and still answers for (not taken, not exited). */
  const owned = new Set<Entry>()
  let opened = false
  let closing = false

  const fork = <A, E>(effect: Effect.Effect<A, E>) => Effect.asVoid(Effect.forkIn(effect, scope))

  const view = (pool: Pool): WarmReserveView => ({
    provider: pool.provider,
    target: pool.target,
    ready: pool.ready.map((entry) => ({ pid: entry.process.pid, readyAt: entry.readyAt, expiring: entry.expiring })),
    starting: pool.starting,
    lastFailure: pool.lastFailure,
    retryAt: pool.retryAt
  })

  const forget = (entry: Entry) =>
    Effect.suspend(() => {
      if (entry.forgotten) return Effect.void
      entry.forgotten = true
      return forgetProcess(ledger, warmLedgerId(entry.pool.provider), entry.process.pid)
    })

  /** Marks a ready entry closing and takes it out of its pool; false when it is not ready any more. */
  const detach = (entry: Entry): boolean => {
    const index = entry.pool.ready.indexOf(entry)
    if (index < 0 || entry.taken || entry.closing) return false
    entry.pool.ready.splice(index, 1)
    entry.closing = true
    return true
  }

  /** Closes a process that holds no session, then drops its ledger entry. */
  const closeEntry = (entry: Entry) => Effect.andThen(entry.process.close, forget(entry))

  /**
   * A failure: a new round of failures doubles the wait before the next start, up to the limit; a
   * failure after a quiet spell (twice the limit) starts counting again.
   */
  const backOff = Effect.fnUntraced(function*(pool: Pool, message: string) {
    const now = yield* Clock.currentTimeMillis
    if (now - pool.lastFailureAt > 2 * maxRetryDelay) pool.failures = 0
    pool.lastFailureAt = now
    pool.lastFailure = message
    // Failures of starts that ran together are one round: they count once.
    if (pool.retryAt !== null) return
    pool.failures++
    const delay = Math.min(retryDelay * 2 ** (pool.failures - 1), maxRetryDelay)
    pool.retryAt = now + delay
    yield* Effect.logWarning(`A warm ${pool.provider} process failed; the next start waits ${Duration.format(Duration.millis(delay))}`).pipe(
      Effect.annotateLogs({ provider: pool.provider, failures: pool.failures, error: message })
    )
    yield* fork(Effect.andThen(Effect.sleep(Duration.millis(delay)), Effect.suspend(() => {
      pool.retryAt = null
      return reconcile(pool)
    })))
  })

  const onExited = (entry: Entry): Effect.Effect<void> =>
    Effect.gen(function*() {
      owned.delete(entry)
      yield* forget(entry)
      if (entry.taken || entry.closing) return
      // Died while waiting: replaced, after a back-off (a process that dies at once must not loop).
      const index = entry.pool.ready.indexOf(entry)
      if (index >= 0) entry.pool.ready.splice(index, 1)
      yield* backOff(entry.pool, `warm process ${entry.process.pid} exited on its own`)
    })

  const expire = (entry: Entry): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (entry.taken || entry.closing || !entry.pool.ready.includes(entry)) return Effect.void
      entry.expiring = true
      return reconcile(entry.pool)
    })

  const startOne = (pool: Pool): Effect.Effect<void> =>
    Effect.gen(function*() {
      const marker = yield* randomId("runtime")
      const started = yield* Effect.exit(pool.startWarm(marker))
      pool.starting--
      if (Exit.isFailure(started)) {
        const error = Cause.findErrorOption(started.cause)
        return yield* backOff(pool, Option.isSome(error) ? error.value.message : Cause.pretty(started.cause))
      }
      const process = started.value
      if (closing) return yield* process.close
      const entry: Entry = {
        pool,
        process,
        marker,
        readyAt: yield* Clock.currentTimeMillis,
        expiring: false,
        taken: false,
        closing: false,
        forgotten: false
      }
      owned.add(entry)
      entry.forgotten = !(yield* recordProcess(ledger, { agentId: warmLedgerId(pool.provider), pid: process.pid, marker }))
      yield* fork(Effect.andThen(process.exited, onExited(entry)))
      // The reserve may have closed while the entry was being recorded.
      if (closing) return yield* closeEntry(entry)
      pool.ready.push(entry)
      pool.lastFailure = null
      if (Duration.isGreaterThan(maxIdle, Duration.zero)) yield* fork(Effect.andThen(Effect.sleep(maxIdle), expire(entry)))
      yield* reconcile(pool)
    })

  /**
   * Brings the pool to its target: surplus idle processes close, missing ones start (unless
   * backing off). Every decision is made before anything is forked, so concurrent calls agree.
   */
  function reconcile(pool: Pool): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (!opened || closing) return Effect.void
      const fresh = pool.ready.filter((entry) => !entry.expiring)
      const expiring = pool.ready.filter((entry) => entry.expiring)
      // An expiring process stands in while its replacement starts; the oldest go first.
      const standIns = Math.max(0, pool.target - fresh.length)
      // Surplus ready processes close, oldest first; a surplus still starting closes when it is ready.
      const surplus = Math.max(0, fresh.length - pool.target)
      const closed = [...expiring.slice(0, Math.max(0, expiring.length - standIns)), ...fresh.slice(0, surplus)].filter(detach)
      const missing = pool.retryAt !== null ? 0 : Math.max(0, pool.target - (fresh.length - surplus) - pool.starting)
      pool.starting += missing
      return Effect.all([
        Effect.forEach(closed, (entry) => fork(closeEntry(entry)), { discard: true }),
        Effect.forEach(Array.from({ length: missing }), () => fork(startOne(pool)), { discard: true })
      ], { discard: true })
    })
  }

  const poolOf = Effect.fnUntraced(function*(provider: string) {
    const existing = pools.get(provider)
    if (existing !== undefined) return existing
    const client = yield* providers.get(provider)
    const startWarm = client.startWarm
    if (startWarm === undefined) return yield* WarmReserveUnsupported.of(provider)
    const pool: Pool = {
      provider,
      startWarm,
      target: 0,
      ready: [],
      starting: 0,
      failures: 0,
      lastFailure: null,
      lastFailureAt: Number.NEGATIVE_INFINITY,
      retryAt: null
    }
    pools.set(provider, pool)
    return pool
  })

  const resize = Effect.fn("WarmReserve.resize")(function*(provider: string, target: number) {
    if (!Number.isInteger(target) || target < 0 || target > maxWarmReserve) {
      return yield* new InvalidWarmReserveSize({
        provider,
        message: `A warm reserve is a whole number from 0 to ${maxWarmReserve}; got ${target}`
      })
    }
    const pool = yield* poolOf(provider)
    pool.target = target
    yield* reconcile(pool)
    return view(pool)
  })

  const take = Effect.fn("WarmReserve.take")(function*(provider: string) {
    const pool = pools.get(provider)
    if (pool === undefined || closing) return Option.none()
    // The oldest first: an expiring process (always among the oldest) is going anyway.
    const entry = pool.ready.shift()
    if (entry === undefined) return Option.none()
    entry.taken = true
    owned.delete(entry)
    yield* reconcile(pool)
    return Option.some({ process: entry.process, marker: entry.marker, handOver: forget(entry) })
  })

  const open = Effect.gen(function*() {
    if (opened) return
    opened = true
    for (const [provider, target] of Object.entries(options.targets ?? {})) {
      if (target === 0) continue
      yield* resize(provider, target).pipe(
        Effect.catch((error) =>
          Effect.logWarning("The configured warm reserve is not kept").pipe(
            Effect.annotateLogs({ provider, error: error.message })
          )
        )
      )
    }
  })

  /**
   * Every process the reserve still answers for is closed and leaves the ledger, whether ready or
   * already closing; a start that finishes later closes its process at once.
   */
  const closeAll = Effect.suspend(() => {
    closing = true
    for (const pool of pools.values()) pool.ready.splice(0)
    const entries = [...owned]
    for (const entry of entries) entry.closing = true
    return Effect.forEach(entries, closeEntry, { concurrency: "unbounded", discard: true })
  })
  // Starts still under way when the layer ends were interrupted before this runs; their provider
  // ends what they had started.
  yield* Effect.addFinalizer(() => closeAll)

  return WarmReserve.of({
    take,
    resize,
    reserves: Effect.sync(() =>
      [...pools.values()].filter((pool) => pool.target > 0 || pool.ready.length > 0 || pool.starting > 0).map(view)
    ),
    open,
    close: closeAll
  })
})

/**
 * The warm reserve over the registered providers; nothing starts until `open`. `WarmReserve` is a
 * reference, so the layer adds no service to the type: layers built over it see it in place of the empty default.
 */
export const layer = (options: WarmReserveOptions = {}): Layer.Layer<never, never, ProviderRegistry | RuntimeLedger> =>
  Layer.effect(WarmReserve, make(options))

/** Opens the reserve in the context: placed after the layer that ends a previous daemon's leftovers. */
export const opened: Layer.Layer<never> = Layer.effectDiscard(Effect.gen(function*() {
  yield* (yield* WarmReserve).open
}))
