/**
 * The inventory's rows: what the hub found of a home's daemon, as an operator reads it (its
 * identity, lifecycle, memory, and a note on what its state means and what can be done).
 */
import * as fs from "node:fs"
import { blockerCategories, type ManagedHome } from "../../domain/hub.ts"
import type { DaemonRow } from "../../domain/hubDaemons.ts"
import { daemonProtocolVersion, type DaemonIdentity, isVeto } from "../../domain/retirement.ts"
import type { Discovered } from "./discovery.ts"

// ---- rows --------------------------------------------------------------------------------------

const ticksPerSecond = 100

/** When a process started, from its start time in ticks since boot. */
const startedAt = (startTime: number | null): string | null => {
  if (startTime === null) return null
  try {
    const line = fs.readFileSync("/proc/stat", "utf8").split("\n").find((l) => l.startsWith("btime "))
    const boot = line === undefined ? NaN : Number(line.slice(6))
    return Number.isFinite(boot) ? new Date((boot + startTime / ticksPerSecond) * 1000).toISOString() : null
  } catch {
    return null
  }
}

const emptyRow = (home: ManagedHome) => ({
  name: home.name,
  home: home.dir,
  archived: home.archived === true,
  pid: null,
  startTime: null,
  startedAt: null,
  instanceId: null,
  protocolVersion: null,
  compatible: null,
  packageVersion: null,
  idleTimeout: null,
  phase: null,
  deadline: null,
  blockers: [],
  lastAttempt: null,
  failure: null,
  memoryBytes: null,
  canRetire: false
})

const identityFields = (identity: DaemonIdentity) => ({
  pid: identity.pid,
  startTime: identity.startTime,
  startedAt: startedAt(identity.startTime),
  instanceId: identity.instanceId,
  protocolVersion: identity.protocolVersion,
  compatible: identity.protocolVersion === daemonProtocolVersion,
  packageVersion: identity.packageVersion,
  idleTimeout: identity.idleTimeout
})

/** The row of a home whose daemon process is known: its identity and memory, the rest still to fill. */
const identifiedRow = (home: ManagedHome, identity: DaemonIdentity, memoryBytes: number | null) => ({
  ...emptyRow(home),
  ...identityFields(identity),
  memoryBytes
})

const archivedNote = (home: ManagedHome) =>
  home.archived === true ? ` Archived: new work is refused (quiesce hub unarchive ${home.name}).` : ""

/** A home's row: its daemon as discovered, or what the home is without one. */
export const rowOf = (home: ManagedHome, found: Discovered, stopped: boolean, memoryBytes: number | null): DaemonRow => {
  switch (found.state) {
    case "running": {
      const { status } = found
      const note = status.failure !== null
        ? `Its retirement failed (${status.failure.kind}); it refuses work and keeps its runtimes until an operator stops it ` +
          `(quiesce daemons stop ${home.name} --confirm ${home.name}:${status.pid}) and resumes it.`
        : status.phase === "retiring"
        ? "Deciding whether to retire: mutations wait for the outcome."
        : status.idleTimeout.millis === null
        ? "Serving; it has no idle timer, so it stays until stopped."
        : "Serving; it retires itself once idle for its timeout, and the next mutation brings it back."
      return {
        ...identifiedRow(home, found.daemon.identity, memoryBytes),
        state: "running",
        idleTimeout: status.idleTimeout,
        phase: status.phase,
        deadline: status.deadline,
        blockers: blockerCategories(status.blockers),
        vetoes: status.blockers.filter(isVeto),
        ...(status.memoryTotals === undefined ? {} : { memoryTotals: status.memoryTotals }),
        lastAttempt: status.lastAttempt,
        failure: status.failure,
        canRetire: home.archived !== true,
        note: note + archivedNote(home)
      }
    }
    case "unavailable":
      return {
        ...identifiedRow(home, found.identity, memoryBytes),
        state: "unavailable",
        note: `Alive but unavailable: ${found.reason}. Its exit is not confirmed, so nothing is started beside it; ` +
          `mutations wait for it, then resume the home.` + archivedNote(home)
      }
    case "incompatible":
      return {
        ...identifiedRow(home, found.identity, memoryBytes),
        state: "incompatible",
        note: `It speaks daemon protocol ${found.identity.protocolVersion}, this hub ${daemonProtocolVersion}: its state is ` +
          `unknown, so the hub never routes to it, retires it or stops it on its own. Stop it explicitly ` +
          `(quiesce daemons stop ${home.name} --confirm ${home.name}:${found.identity.pid}), then resume it.` + archivedNote(home)
      }
    case "absent":
      return stopped
        ? {
          ...emptyRow(home),
          state: "stopped",
          note: `Force-stopped: it starts again only on quiesce daemons resume ${home.name}.` + archivedNote(home)
        }
        : {
          ...emptyRow(home),
          state: "retired",
          note: (found.stale === null ? "" : `Its record is stale (${found.stale}) and is not acted on. `) +
            "No daemon runs: the next mutation starts one and resumes its agents; reads never do." + archivedNote(home)
        }
  }
}

/** The process a discovery found, if any. */
export const identityOf = (found: Discovered): DaemonIdentity | null =>
  found.state === "running" ? found.daemon.identity : found.state === "absent" ? null : found.identity
