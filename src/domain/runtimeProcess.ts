import { Schema } from "effect"

/**
 * One live runtime's process group, as the `RuntimeLedger` records it while the runtime runs, so
 * that a daemon starting after a crash of its predecessor can end what that daemon left.
 */
export const RuntimeProcess = Schema.Struct({
  agentId: Schema.String,
  /** The runtime's process group leader: its pid is the group id (pid == pgid). */
  pid: Schema.Int.check(Schema.isGreaterThan(0)),
  /** Field 22 of `/proc/<pid>/stat` when recorded (clock ticks since boot): with the pid, its identity. */
  startTime: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  /** The runtime's `QUIESCE_RUNTIME` value, inherited by every process it starts. */
  marker: Schema.String.check(Schema.isNonEmpty()),
  /** When it was recorded, epoch ms. */
  recordedAt: Schema.Number
})
export type RuntimeProcess = typeof RuntimeProcess.Type

/** Why a process left by a dead daemon was judged to be one of its runtimes'. */
export const LeftoverReason = Schema.Literals([
  "group leader verified by start time",
  "group member carrying the marker",
  "escaped process carrying the marker"
])
export type LeftoverReason = typeof LeftoverReason.Type

/** A leftover process that was signalled. */
export const EndedProcess = Schema.Struct({
  pid: Schema.Int,
  pgid: Schema.Int,
  /** Its command line, arguments joined by spaces (empty when it could not be read). */
  command: Schema.String,
  reason: LeftoverReason,
  /** The last signal it was sent: SIGKILL when it outlived the grace period after SIGTERM. */
  signal: Schema.Literals(["SIGTERM", "SIGKILL"]),
  /** False when it still ran once the bounded wait after SIGKILL ran out. */
  exited: Schema.Boolean
})
export type EndedProcess = typeof EndedProcess.Type

/** A pid named by a ledger entry (or found for it) that was not signalled, and why. */
export const SkippedProcess = Schema.Struct({
  pid: Schema.Int,
  reason: Schema.String
})
export type SkippedProcess = typeof SkippedProcess.Type

/** What ending the leftovers of one ledger entry did. */
export const LeftoverEntryReport = Schema.Struct({
  entry: RuntimeProcess,
  ended: Schema.Array(EndedProcess),
  skipped: Schema.Array(SkippedProcess)
})
export type LeftoverEntryReport = typeof LeftoverEntryReport.Type

/** What ending the leftovers of a dead daemon did, one report per ledger entry, in the entries' order. */
export const LeftoverReport = Schema.Struct({
  entries: Schema.Array(LeftoverEntryReport)
})
export type LeftoverReport = typeof LeftoverReport.Type
