/**
 * The registry's side of crash cleanup: every live runtime that runs a process is in the
 * `RuntimeLedger` (its group leader, that process's start time, its marker) from the moment it
 * is registered until it is gone. A registry that starts on a ledger that still has entries
 * knows its predecessor died without closing them, and ends what they left before anything is
 * admitted.
 */
import { Clock, Effect } from "effect"
import { describeEnded, describeSkipped, endLeftovers } from "../host/leftoverRuntimes.ts"
import { readStat } from "../host/ProcessInspectionProcfs.ts"
import type { RuntimeLedger } from "../../services/RuntimeLedger.ts"
import type { LiveAgent } from "./LiveAgent.ts"

export const makeRuntimeRecords = (ledger: RuntimeLedger["Service"]) => {
  const logFailure = (what: string, agentId: string) => (error: { readonly message: string }) =>
    Effect.logWarning(what).pipe(Effect.annotateLogs({ agentId, error: error.message }))

  /** Records a runtime that runs a process: its pid and the start time that tells it from a reused pid. */
  const record = (agent: LiveAgent): Effect.Effect<void> =>
    Effect.gen(function*() {
      const pid = agent.session.pid
      if (pid === undefined) return
      const startTime = readStat(pid)?.startTime
      // Already gone: nothing of it to end later.
      if (startTime === undefined) return
      yield* ledger.record({ agentId: agent.agentId, pid, startTime, marker: agent.marker, recordedAt: yield* Clock.currentTimeMillis })
    }).pipe(Effect.catch(logFailure("Recording a runtime's process group failed; a crash would leave it running", agent.agentId)))

  /** Forgets a runtime that is gone (closed, or ended on its own). */
  const forget = (agent: LiveAgent): Effect.Effect<void> => {
    const pid = agent.session.pid
    return pid === undefined
      ? Effect.void
      : ledger.remove(agent.agentId, pid).pipe(Effect.catch(logFailure("Forgetting a closed runtime failed", agent.agentId)))
  }

  /**
   * Ends what the runtimes of a previous daemon left (verified by start time or marker, never a
   * reused pid), logs each process ended or left alone, and clears their entries.
   */
  const endPrevious = Effect.gen(function*() {
    const entries = yield* ledger.list
    if (entries.length === 0) return
    const report = yield* endLeftovers(entries)
    let ended = 0
    for (const { ended: processes, entry, skipped } of report.entries) {
      for (const process of processes) {
        ended++
        yield* Effect.logWarning(describeEnded(entry.agentId, process))
      }
      for (const left of skipped) yield* Effect.logInfo(describeSkipped(entry.agentId, left))
      yield* ledger.remove(entry.agentId, entry.pid)
    }
    yield* Effect.logInfo("Ended what the previous daemon's runtimes left").pipe(
      Effect.annotateLogs({ runtimes: entries.length, processes: ended })
    )
  }).pipe(Effect.catch((error) =>
    Effect.logWarning("Ending what the previous daemon's runtimes left failed").pipe(
      Effect.annotateLogs({ error: error.message })
    )
  ))

  return { record, forget, endPrevious }
}
