/**
 * The OMP adapter (P5) against the real pinned `omp --mode rpc` 18.2.3 on Bun, driven by the fake
 * model on loopback (test/agents/support/ompCli.ts). Real processes run, so time is real and every
 * wait polls with a bound; each test proves that no process group it started is left.
 *
 * OMP 18.2's `get_state` has neither `isSettled` nor `hasPendingAsyncWork` (they come with 18.3), so
 * under P5 its probe never permits: the runtime stays resident, and the veto says why. What 18.2
 * does show of an async bash job is `agent_end.isTerminal: false` while the job's result is still
 * to be delivered; the adapter vetoes on that too. Release here is the explicit close, after which
 * the next prompt resumes the same session.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { groupAlive } from "../../src/platform/processGroups.ts"
import { missingSettlement } from "../../src/layers/providers/pi/safety.ts"
import { type LogEntry, recordingLogs } from "../support/logs.ts"
import { ompCli } from "./support/ompCli.ts"
import { bounded, eventually, gatedJob, type RealAgent, withRealCli } from "./support/realAgent.ts"

/** Asks the collector to release the runtime now; returns the outcome and the veto reasons logged. */
const collectWithReasons = (agent: RealAgent, agentId: string) =>
  Effect.gen(function*() {
    const logs: Array<LogEntry> = []
    const outcome = yield* recordingLogs(logs)(agent.collector.collectNow(agentId))
    const reasons = logs.flatMap((entry) => {
      const reason = entry.annotations["reason"]
      return entry.annotations["provider"] === "omp" && typeof reason === "string" ? [reason] : []
    })
    return { outcome, reasons }
  })

/** The provider's own probe of the agent's live runtime, as the collector would call it. */
const probe = (agent: RealAgent, agentId: string) =>
  Effect.gen(function*() {
    const family = yield* agent.registry.candidates.captureFamily(agentId)
    const check = family.find((candidate) => candidate.agentId === agentId)?.canStopRuntime
    if (check === undefined) return assert.fail("the omp runtime offers a safety probe")
    return yield* check
  })

const continuation = "the last run ended non-terminal: a continuation is scheduled"

describe("omp --mode rpc 18.2.3 (real CLI)", () => {
  it.live("the probe vetoes, saying why: no settlement fields, and an async job's pending result; an explicit release resumes", (ctx) =>
    withRealCli(ompCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const created = yield* agent.create
        const first = yield* agent.promptAndFinish(created.agentId, "hello")
        assert.strictEqual(first.outcome.kind, "finished")
        const sessionId = (yield* agent.registry.get(created.agentId)).record.persistence?.sessionId
        assert.isString(sessionId, "omp reported a saved session")
        yield* bounded(agent.registry.awaitIdle(created.agentId), "the turn's end")

        // Idle, but 18.2 cannot say whether async work is pending.
        const idle = yield* collectWithReasons(agent, created.agentId)
        assert.strictEqual(idle.outcome._tag, "Retained")
        if (idle.outcome._tag === "Retained") assert.strictEqual(idle.outcome.residency.veto?.outcome, "vetoed")
        assert.deepStrictEqual(idle.reasons, [missingSettlement])
        assert.deepStrictEqual(yield* probe(agent, created.agentId), { canStop: false, reason: missingSettlement, workUnknown: true }, "the answer says why")

        // An async bash job: the turn ends at once, OMP keeps the job's result to deliver.
        const job = gatedJob(agent.home)
        const started = yield* agent.promptAndFinish(created.agentId, ompCli.startJob(job.command))
        assert.strictEqual(started.outcome.kind, "finished", "the foreground turn ends while the job runs")
        yield* bounded(agent.registry.awaitIdle(created.agentId), "the turn's end")
        const withJob = yield* collectWithReasons(agent, created.agentId)
        assert.strictEqual(withJob.outcome._tag, "Retained")
        assert.deepStrictEqual(withJob.reasons, [continuation])
        assert.deepStrictEqual(yield* probe(agent, created.agentId), { canStop: false, reason: continuation }, "the answer says why")
        assert.isTrue((yield* agent.registry.get(created.agentId)).resident)

        // The job ends; OMP delivers its result in a run of its own, ending terminal.
        const requestsBefore = model.requests.length
        yield* job.end
        yield* eventually(
          collectWithReasons(agent, created.agentId).pipe(
            Effect.map(({ outcome, reasons }) =>
              outcome._tag === "Retained" && reasons.length === 1 && reasons[0] === missingSettlement
            )
          ),
          "the delivered result leaves only the missing settlement fields",
          { tries: 60, every: "500 millis" }
        )
        assert.isAbove(model.requests.length, requestsBefore, "OMP ran a follow-up with the job's result")

        // Released explicitly, the runtime's group ends and the next prompt resumes the session.
        const runtimePid = (yield* agent.registry.get(created.agentId)).pid
        yield* agent.registry.close(created.agentId)
        assert.isFalse((yield* agent.registry.get(created.agentId)).resident)
        assert.isNotNull(runtimePid)
        yield* eventually(Effect.sync(() => !groupAlive(runtimePid!)), "the released runtime's process group is gone")
        const resumed = yield* agent.promptAndFinish(created.agentId, "again")
        assert.isTrue(resumed.receipt.resumed, "the prompt resumed the released agent")
        assert.strictEqual(resumed.receipt.sessionId, sessionId, "the same session")
        assert.strictEqual(resumed.outcome.kind, "finished")
        assert.deepStrictEqual(model.unrouted, [])
      })), 180_000)
})
