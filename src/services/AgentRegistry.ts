import { Context, type Effect, type Stream } from "effect"
import type { AgentRecord, NewAgentLabels } from "../domain/agent.ts"
import type { Blocker } from "../domain/blocker.ts"
import type { FinishOutcome } from "../domain/finish.ts"
import type { DaemonRetiring, RetirementBlocker } from "../domain/retirement.ts"
import type { Disposition, TurnError, TurnRecord, TurnState } from "../domain/turn.ts"
import type {
  AgentBusy,
  AgentNotFound,
  PermissionNotPending,
  AgentNotResumable,
  AgentStoreError,
  ProviderFailed,
  PromptTooLarge,
  ProviderNotFound,
  ReservedLabel,
  RuntimeCloseFailed,
  RuntimePersistFailed,
  ShuttingDown,
  TurnNotFound
} from "../domain/errors.ts"
import type { RuntimeCandidates } from "./RuntimeCandidates.ts"

/**
 * What a new agent needs: its provider, its working directory and its labels. A `quiesce.*` label
 * is set only through its field (`parentAgentId`, `internal`); in `labels` it is refused.
 */
export interface CreateAgent extends NewAgentLabels {
  /**
   * The new agent's id, when the caller picks it (a cluster routes by id before the agent
   * exists). A create naming an id that is already an agent answers with that agent.
   */
  readonly agentId?: string | undefined
  readonly provider: string
  readonly cwd: string
}

/**
 * The answer to an accepted prompt: its turn, as far as it got. A failed or interrupted turn is a
 * receipt too (`state`, `error`), never a success with an older reply.
 */
export interface PromptReceipt {
  readonly agentId: string
  /** This prompt's turn (its journal record); the same for every repeat of its client message id. */
  readonly turnId: string
  readonly sessionId: string | null
  readonly state: TurnState
  /** How it reached the provider; null while it has not (or never did). */
  readonly disposition: Disposition | null
  /** For a prompt steered into a running turn: that turn, whose outcome this one shares. */
  readonly joinedTurnId: string | null
  /** True when this prompt found the runtime released and waited for it to be resumed. */
  readonly resumed: boolean
  /** Once the turn is final: its reply (null if it gave none). */
  readonly output?: string | null | undefined
  /** Why it failed or was interrupted. */
  readonly error: TurnError | null
}

/** How a prompt is sent: its client id for exactly-once delivery, and whether to wait for the turn's end. */
export interface PromptOptions {
  /**
   * The client's id for this prompt: a second prompt with the same id for the same agent gets the
   * first one's turn, never a new one — in this process, after a restart and after a crash.
   */
  readonly clientMessageId?: string | undefined
  /** Wait for the turn to end and return its outcome; otherwise answer once it reached the provider. */
  readonly wait?: boolean | undefined
  /** Delivered messages this prompt carries (message delivery), recorded with its turn. */
  readonly messageIds?: ReadonlyArray<string> | undefined
}

/** An agent as the registry sees it now: its durable record and the state of its live runtime. */
export interface AgentView {
  readonly record: AgentRecord
  /** Whether a live runtime holds the agent now. */
  readonly resident: boolean
  /** The runtime's process (and process group) id, when the provider runs one and it is resident. */
  readonly pid: number | null
  /** The permissions the runtime asked for and nobody has answered yet. */
  readonly pendingPermissions: ReadonlyArray<string>
  /** False when no provider of the agent's id is configured: it can be read and deleted, not prompted. */
  readonly providerAvailable: boolean
}

/** Everything that can stop a prompt from being accepted (or a caller from hearing its outcome). */
export type PromptError =
  | AgentNotFound
  | AgentNotResumable
  | ProviderNotFound
  | PromptTooLarge
  | AgentStoreError
  | ShuttingDown
  | DaemonRetiring

/** Everything that can stop a released agent's runtime from being brought back. */
export type ResumeError =
  | AgentNotFound
  | AgentNotResumable
  | ProviderNotFound
  | ProviderFailed
  | AgentStoreError
  | ShuttingDown
  | DaemonRetiring

/**
 * The operations on one agent that `AgentOperations` carries (the HTTP API, message delivery,
 * finish subscriptions, a cluster's entity): create it, prompt it, read its turns, interrupt it,
 * answer its permission, watch for its finish.
 */
export interface AgentActions {
  readonly create: (
    input: CreateAgent
  ) => Effect.Effect<AgentRecord, ReservedLabel | ProviderNotFound | ProviderFailed | AgentStoreError | ShuttingDown | DaemonRetiring>
  /**
   * Accepts a prompt durably (its turn is in the journal before anything else happens), then
   * delivers it exactly once: handled out of band by the adapter, steered into the running turn
   * when the provider will act on it, or as the next turn. A released agent is resumed first,
   * however many prompts race. The caller's interruption never touches the turn.
   */
  readonly prompt: (agentId: string, text: string, options?: PromptOptions) => Effect.Effect<PromptReceipt, PromptError>
  /** A turn as recorded: in flight here, or from the journal. */
  readonly turn: (agentId: string, turnId: string) => Effect.Effect<TurnRecord, AgentNotFound | TurnNotFound | AgentStoreError>
  /** The agent's newest turns, newest accepted first, at most `limit`; in-flight ones as `turn` reports them. */
  readonly turns: (agentId: string, limit: number) => Effect.Effect<ReadonlyArray<TurnRecord>, AgentNotFound | AgentStoreError>
  /** Interrupts the running turn, if any. Never resumes a released agent. */
  readonly interrupt: (agentId: string) => Effect.Effect<void, AgentNotFound | ProviderFailed>
  /** Answers a permission the runtime asked for; a released agent has none pending. */
  readonly respondToPermission: (
    agentId: string,
    permissionId: string,
    allow: boolean
  ) => Effect.Effect<void, AgentNotFound | PermissionNotPending | ProviderFailed>
  /** The agent as the registry sees it now. */
  readonly get: (agentId: string) => Effect.Effect<AgentView, AgentNotFound>
  /**
   * Waits for the agent's next finish: its turn ends (finished or errored), it asks for a
   * permission, or it is closed explicitly. A release is not a finish.
   *
   * With `after` (a position from `TurnJournal.lastFinish`, 0 before the agent's first finish):
   * answers with the first finish journaled past it, at once when one already is, so a finish
   * between reading the position and this call is not missed. Without: the next finish.
   */
  readonly awaitFinish: (
    agentId: string,
    options?: { readonly after?: number | undefined }
  ) => Effect.Effect<FinishOutcome, AgentNotFound>
}

/** Ending an agent's runtime or the agent itself, in its lane (the checked close and delete, `AgentClose`). */
export interface AgentEndings {
  /**
   * Releases the live runtime now; the agent stays resumable. The runtime's baseline blockers are
   * read in its lane, right before the close, and answered (empty when no runtime was live): with
   * `unlessBlocked` any of them keeps the runtime open; without, they are the work the close ended.
   */
  readonly close: (
    agentId: string,
    options?: { readonly unlessBlocked?: boolean | undefined }
  ) => Effect.Effect<ReadonlyArray<Blocker>, AgentNotFound | RuntimeCloseFailed | RuntimePersistFailed>
  /**
   * Deletes the agent: ends its runtime, forgets its record and its turns. Refused while one of
   * its turns has not ended (`AgentBusy`), forced or not: nothing accepted is lost. The runtime's
   * baseline blockers are read in its lane, as `close` reads them, and answered: with
   * `unlessBlocked` any of them keeps the agent; without, they are the work the delete ended.
   */
  readonly delete: (
    agentId: string,
    options?: { readonly unlessBlocked?: boolean | undefined }
  ) => Effect.Effect<ReadonlyArray<Blocker>, AgentNotFound | AgentBusy | AgentStoreError | RuntimeCloseFailed | RuntimePersistFailed>
  /** Closes the runtime and resumes the same session with fresh configuration. */
  readonly reload: (agentId: string) => Effect.Effect<void, ResumeError | RuntimeCloseFailed | RuntimePersistFailed>
}

/** The agents as readers see them (the HTTP API's listings and runtime rows). */
export interface AgentDirectory {
  /** The agent as the registry sees it now. */
  readonly get: (agentId: string) => Effect.Effect<AgentView, AgentNotFound>
  readonly list: Effect.Effect<ReadonlyArray<AgentView>>
  /** The agents whose runtime is live here, from memory (never a store read). */
  readonly residents: Effect.Effect<ReadonlyArray<AgentView>>
}

/** What new work the registry admits, and what of its own keeps the daemon from retiring (the retirement, the HTTP server's shutdown). */
export interface RegistryAdmission {
  /**
   * Begins a shutdown: nothing new is admitted, and every caller still waiting on a turn is
   * answered `ShuttingDown` naming it (the turn stays in the journal). Idempotent.
   */
  readonly stopAdmission: Effect.Effect<void>
  /**
   * While a retirement is attempted: new prompts and agents are refused with `refusal` (repeats
   * of recorded client ids are still answered). `resumeAdmission` lifts it.
   */
  readonly pauseAdmission: (refusal: DaemonRetiring) => Effect.Effect<void>
  readonly resumeAdmission: Effect.Effect<void>
  /** Writes again every record the store refused; what is still refused stays a blocker. */
  readonly retryWrites: Effect.Effect<void>
  /**
   * What of the registry's own work keeps the daemon from retiring: turns it is carrying
   * (accepted, waiting for a runtime, or running), prompts and agents past admission and not yet
   * recorded, lifecycle operations under way on agents without a live runtime, and records the
   * store refused (turns or agents) and that are not yet written. The live runtimes' own
   * baselines are the collector's to read.
   */
  readonly retirementBlockers: Effect.Effect<ReadonlyArray<RetirementBlocker>>
}

/** Which agents this daemon hosts (a cluster's runner moves them between runners). */
export interface AgentHosting {
  /**
   * Reads the agent's record from the store again unless its runtime is live here (another
   * daemon on the same store may have hosted it since); an agent the store no longer has is
   * forgotten.
   */
  readonly adopt: (agentId: string) => Effect.Effect<void, AgentStoreError>
  /**
   * This daemon stops hosting the agent (a cluster moved it elsewhere): from now on nothing
   * resumes it here, and its prompts that have not reached the provider are left `accepted` for
   * its new host. The live runtime, if any, is the caller's to release. `adopt` undoes it.
   */
  readonly relinquish: (agentId: string) => Effect.Effect<void>
  /**
   * Releases the live runtime now, after whatever holds the agent's lane (a resume) is done,
   * whatever the runtime is doing (a running turn ends interrupted), and keeps the agent
   * resumable; true when there was one. Unlike `close`, it announces no finish: the agent was
   * moved, not closed.
   */
  readonly release: (agentId: string) => Effect.Effect<boolean, RuntimeCloseFailed | RuntimePersistFailed>
  /** Whether a live runtime holds the agent: now, then each time that changes. */
  readonly residency: (agentId: string) => Stream.Stream<boolean>
}

/** The live runtimes: the collector's candidates, and the lanes and idleness a caller may wait on. */
export interface RegistryRuntimes {
  /** The live runtimes as collection candidates. */
  readonly candidates: RuntimeCandidates["Service"]
  /** Waits until the agent has no foreground turn and the events of its last turn are processed. */
  readonly awaitIdle: (agentId: string) => Effect.Effect<void>
  /** Lifecycle lanes held now: one per agent with an operation running or waiting, none for the rest. */
  readonly laneCount: Effect.Effect<number>
}

/**
 * The owner of live agent runtimes. Every lifecycle mutation of one agent (create, close,
 * release, resume, reload) runs in that agent's lane, one at a time; prompts never wait on the
 * lane unless the runtime is released or being released.
 *
 * A client takes the role it uses (`AgentActions`, `AgentEndings`, `AgentDirectory`,
 * `RegistryAdmission`, `AgentHosting`, `RegistryRuntimes`): `const hosting: AgentHosting = yield* AgentRegistry`.
 */
export class AgentRegistry extends Context.Service<
  AgentRegistry,
  AgentActions & AgentEndings & AgentDirectory & RegistryAdmission & AgentHosting & RegistryRuntimes
>()("quiesce/registry/AgentRegistry") {}
