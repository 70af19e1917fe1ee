// A host that is not the Quiesce daemon. It runs child processes of its own ("runtimes"), offers
// them to the collector as RuntimeCandidates, says which callers are still owed something
// (CallerProtection), and sweeps, explains and collects under its own Effect runtime.
import { Clock, Console, Deferred, Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import {
  CallerProtection,
  type RuntimeCandidate,
  RuntimeCandidates,
  RuntimeCollector,
  RuntimeCollectorLive,
  stopPermitted,
  stopVetoed
} from "quiesce"

interface Runtime {
  readonly agentId: string
  readonly pid: number
  readonly exited: Deferred.Deferred<void>
  readonly lastActivityAt: number
  /** Work the runtime still does in the background, which its provider would report. */
  readonly backgroundWork: string | undefined
  running: boolean
}

const hour = 60 * 60 * 1000

// Each runtime is a `sleep` in a process group of its own. Releasing it ends the group and waits
// for the exit; the host's scope ends whatever is still running when the program ends.
const startRuntime = (agentId: string, lastActivityAt: number, backgroundWork?: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const exited = yield* Deferred.make<void>()
      const child = spawn("sleep", ["600"], { detached: true, stdio: "ignore" })
      child.once("exit", () => Deferred.doneUnsafe(exited, Effect.void))
      if (child.pid === undefined) return yield* Effect.die(new Error(`cannot start ${agentId}`))
      const runtime: Runtime = { agentId, pid: child.pid, exited, lastActivityAt, backgroundWork, running: true }
      return runtime
    }),
    (runtime) => stopRuntime(runtime)
  )

const stopRuntime = (runtime: Runtime) =>
  Effect.suspend(() => {
    if (!runtime.running) return Effect.void
    runtime.running = false
    process.kill(-runtime.pid, "SIGTERM")
    return Deferred.await(runtime.exited)
  })

const candidateOf = (runtime: Runtime): RuntimeCandidate => ({
  identity: runtime,
  agentId: runtime.agentId,
  parentAgentId: undefined,
  provider: "sleep",
  sessionId: `session-of-${runtime.agentId}`,
  lastActivityAt: runtime.lastActivityAt,
  blockers: Effect.succeed([]),
  canStopRuntime: Effect.succeed(runtime.backgroundWork === undefined ? stopPermitted : stopVetoed(runtime.backgroundWork)),
  // The collector decides; the owner closes, and only if the collector's check still holds.
  closeIfEligible: (revalidate) =>
    Effect.gen(function*() {
      if (!runtime.running || !(yield* revalidate)) return false
      yield* stopRuntime(runtime)
      return true
    })
})

const program = Effect.gen(function*() {
  const now = yield* Clock.currentTimeMillis
  const runtimes = [
    yield* startRuntime("idle", now - 2 * hour),
    yield* startRuntime("busy", now - 2 * hour, "a background shell is still running"),
    yield* startRuntime("awaited", now - 2 * hour),
    yield* startRuntime("recent", now)
  ]
  yield* Console.log(JSON.stringify({ step: "started", pids: runtimes.map((runtime) => runtime.pid) }))

  const candidates = Layer.succeed(RuntimeCandidates, RuntimeCandidates.of({
    capture: Effect.sync(() => runtimes.filter((runtime) => runtime.running).map(candidateOf)),
    captureFamily: (agentId) =>
      Effect.sync(() => runtimes.filter((runtime) => runtime.running && runtime.agentId === agentId).map(candidateOf))
  }))
  // A caller waits for "awaited" to finish: it stays resident until the caller is answered.
  const protection = Layer.succeed(CallerProtection, CallerProtection.of({
    isProtected: (agentId) => Effect.succeed(agentId === "awaited")
  }))
  const collector = RuntimeCollectorLive.layer({ idlePeriod: "1 hour", tickInterval: "1 minute" }).pipe(
    Layer.provide(Layer.merge(candidates, protection))
  )

  yield* Effect.gen(function*() {
    const collector = yield* RuntimeCollector
    const report = yield* collector.sweep
    yield* Console.log(JSON.stringify({ step: "sweep", collected: report.collected.map((runtime) => runtime.agentId) }))
    for (const agentId of ["busy", "awaited", "recent"]) {
      const residency = yield* collector.explain(agentId)
      yield* Console.log(JSON.stringify({
        step: "explain",
        agentId,
        state: residency.state,
        blockers: residency.blockers.map((blocker) => blocker.kind),
        veto: residency.veto?.message ?? null
      }))
    }
    // Collecting now skips the idle period and keeps every other check.
    const recent = yield* collector.collectNow("recent")
    const busy = yield* collector.collectNow("busy")
    yield* Console.log(JSON.stringify({ step: "collectNow", recent: recent._tag, busy: busy._tag }))
  }).pipe(Effect.provide(collector))

  yield* Console.log(JSON.stringify({
    step: "resident",
    agents: runtimes.filter((runtime) => runtime.running).map((runtime) => runtime.agentId)
  }))
})

Effect.runPromise(Effect.scoped(program)).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
