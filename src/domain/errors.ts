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
  message: Schema.String,
  /**
   * The provider certainly did not act on the request: it was never sent (the process had
   * exited), or the provider answered that it would not. Absent when that is unknown (a timeout,
   * a process that died before answering): such a request may have been acted on.
   */
  refused: Schema.optionalKey(Schema.Boolean)
}) {}

/** Whether a failure says for certain that the provider did not act on the request. */
export const isRefusal = (error: unknown): boolean =>
  error instanceof ProviderFailed && error.refused === true

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

/**
 * A create set a `quiesce.*` label directly. Those labels are the daemon's own: each is set only
 * from a field of its own (the parent from `parentAgentId`), which is checked.
 */
export class ReservedLabel extends Schema.TaggedError<ReservedLabel>()("ReservedLabel", {
  label: Schema.String,
  message: Schema.String
}) {
  static readonly of = (label: string) =>
    new ReservedLabel({
      label,
      message: `The label "${label}" is reserved: the "quiesce." prefix belongs to the daemon${
        label === "quiesce.parentAgentId" ? "; name the parent with parentAgentId (--parent)" : ""
      }`
    })
}

/** A permission answer nothing is waiting for: the runtime is gone, or never asked for it. */
export class PermissionNotPending extends Schema.TaggedError<PermissionNotPending>()("PermissionNotPending", {
  agentId: Schema.String,
  permissionId: Schema.String,
  message: Schema.String
}) {
  static readonly of = (agentId: string, permissionId: string, resident = false) =>
    new PermissionNotPending({
      agentId,
      permissionId,
      message: resident
        ? `Agent ${agentId} has no pending permission ${permissionId}`
        : `Agent ${agentId} has no live runtime, so permission ${permissionId} is not pending`
    })
}

/** The agent has a turn that has not ended: deleting it now would lose that turn. */
export class AgentBusy extends Schema.TaggedError<AgentBusy>()("AgentBusy", {
  agentId: Schema.String,
  /** The turn that has not ended; null for a prompt still being accepted. */
  turnId: Schema.NullOr(Schema.String),
  message: Schema.String
}) {
  static readonly of = (agentId: string, turnId: string, state: string) =>
    new AgentBusy({
      agentId,
      turnId,
      message: `Agent ${agentId} has turn ${turnId} ${state}: interrupt it, or wait for it to end, before deleting the agent`
    })

  static readonly accepting = (agentId: string) =>
    new AgentBusy({ agentId, turnId: null, message: `A prompt to agent ${agentId} is being accepted: its turn must end before the agent is deleted` })
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

/**
 * The host is shutting down and admits no new work (H3). `turnId` names a prompt that was accepted
 * before the shutdown: it stays in the journal, and a repeat of its client message id after the
 * restart returns that turn.
 */
export class ShuttingDown extends Schema.TaggedError<ShuttingDown>()("ShuttingDown", {
  message: Schema.String,
  turnId: Schema.optionalKey(Schema.String)
}) {
  static readonly of = (what: string) => new ShuttingDown({ message: `Shutting down: ${what} not admitted` })
  /** For a caller still waiting on an accepted turn when the shutdown began. */
  static readonly waiting = (turnId: string) =>
    new ShuttingDown({
      message:
        `Shutting down while turn ${turnId} was in progress; it stays recorded: repeat the prompt with the same clientMessageId to get its outcome`,
      turnId
    })
}

/** A provider registered after the registry was sealed (the host had opened), or under an id already taken. */
export class ProviderRegistrationRefused extends Schema.TaggedError<ProviderRegistrationRefused>()("ProviderRegistrationRefused", {
  provider: Schema.String,
  message: Schema.String
}) {}

/** The daemon is listening but has not finished opening (H1): nothing is admitted before it is ready. */
export class StillOpening extends Schema.TaggedError<StillOpening>()("StillOpening", {
  message: Schema.String
}) {
  static readonly of = (what: string) => new StillOpening({ message: `Still opening: ${what} not admitted yet; try again in a moment` })
}

/** A prompt's text is larger than the daemon accepts (it could not reach the provider whole). */
export class PromptTooLarge extends Schema.TaggedError<PromptTooLarge>()("PromptTooLarge", {
  agentId: Schema.String,
  bytes: Schema.Number,
  limitBytes: Schema.Number,
  message: Schema.String
}) {
  static readonly of = (agentId: string, bytes: number, limitBytes: number) =>
    new PromptTooLarge({
      agentId,
      bytes,
      limitBytes,
      message: `The prompt is ${bytes} bytes JSON-encoded; at most ${limitBytes} are accepted`
    })
}

/** No turn with this id is recorded for the agent (never accepted, or past the journal's retention). */
export class TurnNotFound extends Schema.TaggedError<TurnNotFound>()("TurnNotFound", {
  agentId: Schema.String,
  turnId: Schema.String,
  message: Schema.String
}) {
  static readonly of = (agentId: string, turnId: string) =>
    new TurnNotFound({ agentId, turnId, message: `Agent ${agentId} has no turn ${turnId}` })
}

/** A plugin sent something the protocol does not allow (malformed, oversized, unknown). Logged, never fatal. */
export class PluginProtocolError extends Schema.TaggedError<PluginProtocolError>()("PluginProtocolError", {
  provider: Schema.String,
  message: Schema.String
}) {}

/** An agent's working directory is not an existing directory. */
export class WorkingDirectoryNotFound extends Schema.TaggedError<WorkingDirectoryNotFound>()("WorkingDirectoryNotFound", {
  cwd: Schema.String,
  message: Schema.String
}) {
  static readonly of = (cwd: string, why: string) =>
    new WorkingDirectoryNotFound({ cwd, message: `The working directory ${cwd} ${why}` })
}

/** A warm reserve was asked of a provider that cannot keep one (H4): its process takes its session at start. */
export class WarmReserveUnsupported extends Schema.TaggedError<WarmReserveUnsupported>()("WarmReserveUnsupported", {
  provider: Schema.String,
  message: Schema.String
}) {
  static readonly of = (provider: string) =>
    new WarmReserveUnsupported({
      provider,
      message: `Provider "${provider}" cannot keep a warm reserve: its process takes its session when it starts`
    })
}

/** A warm reserve's target that is not a whole number from 0 to the limit. */
export class InvalidWarmReserveSize extends Schema.TaggedError<InvalidWarmReserveSize>()("InvalidWarmReserveSize", {
  provider: Schema.String,
  message: Schema.String
}) {}

/**
 * A cluster's runner could not hand a request to the runner that hosts the agent (X6): the
 * cluster's storage failed, the agent's mailbox is full, or its shard is moving. Nothing was
 * done; a prompt repeated with the same client message id is still one turn.
 */
export class ClusterUnavailable extends Schema.TaggedError<ClusterUnavailable>()("ClusterUnavailable", {
  agentId: Schema.String,
  message: Schema.String
}) {
  static readonly of = (agentId: string, reason: string) =>
    new ClusterUnavailable({ agentId, message: `The cluster could not reach agent ${agentId}'s runner: ${reason}; try again` })
}

/** A cluster's runner could not start its side of the cluster (its port, or the shared database). */
export class ClusterJoinFailed extends Schema.TaggedError<ClusterJoinFailed>()("ClusterJoinFailed", {
  message: Schema.String
}) {}
