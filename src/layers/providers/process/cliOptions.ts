import type { Duration } from "effect"

/**
 * The options every adapter that runs an agent CLI takes, as the daemon config's provider entries
 * give them. Each adapter adds its own and documents its defaults.
 */
export interface CliProviderOptions {
  /** The provider id agents name. */
  readonly provider?: string | undefined
  /** The executable: a path, or a name looked up on PATH. */
  readonly command?: string | undefined
  /** The whole argument list, replacing the adapter's default (which selects the protocol mode). */
  readonly args?: ReadonlyArray<string> | undefined
  /** Merged over the daemon's environment for the runtime's processes. */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** How long one request to the runtime may wait for its answer. Default 30 s. */
  readonly requestTimeout?: Duration.Input | undefined
  /** How long a closing runtime gets after SIGTERM before its process groups are SIGKILLed. Default 2 s. */
  readonly closeGrace?: Duration.Input | undefined
  /**
   * Where a warm process (started before its session, for a warm reserve) runs until bound: the
   * session then names its own working directory. Default the OS temp folder.
   */
  readonly warmCwd?: string | undefined
  /** Told the pid (which is also the process group id) of every process group the runtime starts. */
  readonly onSpawn?: ((pid: number) => void) | undefined
}
