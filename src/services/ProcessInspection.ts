import { Context, type Effect, type Option } from "effect"

/** One sample of a runtime's process tree. */
export interface ProcessSample {
  readonly pid: number
  /** The process's start time in clock ticks since boot (procfs stat field 22): with the pid, its identity. */
  readonly startTime: number
  /** Resident memory of the measured processes of the tree (the root and its descendants), in bytes. */
  readonly rssBytes: number
  /** How many processes `rssBytes` sums: the root and every descendant read in time. */
  readonly measuredProcesses: number
  /** Descendants found but not measured (gone, or their pid reused, between the listing and the read). */
  readonly unmeasuredProcesses: number
}

/**
 * Process identity and memory of runtimes (H5), pid-reuse safe: a sample names the start time,
 * and a caller that knows the start time it expects never gets a different process's figures.
 * Unknown liveness is never guessed: a process that cannot be read is `None`, and so is one not
 * read in time or not admitted (the layer bounds how many reads run at once and how long a query
 * may take). `None` means unmeasured, not gone; no caller may conclude that a process exited from it.
 */
export class ProcessInspection extends Context.Service<ProcessInspection, {
  /** The process and its descendants, or `None` when unmeasured (gone, not the process expected, or not read in time). */
  readonly sample: (pid: number, expectedStartTime?: number) => Effect.Effect<Option.Option<ProcessSample>>
  /** Many at once, within one deadline; a pid not sampled in time is `None`. */
  readonly sampleAll: (
    pids: ReadonlyArray<number>
  ) => Effect.Effect<ReadonlyMap<number, Option.Option<ProcessSample>>>
}>()("quiesce/host/ProcessInspection") {}
