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
 * - **Hand-off.** When the entity ends for another reason (its shard moves to another runner, or
 *   this runner shuts down), the runtime is released resumably: through the collector when that
 *   is safe, and otherwise by a forced close that interrupts the running turn, logged with what
 *   kept it (see docs/cluster.md). The next message resumes the saved session on the new owner.
 * - **Exactly once.** `Create` and `Prompt` are persisted; a prompt's primary key is its client
 *   message id, so the cluster answers a repeat with the stored reply (or joins the running
 *   request), and the registry's turn journal, shared by every runner, gives one turn per id even
 *   when a runner dies mid-handler and the message runs again elsewhere.
 */
import { Effect, Schema, Stream } from "effect"
import { ClusterSchema, Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { AgentRecord, Labels } from "../../domain/agent.ts"
import {
  AgentNotFound,
  AgentNotResumable,
  AgentStoreError,
  PermissionNotPending,
  PromptTooLarge,
  ProviderFailed,
  ProviderNotFound,
  RuntimeCloseFailed,
  RuntimeNotFound,
  RuntimePersistFailed,
  ShuttingDown
} from "../../domain/errors.ts"
import { DaemonRetiring } from "../../domain/retirement.ts"
import { Residency } from "../../domain/sweep.ts"
import { Disposition, TurnError, TurnState } from "../../domain/turn.ts"
import { AgentRegistry, type PromptReceipt as PromptReceiptType } from "../../services/AgentRegistry.ts"
import { RuntimeCollector } from "../../services/RuntimeCollector.ts"

/** The registry's `PromptReceipt`, as it crosses between runners. */
export const PromptReceipt = Schema.Struct({
  agentId: Schema.String,
  turnId: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  state: TurnState,
  disposition: Schema.NullOr(Disposition),
  joinedTurnId: Schema.NullOr(Schema.String),
  resumed: Schema.Boolean,
  output: Schema.optional(Schema.NullOr(Schema.String)),
  error: Schema.NullOr(TurnError)
})

// The schema carries every receipt the registry gives.
const receiptFits = (receipt: PromptReceiptType): typeof PromptReceipt.Type => receipt

export const Create = Rpc.make("Create", {
  payload: { provider: Schema.String, cwd: Schema.String, labels: Schema.optional(Labels) },
  success: AgentRecord,
  error: Schema.Union([ProviderNotFound, ProviderFailed, AgentStoreError, ShuttingDown, DaemonRetiring]),
  // One create per agent: a retried create is answered with the first one's agent.
  primaryKey: () => "create"
}).annotate(ClusterSchema.Persisted, true)

export const Prompt = Rpc.make("Prompt", {
  payload: { text: Schema.String, clientMessageId: Schema.String, wait: Schema.Boolean },
  success: PromptReceipt,
  error: Schema.Union([
    AgentNotFound,
    AgentNotResumable,
    ProviderNotFound,
    PromptTooLarge,
    AgentStoreError,
    ShuttingDown,
    DaemonRetiring
  ]),
  primaryKey: (payload) => payload.clientMessageId
}).annotate(ClusterSchema.Persisted, true)

export const Interrupt = Rpc.make("Interrupt", {
  error: Schema.Union([AgentNotFound, ProviderFailed])
})

export const RespondToPermission = Rpc.make("RespondToPermission", {
  payload: { permissionId: Schema.String, allow: Schema.Boolean },
  error: Schema.Union([AgentNotFound, PermissionNotPending, ProviderFailed])
})

export const Close = Rpc.make("Close", {
  error: Schema.Union([AgentNotFound, RuntimeCloseFailed, RuntimePersistFailed])
})

export const Explain = Rpc.make("Explain", {
  success: Residency,
  error: RuntimeNotFound
})

export const AgentEntity = Entity.make("Agent", [Create, Prompt, Interrupt, RespondToPermission, Close, Explain])

/**
 * Releases the runtime of an agent whose entity ends here: the collector's release when it is
 * safe, otherwise a forced close, logged with what it interrupts.
 */
const handOff = (agentId: string) =>
  Effect.gen(function*() {
    const registry = yield* AgentRegistry
    const collector = yield* RuntimeCollector
    if (!(yield* registry.get(agentId).pipe(Effect.map((view) => view.resident), Effect.orElseSucceed(() => false)))) return
    const outcome = yield* collector.collectNow(agentId).pipe(Effect.option)
    if (outcome._tag === "Some" && outcome.value._tag === "Collected") {
      yield* Effect.logInfo("Released the runtime of an agent that left this runner").pipe(Effect.annotateLogs({ agentId }))
      return
    }
    const kept = outcome._tag === "Some" && outcome.value._tag === "Retained"
      ? outcome.value.residency.blockers.map((blocker) => blocker.kind).join(", ") || outcome.value.residency.state
      : "the release failed"
    yield* registry.close(agentId).pipe(
      Effect.tap(() =>
        Effect.logWarning("An agent left this runner while its runtime was busy: closed it, interrupting its work").pipe(
          Effect.annotateLogs({ agentId, kept })
        )
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
    const registry = yield* AgentRegistry
    const collector = yield* RuntimeCollector
    const agentId = (yield* Entity.CurrentAddress).entityId
    // The record may have changed on the runner that hosted it before.
    yield* registry.adopt(agentId).pipe(Effect.orDie)
    yield* registry.residency(agentId).pipe(
      Stream.changes,
      Stream.runForEach((resident) => Entity.keepAlive(resident)),
      Effect.forkScoped
    )
    yield* Effect.addFinalizer(() => handOff(agentId))
    return AgentEntity.of({
      Create: ({ payload }) =>
        registry.create({ agentId, provider: payload.provider, cwd: payload.cwd, labels: payload.labels }),
      Prompt: ({ payload }) =>
        registry.prompt(agentId, payload.text, { clientMessageId: payload.clientMessageId, wait: payload.wait }).pipe(
          Effect.map(receiptFits)
        ),
      Interrupt: () => registry.interrupt(agentId),
      RespondToPermission: ({ payload }) => registry.respondToPermission(agentId, payload.permissionId, payload.allow),
      Close: () => registry.close(agentId),
      Explain: () => collector.explain(agentId)
    })
  }),
  { concurrency: "unbounded" }
)
