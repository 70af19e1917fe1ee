/**
 * The operations on one agent carried out by the runner that hosts the agent (a cluster's runner,
 * X6), through the Agent entity's client. A failure to reach that runner is `ClusterUnavailable`;
 * the operation's own errors come back as they are. (On a lone daemon they are its registry's:
 * `RegistryOperations`.)
 */
import { Effect, Layer } from "effect"
import type { Sharding } from "effect/cluster"
import { ClusterUnavailable } from "../../domain/errors.ts"
import { agentAttributes } from "../../domain/spans.ts"
import { AgentClose } from "../../services/AgentClose.ts"
import { AgentOperations } from "../../services/AgentOperations.ts"
import { randomId } from "../../platform/ids.ts"
import { AgentEntity } from "./AgentEntity.ts"
import { agentIdIn, defaultShardGroup } from "./shardGroups.ts"

/** What the cluster itself may fail with, as the one error the API knows; the call traced as `AgentEntity.<operation>`. */
export const routed = (agentId: string, operation: string) =>
<A, E, R>(
  effect: Effect.Effect<
    A,
    E | { readonly _tag: "MailboxFull" | "AlreadyProcessingMessage" | "PersistenceError" | "EntityNotAssignedToRunner" },
    R
  >
) =>
  Effect.catchTags(effect, {
    MailboxFull: () => Effect.fail(ClusterUnavailable.of(agentId, "its mailbox is full")),
    AlreadyProcessingMessage: () => Effect.fail(ClusterUnavailable.of(agentId, "it is already processing this message")),
    PersistenceError: () => Effect.fail(ClusterUnavailable.of(agentId, "the cluster's storage failed")),
    EntityNotAssignedToRunner: () => Effect.fail(ClusterUnavailable.of(agentId, "its shard is moving"))
  }).pipe(Effect.withSpan(`AgentEntity.${operation}`, { attributes: agentAttributes(agentId) }))

/**
 * Every operation sent to the runner that hosts the agent; an agent created here belongs to
 * `group` (this runner's shard group), so it stays on that group's runners.
 */
export const clusterLayer = (group: string = defaultShardGroup): Layer.Layer<AgentOperations, never, Sharding.Sharding> => Layer.effect(
  AgentOperations,
  Effect.gen(function*() {
    const clientFor = yield* AgentEntity.client
    return AgentOperations.of({
      // The id comes first: it decides which runner creates the agent.
      create: (input) =>
        Effect.gen(function*() {
          const agentId = input.agentId ?? (yield* agentIdIn(group))
          return yield* routed(agentId, "Create")(clientFor(agentId).Create({
            provider: input.provider,
            cwd: input.cwd,
            labels: input.labels,
            parentAgentId: input.parentAgentId,
            internal: input.internal
          }))
        }),
      prompt: (agentId, text, options) =>
        Effect.gen(function*() {
          // The cluster deduplicates by this id; a prompt without one gets one of its own.
          const clientMessageId = options?.clientMessageId ?? (yield* randomId("message"))
          return yield* routed(agentId, "Prompt")(clientFor(agentId).Prompt({
            text,
            clientMessageId,
            wait: options?.wait ?? false,
            ...(options?.messageIds === undefined ? {} : { messageIds: options.messageIds })
          }))
        }),
      interrupt: (agentId) => routed(agentId, "Interrupt")(clientFor(agentId).Interrupt()),
      respondToPermission: (agentId, permissionId, allow) =>
        routed(agentId, "RespondToPermission")(clientFor(agentId).RespondToPermission({ permissionId, allow })),
      get: (agentId) => routed(agentId, "View")(clientFor(agentId).View()),
      turn: (agentId, turnId) => routed(agentId, "Turn")(clientFor(agentId).Turn({ turnId })),
      turns: (agentId, limit) => routed(agentId, "Turns")(clientFor(agentId).Turns({ limit })),
      awaitFinish: (agentId, options) =>
        routed(agentId, "AwaitFinish")(clientFor(agentId).AwaitFinish(options?.after === undefined ? {} : { after: options.after }))
    })
  })
)

/** A checked close or delete sent to the runner that hosts the agent, which asks its own collector first. */
export const clusterCloseLayer: Layer.Layer<AgentClose, never, Sharding.Sharding> = Layer.effect(
  AgentClose,
  Effect.map(AgentEntity.client, (clientFor) =>
    AgentClose.of({
      close: (agentId, options) => routed(agentId, "Close")(clientFor(agentId).Close(options)),
      delete: (agentId, options) => routed(agentId, "Delete")(clientFor(agentId).Delete(options))
    }))
)
