/**
 * The live `AgentRegistry`: a thin façade over its two owners. The residency (`residency.ts`, with
 * `lifecycle.ts`) owns every agent's record and live runtime, and creates, resumes, releases and
 * closes runtimes one lane per agent; the turn owner (`prompts.ts`) carries prompts through the
 * durable turn journal and sees the residency only through its port. The live runtimes are
 * offered to the collector as candidates.
 *
 * @module
 */
import type { AgentEvent } from "../../domain/agentEvent.ts"
import { AgentEvents } from "../../services/AgentEvents.ts"
import { Deferred, Duration, Effect, Exit, Layer, Clock, Scope } from "effect"
import { AgentNotFound, type AgentStoreError } from "../../domain/errors.ts"
import type { RetirementBlocker } from "../../domain/retirement.ts"
import { maxEndedTurnsPerAgent } from "../../domain/turn.ts"
import { AgentRegistry, type RegistryRuntimes } from "../../services/AgentRegistry.ts"
import { ActivityClock } from "../../services/ActivityClock.ts"
import { AgentPlacement } from "../../services/AgentPlacement.ts"
import { AgentStore } from "../../services/AgentStore.ts"
import { ProcessInspection } from "../../services/ProcessInspection.ts"
import { ProviderRegistry } from "../../services/ProviderRegistry.ts"
import { RuntimeCandidates } from "../../services/RuntimeCandidates.ts"
import { RuntimeLedger } from "../../services/RuntimeLedger.ts"
import { TurnJournal } from "../../services/TurnJournal.ts"
import { WarmReserve } from "../../services/WarmReserve.ts"
import { makeCandidates, residentBytesOf } from "./candidates.ts"
import { makeFinishes } from "./finishes.ts"
import { makeLanes } from "./lanes.ts"
import { makeLifecycle } from "./lifecycle.ts"
import { makePrompts } from "./prompts.ts"
import { makeResidency } from "./residency.ts"
import { makeRuntimeRecords } from "./runtimeRecords.ts"
import { closeEveryRuntime } from "./shutdown.ts"
import { makeViews } from "./views.ts"

/** Tuning for the registry: the prompt size bound, turn retention, the shutdown probe and a shared store. */
export interface AgentRegistryOptions {
  /**
   * The largest prompt accepted, JSON-encoded, in bytes. Default 512 KiB: well below the 1 MiB
   * line the plugin protocol allows, so an accepted prompt always reaches its provider whole.
   */
  readonly maxPromptBytes?: number | undefined
  /** How long ended turns stay in the journal (a repeat of an older client id is a new turn). Default 168h. */
  readonly turnRetention?: Duration.Input | undefined
  /**
   * How long a provider is asked at shutdown what its runtime still runs, for the shutdown's
   * summary. Default 1 s; zero does not ask (the summary then names turns, permissions and
   * subagents only).
   */
  readonly shutdownProbeTimeout?: Duration.Input | undefined
  /**
   * The store is shared with other daemons (a cluster's runners). The journal's unfinished turns
   * are then taken over per agent, when `adopt` starts hosting it, not all at start: the other
   * runners' turns are theirs.
   */
  readonly sharedStore?: boolean | undefined
}


/** The default bound on a prompt, JSON-encoded. */
export const defaultMaxPromptBytes = 512 * 1024

/**
 * Builds the registry service: loads the stored agents, ends what a previous daemon's runtimes
 * left running, takes over its journal (per agent instead when the store is shared), and closes
 * every live runtime when the scope closes. {@link layer} and {@link layerWith} wrap it.
 */
export const makeAgentRegistry = Effect.fnUntraced(function*(options: AgentRegistryOptions = {}): Effect.fn.Return<
  AgentRegistry["Service"],
  AgentStoreError,
  AgentStore | TurnJournal | RuntimeLedger | ProviderRegistry | Scope.Scope
> {
  const store = yield* AgentStore
  const journal = yield* TurnJournal
  const runtimeRecords = makeRuntimeRecords(yield* RuntimeLedger)
  const providers = yield* ProviderRegistry
  // The empty default unless the host composed a warm reserve under the registry.
  const reserve = yield* WarmReserve
  // Optional: hosts that can read process memory report what each release gives back.
  const inspection = yield* Effect.serviceOption(ProcessInspection)
  const scope = yield* Effect.scope
  // The fibers that carry prompts to their runtimes, and those that wait for running turns, live in
  // scopes of their own: at shutdown the carriers stop first (a prompt not yet handed over stays
  // `accepted` for the next start), the runtimes close, and the turns they cut short are recorded
  // by this process before the waiters' scope closes.
  const carryScope = yield* Scope.fork(scope)
  const turnScope = yield* Scope.fork(scope)
  const sharedStore = options.sharedStore === true

  // Optional: hosts that serve live events (the daemon) show each agent's there.
  const agentEvents = yield* Effect.serviceOption(AgentEvents)
  const publish = (agentId: string, event: AgentEvent, now: number) => {
    if (agentEvents._tag === "Some") agentEvents.value.publish(agentId, event, now)
  }
  const lanes = makeLanes(yield* ActivityClock.noter)
  const finishes = yield* makeFinishes(journal)
  const residency = yield* makeResidency({
    store,
    providers,
    reserve,
    runtimeRecords,
    placement: yield* AgentPlacement,
    // Optional: hosts with a daemon idle timer learn of every activity here.
    activity: yield* Effect.serviceOption(ActivityClock),
    lanes,
    finishes,
    measure: (agent) => {
      const sampled = residentBytesOf(inspection, agent)
      return sampled === undefined ? Effect.succeed(null) : Effect.map(sampled, (bytes) => bytes ?? null)
    },
    publish
  })
  const prompts = makePrompts({
    journal,
    carryScope,
    turnScope,
    maxPromptBytes: options.maxPromptBytes ?? defaultMaxPromptBytes,
    residency: residency.port,
    announceFinish: finishes.announce,
    publish
  })
  const lifecycle = makeLifecycle({
    residency,
    lanes,
    finishes,
    store,
    journal,
    providers,
    refuseDelete: prompts.refuseDelete,
    // On a shared store, the agent's unfinished turns are this daemon's to take over once it hosts the agent.
    recover: (agentId) => sharedStore ? prompts.recover(agentId) : Effect.void
  })
  const views = makeViews(residency, store, providers, sharedStore)

  const stopAdmission = Effect.suspend(() => {
    residency.stopAdmission()
    return prompts.stopWaiting
  })

  // Before anything is admitted: what a previous daemon's runtimes left running is ended, and its
  // journal is taken over.
  yield* runtimeRecords.endPrevious
  if (!sharedStore) yield* prompts.recover()

  // Ended turns are kept for the retention, and at most so many per agent.
  const retention = Duration.toMillis(Duration.fromInputUnsafe(options.turnRetention ?? Duration.hours(168)))
  const pruneJournal = Effect.gen(function*() {
    const removed = yield* journal.prune((yield* Clock.currentTimeMillis) - retention, maxEndedTurnsPerAgent)
    if (removed > 0) yield* Effect.logDebug("Pruned the turn journal").pipe(Effect.annotateLogs({ removed }))
  }).pipe(Effect.catch((error) => Effect.logWarning("Pruning the turn journal failed").pipe(
    Effect.annotateLogs({ error: error.message })
  )))
  yield* pruneJournal.pipe(
    Effect.andThen(Effect.sleep("1 hour")),
    Effect.forever,
    Effect.forkIn(scope)
  )

  // On shutdown admission closes first (and every waiting caller is answered); then every live
  // runtime is closed in its lane and saved as resumable (`closeEveryRuntime`), and the turns they
  // ran are recorded.
  const shutdownProbeTimeout = Duration.fromInputUnsafe(options.shutdownProbeTimeout ?? "1 second")
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      yield* stopAdmission
      yield* Scope.close(carryScope, Exit.void)
      yield* closeEveryRuntime(residency, lanes, reserve, shutdownProbeTimeout)
      // Closing the runtimes ended their turns; their outcomes are written before the store closes.
      yield* Effect.forEach(prompts.running(), (handle) => Deferred.await(handle.ended), { discard: true }).pipe(
        Effect.timeoutOption("5 seconds")
      )
    })
  )

  return AgentRegistry.of({
    create: lifecycle.create,
    adopt: lifecycle.adopt,
    relinquish: (agentId) => Effect.sync(() => residency.relinquish(agentId)),
    release: (agentId) =>
      lanes.inLane(agentId, Effect.gen(function*() {
        const agent = residency.liveOf(agentId)
        if (agent === undefined) return false
        yield* residency.takeDown(agent, "handed-over")
        return true
      })),
    residency: residency.residency,
    prompt: prompts.prompt,
    turn: prompts.turn,
    turns: prompts.turns,
    stopAdmission,
    retryWrites: Effect.andThen(prompts.retryWrites, residency.retrySaves),
    pauseAdmission: (refusal) => Effect.sync(() => residency.pauseAdmission(refusal)),
    resumeAdmission: Effect.sync(() => residency.pauseAdmission(undefined)),
    retirementBlockers: Effect.sync(() => {
      const blockers: Array<RetirementBlocker> = []
      for (const record of prompts.carried()) {
        blockers.push({ category: `turn-${record.state}`, agentId: record.agentId, detail: record.turnId })
      }
      for (const agentId of lanes.held()) {
        if (residency.liveOf(agentId) === undefined) blockers.push({ category: "lifecycle-operation", agentId })
      }
      const failing = prompts.failingWrite()
      if (failing !== undefined) blockers.push({ category: "store-failing", detail: `turn ${failing.turnId}: ${failing.message}` })
      for (const [agentId, message] of residency.unsaved()) blockers.push({ category: "store-failing", agentId, detail: message })
      if (prompts.accepting() > 0) blockers.push({ category: "prompt-accepting", detail: `${prompts.accepting()} in progress` })
      const creating = lifecycle.creating()
      if (creating > 0) blockers.push({ category: "agent-creating", detail: `${creating} in progress` })
      return blockers
    }),
    interrupt: Effect.fn("AgentRegistry.interrupt")(function*(agentId: string) {
      yield* lifecycle.requireKnown(agentId)
      const agent = residency.liveOf(agentId)
      if (agent !== undefined) yield* prompts.interrupt(agent)
    }),
    respondToPermission: lifecycle.respondToPermission,
    close: lifecycle.close,
    delete: lifecycle.delete,
    laneCount: Effect.sync(() => lanes.count()),
    reload: lifecycle.reload,
    awaitFinish: (agentId, options) =>
      Effect.suspend(() =>
        residency.recordOf(agentId) === undefined ? Effect.fail(AgentNotFound.of(agentId)) : finishes.await(agentId, options)
      ),
    awaitIdle: prompts.awaitIdle,
    get: views.get,
    list: views.list,
    residents: views.residents,
    candidates: makeCandidates(residency, inspection)
  })
})
/** The registry over the store, the turn journal and the providers. */
export const layer: Layer.Layer<AgentRegistry, AgentStoreError, AgentStore | TurnJournal | RuntimeLedger | ProviderRegistry> = Layer.effect(
  AgentRegistry,
  makeAgentRegistry()
)

/** The registry with options (prompt bound, journal retention). */
export const layerWith = (
  options: AgentRegistryOptions
): Layer.Layer<AgentRegistry, AgentStoreError, AgentStore | TurnJournal | RuntimeLedger | ProviderRegistry> =>
  Layer.effect(AgentRegistry, makeAgentRegistry(options))

/** The registry's live runtimes as the collector's candidates. */
export const candidatesLayer: Layer.Layer<RuntimeCandidates, never, AgentRegistry> = Layer.effect(
  RuntimeCandidates,
  Effect.gen(function*() {
    const runtimes: RegistryRuntimes = yield* AgentRegistry
    return runtimes.candidates
  })
)
