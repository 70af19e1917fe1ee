import { Effect, Layer, PubSub, Stream } from "effect"
import type { ReleaseReason } from "../domain/agent.ts"
import { blocker, type Blocker, noBlockers } from "../domain/blocker.ts"
import type { RuntimeCandidate } from "../domain/candidate.ts"
import type { StopAnswer } from "../domain/provider.ts"
import type { RuntimeCloseFailed, RuntimeProbeFailed } from "../domain/errors.ts"
import { CallerProtection } from "../services/CallerProtection.ts"
import { RuntimeCandidates } from "../services/RuntimeCandidates.ts"
import { indexFamilies } from "../layers/collector/FamilyIndex.ts"

/** An in-memory runtime whose state a test sets directly. */
export class FakeRuntime {
  readonly identity = {}
  busy = false
  closed = false
  resumable = true
  activity = 0
  parentAgentId: string | undefined = undefined
  probe: Effect.Effect<StopAnswer, RuntimeProbeFailed> | undefined = undefined
  /** When set, the next close fails with it and the runtime stays resident. */
  closeFailure: RuntimeCloseFailed | undefined = undefined
  /** Runs inside the close, after revalidation succeeded and before the runtime is marked closed. */
  closing: Effect.Effect<void> = Effect.void
  probeCalls = 0
  /** The RSS the runtime reports as its own `residentBytes`; undefined: unmeasured. */
  rss: number | undefined = undefined
  /** When set, the runtime names this process for a `ProcessInspection` to sample. */
  process: { readonly pid: number; readonly startTime?: number } | undefined = undefined
  /** How many times the collector asked to close this runtime. */
  closeRequests = 0
  /** Why the collector asked, each time. */
  readonly closeReasons: Array<ReleaseReason> = []

  readonly agentId: string
  readonly provider: string

  constructor(agentId: string, provider = "test") {
    this.agentId = agentId
    this.provider = provider
  }

  readonly blockers: Effect.Effect<ReadonlyArray<Blocker>> = Effect.sync(() =>
    this.closed
      ? [blocker("lifecycle-not-idle", "closed")]
      : this.busy
      ? [blocker("foreground-turn")]
      : noBlockers
  )

  capture(): RuntimeCandidate {
    const probe = this.probe
    return {
      identity: this.identity,
      agentId: this.agentId,
      parentAgentId: this.parentAgentId,
      provider: this.provider,
      sessionId: this.resumable ? `session-${this.agentId}` : null,
      lastActivityAt: this.activity,
      blockers: this.blockers,
      residentBytes: Effect.sync(() => this.rss),
      process: this.process,
      canStopRuntime: probe === undefined
        ? undefined
        : Effect.suspend(() => {
          this.probeCalls++
          return probe
        }),
      closeIfEligible: (revalidate, reason) => {
        const runtime = this
        return Effect.gen(function*() {
          runtime.closeRequests++
          runtime.closeReasons.push(reason)
          if (runtime.closeFailure !== undefined) return yield* runtime.closeFailure
          if (!(yield* revalidate)) return false
          // Like a real owner: once the close begins it is never interrupted.
          yield* Effect.uninterruptible(Effect.andThen(runtime.closing, Effect.sync(() => (runtime.closed = true))))
          return true
        })
      }
    }
  }
}

/** A registry of fake runtimes offered as `RuntimeCandidates`; closed ones drop out. */
export class FakeRuntimes {
  readonly all: Array<FakeRuntime> = []

  add(agentId: string, setup: Partial<Pick<FakeRuntime, "parentAgentId" | "resumable" | "busy" | "activity" | "rss" | "process">> = {}) {
    const runtime = Object.assign(new FakeRuntime(agentId), setup)
    this.all.push(runtime)
    return runtime
  }

  private readonly ends = Effect.runSync(PubSub.unbounded<string>())

  /** The runtime's turn ended: the collector hears of it through \`turnEnds\`. */
  endTurn(agentId: string) {
    PubSub.publishUnsafe(this.ends, agentId)
  }

  snapshot(): ReadonlyArray<RuntimeCandidate> {
    return this.all.filter((runtime) => !runtime.closed).map((runtime) => runtime.capture())
  }

  readonly service = RuntimeCandidates.of({
    capture: Effect.sync(() => this.snapshot()),
    captureFamily: (agentId) =>
      Effect.sync(() => {
        const snapshot = this.snapshot()
        const position = snapshot.findIndex((candidate) => candidate.agentId === agentId)
        if (position === -1) return []
        return indexFamilies(snapshot).members(position).map((member) => snapshot[member]!)
      }),
    turnEnds: Effect.map(PubSub.subscribe(this.ends), Stream.fromSubscription)
  })

  readonly layer = Layer.succeed(RuntimeCandidates, this.service)
}

/** Caller protection a test switches per agent. */
export class FakeCallerProtection {
  readonly protectedAgents = new Set<string>()

  protect(agentId: string, on = true) {
    if (on) this.protectedAgents.add(agentId)
    else this.protectedAgents.delete(agentId)
  }

  readonly service = CallerProtection.of({
    isProtected: (agentId) => Effect.sync(() => this.protectedAgents.has(agentId))
  })

  readonly layer = Layer.succeed(CallerProtection, this.service)
}
