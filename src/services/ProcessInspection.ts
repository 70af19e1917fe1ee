import { Context, type Effect, type Option } from "effect"

/** One sample of a runtime's process tree. */
export interface ProcessSample {
  readonly pid: number
  /** The process's start time in clock ticks since boot (procfs stat field 22): with the pid, its identity. */
  readonly startTime: number
  /** Resident memory of the process and all its descendants, in bytes. */
  readonly rssBytes: number
  /** How many processes the tree holds. */
  readonly processes: number
}

/**
 * Process identity and memory of runtimes (H5), pid-reuse safe: a sample names the start time,
 * and a caller that knows the start time it expects never gets a different process's figures.
 * Unknown liveness is never guessed: a process that cannot be read is `None`.
 */
export class ProcessInspection extends Context.Service<ProcessInspection, {
  /** The process and its descendants, or `None` when it is gone or is not the process expected. */
  readonly sample: (pid: number, expectedStartTime?: number) => Effect.Effect<Option.Option<ProcessSample>>
  /** Many at once, with bounded concurrency and a deadline; a pid not sampled in time is `None`. */
  readonly sampleAll: (
    pids: ReadonlyArray<number>
  ) => Effect.Effect<ReadonlyMap<number, Option.Option<ProcessSample>>>
}>()("quiesce/host/ProcessInspection") {}
