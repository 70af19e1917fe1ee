import { Context, type Effect } from "effect"
import type { AgentRecord, Labels } from "../domain/agent.ts"
import type { FinishOutcome } from "../domain/finish.ts"
import type {
  AgentNotFound,
  PermissionNotPending,
  AgentNotResumable,
  AgentStoreError,
  ProviderFailed,
  ProviderNotFound,
  RuntimeCloseFailed,
  RuntimePersistFailed,
  ShuttingDown
} from "../domain/errors.ts"
import type { RuntimeCandidates } from "./RuntimeCandidates.ts"

export interface CreateAgent {
  readonly provider: string
  readonly cwd: string
  readonly labels?: Labels | undefined
}

/** How a prompt reached the provider. */
export interface PromptReceipt {
  readonly agentId: string
  readonly sessionId: string | null
  readonly disposition: "turn" | "steer" | "out-of-band"
  /** True when this prompt found the runtime released and waited for it to be resumed. */
  readonly resumed: boolean
  /** The turn the prompt started or was steered into; null for an out-of-band command. */
  readonly turnId: string | null
  /** With `wait`: the turn's reply once it ended (null if it gave none). */
  readonly output?: string | null | undefined
}

export interface PromptOptions {
  /** A second prompt with the same id for the same agent gets the first one's receipt, not a new turn. */
  readonly clientMessageId?: string | undefined
  /** Wait for the turn to end and return its reply. */
  readonly wait?: boolean | undefined
}

export interface AgentView {
  readonly record: AgentRecord
  /** Whether a live runtime holds the agent now. */
  readonly resident: boolean
  /** The runtime's process (and process group) id, when the provider runs one and it is resident. */
  readonly pid: number | null
  /** The permissions the runtime asked for and nobody has answered yet. */
  readonly pendingPermissions: ReadonlyArray<string>
}

/** Everything that can stop a prompt from reaching the provider. */
export type PromptError =
  | AgentNotFound
  | AgentNotResumable
  | ProviderNotFound
  | ProviderFailed
  | AgentStoreError
  | ShuttingDown

/**
 * The owner of live agent runtimes. Every lifecycle mutation of one agent (create, close,
 * release, resume, reload) runs in that agent's lane, one at a time; prompts never wait on the
 * lane unless the runtime is released or being released.
 */
export class AgentRegistry extends Context.Service<AgentRegistry, {
  readonly create: (
    input: CreateAgent
  ) => Effect.Effect<AgentRecord, ProviderNotFound | ProviderFailed | AgentStoreError | ShuttingDown>
  /**
   * Delivers a prompt exactly once: steered into a running turn, handled out of band by the
   * adapter, or as a new turn. A released agent is resumed first, however many prompts race.
   */
  readonly prompt: (agentId: string, text: string, options?: PromptOptions) => Effect.Effect<PromptReceipt, PromptError>
  /** Interrupts the running turn, if any. Never resumes a released agent. */
  readonly interrupt: (agentId: string) => Effect.Effect<void, AgentNotFound | ProviderFailed>
  /** Answers a permission the runtime asked for; a released agent has none pending. */
  readonly respondToPermission: (
    agentId: string,
    permissionId: string,
    allow: boolean
  ) => Effect.Effect<void, AgentNotFound | PermissionNotPending | ProviderFailed>
  /** Releases the live runtime now; the agent stays resumable. */
  readonly close: (agentId: string) => Effect.Effect<void, AgentNotFound | RuntimeCloseFailed | RuntimePersistFailed>
  /** Closes the runtime and resumes the same session with fresh configuration. */
  readonly reload: (agentId: string) => Effect.Effect<void, PromptError | RuntimeCloseFailed | RuntimePersistFailed>
  /**
   * Waits for the agent's next finish: its turn ends (finished or errored), it asks for a
   * permission, or it is closed explicitly. A release is not a finish.
   */
  readonly awaitFinish: (agentId: string) => Effect.Effect<FinishOutcome, AgentNotFound>
  /** Waits until the agent has no foreground turn and the events of its last turn are processed. */
  readonly awaitIdle: (agentId: string) => Effect.Effect<void>
  readonly get: (agentId: string) => Effect.Effect<AgentView, AgentNotFound>
  readonly list: Effect.Effect<ReadonlyArray<AgentView>>
  /** The live runtimes as collection candidates. */
  readonly candidates: RuntimeCandidates["Service"]
}>()("quiesce/registry/AgentRegistry") {}
