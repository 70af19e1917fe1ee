/**
 * The attributes Quiesce puts on its OpenTelemetry spans, named once so that every room writes
 * the same keys (docs/daemon.md lists them).
 */

/** The agent a span is about. */
const agentIdAttribute = "quiesce.agent.id"

/** The provider of the agent a span is about (`shell`, `claude`, …). */
const providerAttribute = "quiesce.provider"

/** The attributes of a span about one agent; the provider when it is known. */
export const agentAttributes = (agentId: string, provider?: string | undefined): Record<string, string> =>
  provider === undefined ? { [agentIdAttribute]: agentId } : { [agentIdAttribute]: agentId, [providerAttribute]: provider }

/** The span of one request to a provider's process or server, under the span of what asked for it. */
export const providerRequestSpanName = "Provider.request"

/**
 * The options of a `Provider.request` span: the peer (`codex`, `acp`, `opencode`, …), its protocol
 * (`json-lines`, `jsonrpc`, `http`) and the request's method (`session/prompt`, `POST /session`).
 */
export const providerRequestSpan = (peer: string, system: string, method: string) => ({
  kind: "client" as const,
  attributes: { "quiesce.peer": peer, "rpc.system": system, "rpc.method": method }
})
