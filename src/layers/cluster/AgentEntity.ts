/**
 * An agent as an Effect Cluster entity (X6). Its RPCs are the registry's operations on one agent;
 * the runner that hosts the entity serves them through its own `AgentRegistry` and
 * `RuntimeCollector`, so the provider runtime lives in the registry's scope, never in the
 * entity's.
 *
 * - **Keep-alive follows residency.** While the registry holds a live runtime for the agent, the
 *   entity holds `Entity.keepAlive(true)`, so the cluster's idle reaper never passivates it. Only
 *   Quiesce's collector (every C-rule, in the agent's lane) releases the runtime; the entity then
 *   drops keep-alive and the reaper removes an empty shell.
 * - **Hand-off.** When the entity ends because its shard left this runner (moved to another
 *   runner, or this runner shuts down), the registry stops hosting the agent and the runtime is
 *   released resumably: through the collector when that is safe, and otherwise by a forced close
 *   that interrupts the running turn, logged with what kept it (see docs/cluster.md). The next
 *   message resumes the saved session on the new owner. An entity that ends while the shard
 *   stays (a handler rebuilt after a defect) never forces a close.
 * - **Live events.** `Follow` streams the agent's events from this runner's `AgentEvents` (where
 *   its turns run and its residency changes, so where they are published) to whichever runner a
 *   reader reached; it is never persisted, and it is interrupted when the entity ends here (the
 *   shard moves, the runner stops), so a reader never holds a hand-off or a stop up.
 * - **Exactly once.** The registry's turn journal, shared by every runner, gives one turn per
 *   client message id however often, and from wherever, the prompt is sent, and a turn runs only
 *   where it was claimed (`TurnJournal.claim`).
 */
import { Effect, Schedule, Schema, Stream } from "effect"
import { ClusterSchema, Entity, Sharding } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { AgentRecord, Labels } from "../../domain/agent.ts"
import { AgentDeleteRefused, ClosedRuntime, DeletedAgent, RuntimeCloseRefused } from "../../domain/close.ts"
import { FinishOutcome } from "../../domain/finish.ts"
import { NumberedEvent } from "../../domain/agentEvent.ts"
import {
  AgentBusy,
  AgentNotFound,
  AgentNotResumable,
  AgentStoreError,
  ClusterUnavailable,
  PermissionNotPending,
  PromptTooLarge,
  ProviderFailed,
  ProviderNotFound,
  ReservedLabel,
  RuntimeCloseFailed,
  RuntimeNotFound,
  RuntimePersistFailed,
  ShuttingDown,
  TurnNotFound
} from "../../domain/errors.ts"
import { DaemonRetiring } from "../../domain/retirement.ts"
import { Residency } from "../../domain/sweep.ts"
import { TurnRecord } from "../../domain/turn.ts"
import { AgentEvents } from "../../services/AgentEvents.ts"
import { type AgentActions, type AgentHosting, AgentRegistry } from "../../services/AgentRegistry.ts"
import { PromptResult } from "../../api/agents.ts"
import { promptResult } from "../../api/views.ts"
import { RuntimeCollector } from "../../services/RuntimeCollector.ts"
import { makeCheckedEndings } from "../registry/checkedClose.ts"
import { shardGroupOf } from "./shardGroups.ts"

// Create and Prompt are not persisted: the cluster would answer a repeat with a stored failure
// (a provider that was down, a store that failed) for ever. The registry answers repeats
// itself: a create by id once, a prompt once per client message id (the shared turn journal).
/** Creates the agent under the entity's id; a repeat answers with the agent already made. */
export const Create = Rpc.make("Create", {
  payload: {
    provider: Schema.String,
    cwd: Schema.String,
    labels: Schema.optional(Labels),
    parentAgentId: Schema.optional(Schema.String),
    internal: Schema.optional(Schema.Boolean)
  },
  success: AgentRecord,
  error: Schema.Union([ReservedLabel, ProviderNotFound, ProviderFailed, AgentStoreError, ShuttingDown, DaemonRetiring])
})

/**
 * Sends a prompt once per client message id; with `wait`, answers when its turn has ended.
 * `messageIds` are the delivered messages it carries (message delivery, D1).
 */
export const Prompt = Rpc.make("Prompt", {
  payload: {
    text: Schema.String,
    clientMessageId: Schema.String,
    wait: Schema.Boolean,
    messageIds: Schema.optional(Schema.Array(Schema.String))
  },
  success: PromptResult,
  error: Schema.Union([
    AgentNotFound,
    AgentNotResumable,
    ProviderNotFound,
    PromptTooLarge,
    AgentStoreError,
    ShuttingDown,
    DaemonRetiring
  ])
})

/** Interrupts the agent's running turn, if any; never resumes a released agent. */
export const Interrupt = Rpc.make("Interrupt", {
  error: Schema.Union([AgentNotFound, ProviderFailed])
})

/** Allows or denies a permission the agent's runtime asked for. */
export const RespondToPermission = Rpc.make("RespondToPermission", {
  payload: { permissionId: Schema.String, allow: Schema.Boolean },
  error: Schema.Union([AgentNotFound, PermissionNotPending, ProviderFailed])
})

/**
 * Releases the agent's live runtime now; the agent stays resumable. Refused with what it would
 * end (blockers, the provider's veto) unless `force`; answers with what it ended.
 */
export const Close = Rpc.make("Close", {
  payload: { force: Schema.Boolean },
  success: ClosedRuntime,
  error: Schema.Union([AgentNotFound, RuntimeCloseFailed, RuntimePersistFailed, RuntimeCloseRefused])
})

/** The residency of the agent's live runtime (X1): its blockers, a veto, idle since, earliest release. */
export const Explain = Rpc.make("Explain", {
  success: Residency,
  error: RuntimeNotFound
})

/**
 * Deletes the agent, its runtime, record and turns, checked on the runner that hosts it: refused
 * with what ending its runtime would end (blockers, the provider's veto) unless `force`, and
 * while one of its turns has not ended either way; answers with what it ended.
 */
export const Delete = Rpc.make("Delete", {
  payload: { force: Schema.Boolean },
  success: DeletedAgent,
  error: Schema.Union([AgentNotFound, AgentBusy, AgentStoreError, RuntimeCloseFailed, RuntimePersistFailed, AgentDeleteRefused])
})

/** The registry's `AgentView`, as it crosses between runners. */
export const AgentView = Schema.Struct({
  record: AgentRecord,
  resident: Schema.Boolean,
  pid: Schema.NullOr(Schema.Number),
  pendingPermissions: Schema.Array(Schema.String),
  providerAvailable: Schema.Boolean
})

/** The agent as the registry sees it: its record, residency, pid and pending permissions. */
export const View = Rpc.make("View", { success: AgentView, error: AgentNotFound })

/** One of the agent's turns, as recorded. */
export const Turn = Rpc.make("Turn", {
  payload: { turnId: Schema.String },
  success: TurnRecord,
  error: Schema.Union([AgentNotFound, TurnNotFound, AgentStoreError])
})

/** The agent's newest turns, newest first, at most `limit`. */
export const Turns = Rpc.make("Turns", {
  payload: { limit: Schema.Number },
  success: Schema.Array(TurnRecord),
  error: Schema.Union([AgentNotFound, AgentStoreError])
})

/**
 * Answers with the agent's first finish past `after` (a position in the shared journal's finishes,
 * `TurnJournal.lastFinish`), at once when one is already journaled; without `after`, its next
 * finish. A finish subscription's watch (D2), on the runner that runs the agent's turns.
 */
export const AwaitFinish = Rpc.make("AwaitFinish", {
  payload: { after: Schema.optional(Schema.Number) },
  success: FinishOutcome,
  error: AgentNotFound
})

/** The id of the latest event the agent's runner issued: where a reader that starts now begins (`AgentEvents.latest`). */
export const LatestEvent = Rpc.make("LatestEvent", { success: Schema.String })

/**
 * The agent's live events after `after` (an event id), as its runner publishes them, until the
 * reader goes or the entity ends here: volatile (a stream is never replayed), and interrupted at
 * once when the shard leaves or the runner stops, rather than holding the hand-off up.
 */
export const Follow = Rpc.make("Follow", {
  payload: { after: Schema.String },
  success: NumberedEvent,
  // Never from the host's own events; the port allows it (a reader on a runner).
  error: ClusterUnavailable,
  stream: true
}).annotate(ClusterSchema.InterruptOnTermination, true)

/** The entity; its shard group comes from the agent's id, so agents stay on their group's runners. */
export const AgentEntity = Entity.make("Agent", [
  Create,
  Prompt,
  Interrupt,
  RespondToPermission,
  Close,
  Explain,
  Delete,
  View,
  Turn,
  Turns,
  AwaitFinish,
  LatestEvent,
  Follow
]).annotate(ClusterSchema.ShardGroup, shardGroupOf)

/**
 * What happens to the runtime when the agent's entity ends here. While this runner still holds
 * the shard (the reaper removed an entity with no runtime, or its handlers are rebuilt after a
 * defect) nothing: the runtime is the collector's to release. When the shard has left (moved, or
 * this runner stops): nothing resumes the agent here any more, and its runtime is released, by
 * the collector when that is safe, otherwise by a forced close, logged with what it interrupts.
 */
const entityEnded = (agentId: string, stillHosted: boolean) =>
  Effect.gen(function*() {
    if (stillHosted) return
    const registry: AgentHosting = yield* AgentRegistry
    const collector = yield* RuntimeCollector
    // First: nothing resumes the agent here from now on.
    yield* registry.relinquish(agentId)
    const outcome = yield* collector.collectNow(agentId).pipe(Effect.option)
    if (outcome._tag === "Some" && outcome.value._tag === "Collected") {
      yield* Effect.logInfo("Released the runtime of an agent that left this runner").pipe(Effect.annotateLogs({ agentId }))
      return
    }
    const kept = outcome._tag === "Some" && outcome.value._tag === "Retained"
      ? outcome.value.residency.blockers.map((blocker) => blocker.kind).join(", ") || outcome.value.residency.state
      : "no runtime was resident yet"
    // In the agent's lane: a resume still under way finishes first, and is released too.
    yield* registry.release(agentId).pipe(
      Effect.tap((released) =>
        released
          ? Effect.logWarning("An agent left this runner while its runtime was busy: closed it, interrupting its work").pipe(
            Effect.annotateLogs({ agentId, kept })
          )
          : Effect.void
      ),
      Effect.catch((error) =>
        Effect.logError("Closing the runtime of an agent that left this runner failed").pipe(
          Effect.annotateLogs({ agentId, error: error.message })
        )
      )
    )
  })

/**
 * The entity's handlers on this runner, over its `AgentRegistry` and `RuntimeCollector`.
 * Handlers run concurrently: a waiting prompt never holds up an interrupt or a permission
 * answer; the registry orders what must be ordered.
 */
export const layer = AgentEntity.toLayer(
  Effect.gen(function*() {
    const registry: AgentHosting & AgentActions = yield* AgentRegistry
    const collector = yield* RuntimeCollector
    const checked = yield* makeCheckedEndings
    const events = yield* AgentEvents
    const sharding = yield* Sharding.Sharding
    const address = yield* Entity.CurrentAddress
    const agentId = address.entityId
    // The record may have changed on the runner that hosted it before.
    // A store that cannot be read now fails the handlers' own reads; the entity still starts.
    yield* registry.adopt(agentId).pipe(
      Effect.catch((error) =>
        Effect.logWarning("Reading an agent's record before hosting it failed").pipe(Effect.annotateLogs({ agentId, error: error.message }))
      )
    )
    yield* registry.residency(agentId).pipe(
      Stream.changes,
      Stream.runForEach((resident) => Entity.keepAlive(resident)),
      // Keep-alive writes to the cluster's storage, and dies when that fails: said, and the watch
      // starts over (it begins with the current residency).
      Effect.sandbox,
      Effect.tapError((cause) => Effect.logWarning("Keeping an agent's entity alive failed; retrying", cause).pipe(Effect.annotateLogs({ agentId }))),
      Effect.retry(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => entityEnded(agentId, sharding.hasShardId(address.shardId)))
    )
    return AgentEntity.of({
      Create: ({ payload }) =>
        registry.create({
          agentId,
          provider: payload.provider,
          cwd: payload.cwd,
          labels: payload.labels,
          parentAgentId: payload.parentAgentId,
          internal: payload.internal
        }),
      Prompt: ({ payload }) =>
        registry.prompt(agentId, payload.text, {
          clientMessageId: payload.clientMessageId,
          wait: payload.wait,
          ...(payload.messageIds === undefined ? {} : { messageIds: payload.messageIds })
        }).pipe(
          Effect.map(promptResult)
        ),
      Interrupt: () => registry.interrupt(agentId),
      RespondToPermission: ({ payload }) => registry.respondToPermission(agentId, payload.permissionId, payload.allow),
      Close: ({ payload }) => checked.close(agentId, payload),
      Explain: () => collector.explain(agentId),
      Delete: ({ payload }) => checked.delete(agentId, payload),
      View: () => registry.get(agentId),
      Turn: ({ payload }) => registry.turn(agentId, payload.turnId),
      Turns: ({ payload }) => registry.turns(agentId, payload.limit),
      AwaitFinish: ({ payload }) => registry.awaitFinish(agentId, { after: payload.after }),
      LatestEvent: () => events.latest,
      Follow: ({ payload }) => Stream.unwrap(events.follow(agentId, payload.after))
    })
  }),
  { concurrency: "unbounded" }
)
