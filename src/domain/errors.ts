import { Schema } from "effect"

/** A provider's `canStopRuntime` probe failed; the runtime is retained. */
export class RuntimeProbeFailed extends Schema.TaggedError<RuntimeProbeFailed>()("RuntimeProbeFailed", {
  agentId: Schema.String,
  message: Schema.String
}) {}

/** A provider's `canStopRuntime` probe gave no answer in time; the runtime is retained. */
export class RuntimeProbeTimedOut extends Schema.TaggedError<RuntimeProbeTimedOut>()("RuntimeProbeTimedOut", {
  agentId: Schema.String,
  timeoutMillis: Schema.Number,
  message: Schema.String
}) {
  static readonly of = (agentId: string, timeoutMillis: number) =>
    new RuntimeProbeTimedOut({
      agentId,
      timeoutMillis,
      message: `Runtime safety probe timed out for ${agentId} after ${timeoutMillis} ms`
    })
}

/** Closing a runtime failed; its owner keeps it registered and resident (C10). */
export class RuntimeCloseFailed extends Schema.TaggedError<RuntimeCloseFailed>()("RuntimeCloseFailed", {
  agentId: Schema.String,
  message: Schema.String
}) {}

/** The runtime was closed but its closed, resumable record could not be persisted (C10). */
export class RuntimePersistFailed extends Schema.TaggedError<RuntimePersistFailed>()("RuntimePersistFailed", {
  agentId: Schema.String,
  message: Schema.String
}) {}

/** No live runtime is registered for the agent. */
export class RuntimeNotFound extends Schema.TaggedError<RuntimeNotFound>()("RuntimeNotFound", {
  agentId: Schema.String,
  message: Schema.String
}) {
  static readonly of = (agentId: string) =>
    new RuntimeNotFound({ agentId, message: `No live runtime for agent ${agentId}` })
}

/** What a candidate's owner may fail with while closing it. */
export type RuntimeReleaseError = RuntimeCloseFailed | RuntimePersistFailed

/** Every failure a sweep can report for one runtime. */
export const CollectionError = Schema.Union([
  RuntimeProbeFailed,
  RuntimeProbeTimedOut,
  RuntimeCloseFailed,
  RuntimePersistFailed
])
export type CollectionError = typeof CollectionError.Type

/** The agent store could not read or write a record. */
export class AgentStoreError extends Schema.TaggedError<AgentStoreError>()("AgentStoreError", {
  operation: Schema.String,
  agentId: Schema.optionalKey(Schema.String),
  message: Schema.String
}) {}

/** A provider operation failed. */
export class ProviderFailed extends Schema.TaggedError<ProviderFailed>()("ProviderFailed", {
  provider: Schema.String,
  operation: Schema.String,
  message: Schema.String
}) {}

/** No provider with this id is registered. */
export class ProviderNotFound extends Schema.TaggedError<ProviderNotFound>()("ProviderNotFound", {
  provider: Schema.String,
  message: Schema.String
}) {
  static readonly of = (provider: string, registered: ReadonlyArray<string> = []) =>
    new ProviderNotFound({
      provider,
      message: `No provider named "${provider}" is registered${
        registered.length === 0 ? "" : ` (the configured providers are ${registered.map((id) => `"${id}"`).join(", ")})`
      }`
    })
}

/** No agent with this id exists. */
export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()("AgentNotFound", {
  agentId: Schema.String,
  message: Schema.String
}) {
  static readonly of = (agentId: string) => new AgentNotFound({ agentId, message: `No agent with id ${agentId}` })
}

/** A permission answer for an agent with no live runtime: nothing is waiting for it. */
export class PermissionNotPending extends Schema.TaggedError<PermissionNotPending>()("PermissionNotPending", {
  agentId: Schema.String,
  permissionId: Schema.String,
  message: Schema.String
}) {
  static readonly of = (agentId: string, permissionId: string) =>
    new PermissionNotPending({
      agentId,
      permissionId,
      message: `Agent ${agentId} has no live runtime, so permission ${permissionId} is not pending`
    })
}

/** The agent has no live runtime and no persistence handle to resume from. */
export class AgentNotResumable extends Schema.TaggedError<AgentNotResumable>()("AgentNotResumable", {
  agentId: Schema.String,
  message: Schema.String
}) {
  static readonly of = (agentId: string) =>
    new AgentNotResumable({ agentId, message: `Agent ${agentId} has no saved session to resume` })
}

/** Message delivery is closed (shutting down); the message was not admitted. */
export class DeliveryClosed extends Schema.TaggedError<DeliveryClosed>()("DeliveryClosed", {
  recipientId: Schema.String,
  message: Schema.String
}) {
  static readonly of = (recipientId: string) =>
    new DeliveryClosed({ recipientId, message: `Message delivery is closed; message to ${recipientId} not admitted` })
}

/** A message could not be dispatched to its recipient and will not be retried. */
export class DeliveryFailed extends Schema.TaggedError<DeliveryFailed>()("DeliveryFailed", {
  recipientId: Schema.String,
  message: Schema.String
}) {}

/** The finish subscription store could not read or write. */
export class FinishStoreError extends Schema.TaggedError<FinishStoreError>()("FinishStoreError", {
  operation: Schema.String,
  message: Schema.String
}) {}

/** Finish subscriptions are closed (shutting down); the registration was not admitted. */
export class FinishSubscriptionsClosed extends Schema.TaggedError<FinishSubscriptionsClosed>()(
  "FinishSubscriptionsClosed",
  { message: Schema.String }
) {}

/** Watching a target for its finish failed (for example the remote server is unreachable). */
export class FinishWatchFailed extends Schema.TaggedError<FinishWatchFailed>()("FinishWatchFailed", {
  targetAgentId: Schema.String,
  serverId: Schema.NullOr(Schema.String),
  message: Schema.String
}) {}

/** The host is shutting down and admits no new work (H3). */
export class ShuttingDown extends Schema.TaggedError<ShuttingDown>()("ShuttingDown", {
  message: Schema.String
}) {
  static readonly of = (what: string) => new ShuttingDown({ message: `Shutting down: ${what} not admitted` })
}

/** A plugin sent something the protocol does not allow (malformed, oversized, unknown). Logged, never fatal. */
export class PluginProtocolError extends Schema.TaggedError<PluginProtocolError>()("PluginProtocolError", {
  provider: Schema.String,
  message: Schema.String
}) {}
