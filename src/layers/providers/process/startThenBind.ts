import { Effect } from "effect"
import { tmpdir } from "node:os"
import type { PersistenceHandle } from "../../../domain/agent.ts"
import type { ProviderFailed } from "../../../domain/errors.ts"
import type { AgentClient, AgentSession, SessionConfig, WarmProcess } from "../../../domain/provider.ts"

/** A provider process, started and handshaken, that can take one session. */
export interface StartedProcess {
  readonly pid: number
  /** Completes when the process has exited. */
  readonly exited: Effect.Effect<void>
  /** True until the process has exited. */
  readonly running: () => boolean
  /** Opens its one session: a new one without a handle, else that one; a process that cannot is ended. */
  readonly bind: (config: SessionConfig, handle: PersistenceHandle | null) => Effect.Effect<AgentSession, ProviderFailed>
  /** Ends the process (and what it started). */
  readonly end: Effect.Effect<void>
}

/**
 * The client of a provider whose process takes its session after it started (H4): a create or a
 * resume starts one in the session's cwd and binds it, and `startWarm` starts one in `warmCwd`
 * (default the OS temp folder) to bind later.
 */
export const startThenBindClient = (
  provider: string,
  start: (runtimeMarker: string, cwd: string) => Effect.Effect<StartedProcess, ProviderFailed>,
  warmCwd: string = tmpdir()
): AgentClient => {
  const open = (config: SessionConfig, handle: PersistenceHandle | null) =>
    // Between the start and the bind nothing interrupts: a started process is bound, or ended.
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(restore(start(config.runtimeMarker, config.cwd)), (started) =>
        restore(started.bind(config, handle)).pipe(Effect.onInterrupt(() => started.end)))
    )
  return {
    provider,
    create: (config) => open(config, null),
    resume: (handle, config) => open(config, handle),
    startWarm: (runtimeMarker) =>
      Effect.map(start(runtimeMarker, warmCwd), (started): WarmProcess => ({
        pid: started.pid,
        exited: started.exited,
        running: started.running,
        create: (config) => started.bind(config, null),
        resume: (handle, config) => started.bind(config, handle),
        close: started.end
      }))
  }
}
