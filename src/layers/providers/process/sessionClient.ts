import type { Effect } from "effect"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import type { ProviderFailed } from "../../../domain/errors.ts"
import type { AgentClient, AgentSession, SessionConfig } from "../../../domain/provider.ts"

/**
 * The client of a provider that starts a process for each session it opens (no warm processes):
 * a create opens a new conversation (`open` is given no handle), a resume the handle's.
 */
export const processPerSessionClient = (
  provider: string,
  open: (config: SessionConfig, resume: PersistenceHandle | null) => Effect.Effect<AgentSession, ProviderFailed>
): AgentClient => ({
  provider,
  create: (config) => open(config, null),
  resume: (handle, config) => open(config, handle)
})
