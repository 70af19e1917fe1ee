import type { Effect } from "effect"
import type { Labels, PersistenceHandle } from "./agent.ts"
import type { ProviderFailed, RuntimeProbeFailed } from "./errors.ts"

/**
 * A provider's answer to whether its runtime may stop now (C6). Only `canStop: true` permits; a
 * veto says why in words an operator can act on ("background task bash-3 `sleep 600`").
 * `workUnknown` marks a veto that names no work, only that the provider cannot rule work out
 * (an OMP before 18.3 never can): a stop then ends nothing anyone saw, and is reported so.
 */
export type StopAnswer =
  | { readonly canStop: true }
  | { readonly canStop: false; readonly reason: string; readonly workUnknown?: true | undefined }

/** The answer that permits the release: the runtime owns no work a stop would lose. */
export const stopPermitted: StopAnswer = { canStop: true }

/** The longest reason kept: a reason is shown in one line of a table, a log and an API row. */
export const maxReasonLength = 300

/**
 * A veto's reason as an operator reads it: its first line, without control characters, at most
 * `maxReasonLength` characters ("…" when cut); "no reason given" when empty.
 */
const shownReason = (reason: string): string => {
  const line = (reason.split(/\r?\n/).find((part) => part.trim() !== "") ?? "").replace(/[\u0000-\u001f\u007f]/g, " ").trim()
  const shown = line.length > maxReasonLength ? `${line.slice(0, maxReasonLength - 1)}…` : line
  return shown === "" ? "no reason given" : shown
}

/** A veto and why (the reason shown as {@link shownReason} says). */
export const stopVetoed = (reason: string): StopAnswer => ({ canStop: false, reason: shownReason(reason) })

/** A veto that names no work: the provider cannot tell whether its runtime owns any, so it keeps it. */
export const stopWorkUnknown = (reason: string): StopAnswer => ({ canStop: false, reason: shownReason(reason), workUnknown: true })

/** Something a provider runtime reports about itself while it lives. */
export type SessionEvent =
  | { readonly _tag: "PermissionRequested"; readonly id: string }
  | { readonly _tag: "PermissionResolved"; readonly id: string }
  | { readonly _tag: "SubagentStarted"; readonly id: string }
  | { readonly _tag: "SubagentFinished"; readonly id: string }
  /** Output or progress: counts as activity. */
  | { readonly _tag: "Activity" }
  /** Output of the running turn as it comes (the live event stream shows it): counts as activity. */
  | { readonly _tag: "Output"; readonly text: string }
  /** The agent's reply text so far in this turn; the last one is kept for finish notifications. */
  | { readonly _tag: "Reply"; readonly text: string }

/** What a provider is given to start or resume one agent's session. */
export interface SessionConfig {
  readonly agentId: string
  readonly cwd: string
  readonly labels: Labels
  /**
   * This runtime's marker: a provider that starts processes puts it in their environment as
   * `QUIESCE_RUNTIME` (see `runtimeEnv`), so everything the runtime starts can be found again — by
   * its veto while the runtime lives, and by the next daemon after a crash.
   */
  readonly runtimeMarker: string
  /**
   * Where the session reports events. Called synchronously by the provider; the registry queues
   * them and counts them as undrained until processed (C4).
   */
  readonly onEvent: (event: SessionEvent) => void
}

/**
 * One live provider runtime (P1). Every provider implements this one contract; optional parts
 * are capabilities a provider may lack.
 */
export interface AgentSession {
  /** The runtime's process id, also its process group id, when the provider runs a process. */
  readonly pid?: number | undefined
  /** Completes if the runtime ends on its own (a crash, an OOM kill); the registry then treats it as released. */
  readonly exited?: Effect.Effect<void> | undefined
  /** The handle to resume this conversation from, once the provider has a session. */
  readonly persistence: Effect.Effect<PersistenceHandle | null>
  /**
   * Starts one foreground turn for the prompt; `turnId` is the daemon's id for it. Succeeds once
   * the provider has accepted the prompt, with an effect that waits for the turn to end: it
   * succeeds with the turn's end and fails when the turn failed (with the provider's error text).
   * A start that fails says `refused` when the provider certainly did not take the prompt (a
   * repeat may then run it); without it the prompt may have run, and is never run again.
   * The registry starts at most one turn at a time per session.
   */
  readonly startTurn: (prompt: string, turnId: string) => Effect.Effect<Effect.Effect<TurnEnd, ProviderFailed>, ProviderFailed>
  /**
   * Adds the prompt to the running turn `turnId`. True only when the provider will act on it;
   * false when it cannot take it now. Absent when the provider cannot steer at all. Either way the
   * registry then queues the prompt for the next turn.
   */
  readonly steer?: ((prompt: string, turnId: string) => Effect.Effect<boolean, ProviderFailed>) | undefined
  /** An effect that handles the prompt as an out-of-band command (e.g. a slash command), if it is one. */
  readonly outOfBand: (prompt: string) => Effect.Effect<void, ProviderFailed> | undefined
  readonly respondToPermission: (permissionId: string, allow: boolean) => Effect.Effect<void, ProviderFailed>
  readonly interrupt: Effect.Effect<void, ProviderFailed>
  /** Releases the live runtime without archiving or deleting the provider's saved session. */
  readonly close: Effect.Effect<void, ProviderFailed>
  /** The provider's optional veto on releasing the runtime (C6). */
  readonly canStopRuntime?: Effect.Effect<StopAnswer, RuntimeProbeFailed> | undefined
}

/** How a turn ended, as the provider reports it. */
export interface TurnEnd {
  /** The turn's reply; null when it gave none. */
  readonly reply: string | null
  /** The provider reports the turn was cut short (cancelled, aborted) rather than finished. */
  readonly interrupted?: boolean | undefined
}

/**
 * A provider process started before any agent needs it (H4): handshaken, holding no session, in
 * a neutral working directory. Binding a session (`create` or `resume`, with a config whose
 * `runtimeMarker` is the one the process was started with) hands the process to that session for
 * the rest of its life; a process is bound at most once. A bind that fails ends the process.
 */
export interface WarmProcess {
  /** Its process id, also its process group id. */
  readonly pid: number
  /** Completes when the process has exited, bound or not. */
  readonly exited: Effect.Effect<void>
  /** True until the process has exited: whether a bind that failed may be tried on a new process. */
  readonly running: () => boolean
  readonly create: (config: SessionConfig) => Effect.Effect<AgentSession, ProviderFailed>
  readonly resume: (handle: PersistenceHandle, config: SessionConfig) => Effect.Effect<AgentSession, ProviderFailed>
  /** Ends the process, which holds no session. */
  readonly close: Effect.Effect<void>
}

/** Starts and resumes sessions of one provider. */
export interface AgentClient {
  readonly provider: string
  readonly create: (config: SessionConfig) => Effect.Effect<AgentSession, ProviderFailed>
  readonly resume: (handle: PersistenceHandle, config: SessionConfig) => Effect.Effect<AgentSession, ProviderFailed>
  /**
   * Starts a process that takes its session later, marked with `runtimeMarker` (see
   * `SessionConfig.runtimeMarker`). Present only for providers whose process can bind a session
   * after it started; a warm reserve keeps such processes ready.
   */
  readonly startWarm?: ((runtimeMarker: string) => Effect.Effect<WarmProcess, ProviderFailed>) | undefined
}
