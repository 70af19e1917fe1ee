/**
 * What the turn owner (`prompts.ts`) sees of the residency: a few questions about an agent, and
 * the two ways to reach its runtime (admission into a live one, or a resume). Nothing else of the
 * residency's state is in reach of the turn owner, and it writes none of it.
 */
import type { Effect } from "effect"
import type { AgentRecord } from "../../domain/agent.ts"
import type { AgentNotFound, AgentNotResumable, ProviderNotFound, ShuttingDown } from "../../domain/errors.ts"
import type { DaemonRetiring } from "../../domain/retirement.ts"
import type { ResumeError } from "../../services/AgentRegistry.ts"
import type { LiveAgent } from "./LiveAgent.ts"

/** The residency as the turn owner sees it. */
export interface ResidencyPort {
  /** The agent's durable record, while the agent is known. */
  readonly recordOf: (agentId: string) => AgentRecord | undefined
  /** The agent's live runtime here, if it has one. */
  readonly liveOf: (agentId: string) => LiveAgent | undefined
  /**
   * Why a new prompt to the agent is refused right now, read in one synchronous step: the daemon
   * is shutting down, a retirement paused admission, or the agent is unknown or being deleted.
   */
  readonly refusal: (agentId: string) => ShuttingDown | DaemonRetiring | AgentNotFound | undefined
  /** Whether the agent's provider is configured and its runtime is live or can be resumed. */
  readonly requireRunnable: (record: AgentRecord) => Effect.Effect<void, ProviderNotFound | AgentNotResumable>
  /**
   * Admission, one synchronous step: the live runtime that takes a prompt now (not being
   * released, no shutdown), its activity noted; otherwise nothing is touched. The caller marks
   * the runtime's turn slot busy in the same step.
   */
  readonly admit: (agentId: string, now: number) => LiveAgent | undefined
  /** Whether a prompt may still be handed to this runtime now: live, not being taken down, no shutdown. */
  readonly accepts: (agent: LiveAgent) => boolean
  /** This process no longer hosts the agent (a cluster moved it): nothing resumes it here. */
  readonly hostedElsewhere: (agentId: string) => boolean
  /** Waits for any release in progress, then resumes the runtime unless someone already did. */
  readonly ensureResident: (agentId: string) => Effect.Effect<void, ResumeError>
  /** After a turn's end, before anyone hears of it: its activity is noted and the events it reported applied. */
  readonly turnEnded: (agent: LiveAgent) => Effect.Effect<void>
  /** Once a turn's end is recorded and the runtime's turn slot is free: told to whoever listens for turn ends. */
  readonly turnSettled: (agent: LiveAgent) => void
}
