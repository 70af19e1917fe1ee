/**
 * The registry's side of crash cleanup: every live runtime that runs a process is in the
 * `RuntimeLedger` (its group leader, that process's start time, its marker) from the moment it
 * is registered until it is gone. A registry that starts on a ledger that still has entries
 * knows its predecessor died without closing them, and ends what they left before anything is
 * admitted.
 */
import { Clock, Effect } from "effect"
import { describeEnded, describeSkipped, endLeftovers } from "../host/leftoverRuntimes.ts"
import { readStat } from "../../platform/procfs.ts"
import type { RuntimeLedger } from "../../services/RuntimeLedger.ts"
import type { LiveAgent } from "./LiveAgent.ts"

const logFailure = (what: string, agentId: string) => (error: { readonly message: string }) =>
  Effect.logWarning(what).pipe(Effect.annotateLogs({ agentId, error: error.message }))

/**
 * Records a process group under `agentId` (an agent's, or a warm reserve's): its leader's pid and
 * the start time that tells it from a reused pid. A failure is logged (a crash would leave it
 * running); true once it is recorded.
 */
export const recordProcess = (
  ledger: RuntimeLedger["Service"],
  entry: { readonly agentId: string; readonly pid: number; readonly marker: string }
): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const startTime = readStat(entry.pid)?.startTime
    // Already gone: nothing of it to end later.
    if (startTime === undefined) return false
    yield* ledger.record({ ...entry, startTime, recordedAt: yield* Clock.currentTimeMillis })
    return true
  }).pipe(
    Effect.catch((error) =>
      Effect.as(logFailure("Recording a runtime's process group failed; a crash would leave it running", entry.agentId)(error), false)
    )
  )

/** Removes the entry of `agentId` and `pid`; a failure is logged. */
export const forgetProcess = (ledger: RuntimeLedger["Service"], agentId: string, pid: number): Effect.Effect<void> =>
  ledger.remove(agentId, pid).pipe(Effect.catch(logFailure("Forgetting a closed runtime failed", agentId)))

export const makeRuntimeRecords = (ledger: RuntimeLedger["Service"]) => {
  /** Records a runtime that runs a process; true once it is recorded. */
  const record = (agent: LiveAgent): Effect.Effect<boolean> => {
    const pid = agent.session.pid
    return pid === undefined ? Effect.succeed(false) : recordProcess(ledger, { agentId: agent.agentId, pid, marker: agent.marker })
  }

  /** Forgets a runtime that is gone (closed, or ended on its own). */
  const forget = (agent: LiveAgent): Effect.Effect<void> => {
    const pid = agent.session.pid
    return pid === undefined ? Effect.void : forgetProcess(ledger, agent.agentId, pid)
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
