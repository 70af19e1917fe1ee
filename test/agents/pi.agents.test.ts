/**
 * The Pi adapter (P5) against the real pinned `pi --mode rpc`, driven by the fake model on loopback
 * (test/agents/support/piCli.ts). Real processes run, so time is real and every wait polls with a
 * bound; each test proves that no process group it started is left.
 *
 * Pi reports streaming, compaction and pending messages; it has no background jobs of its own, and
 * a job a command leaves behind with `&` is invisible to it. Pi's own veto is shown while a turn
 * streams with a steer pending. Pi runs each bash command detached, in a process group of its own:
 * closing the agent mid-command ends that group too (the second test); a job backgrounded with `&`
 * is reparented to init at once, and is found by the runtime's environment marker: it vetoes the
 * release until it ends (last).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { agentCliBinary } from "../../scripts/agentClis.ts"
import { groupAlive } from "../../src/platform/processGroups.ts"
import { makePiClient } from "../../src/layers/providers/pi/PiProvider.ts"
import { piCli } from "./support/piCli.ts"
import { bounded, eventually, gatedJob, type RealAgent, sessionConfig, withRealCli } from "./support/realAgent.ts"

const sessionOf = (agent: RealAgent, agentId: string) =>
  Effect.map(agent.registry.get(agentId), (view) => view.record.persistence?.sessionId)

/** The provider's own probe of the agent's live runtime, as the collector would call it. */
const probe = (agent: RealAgent, agentId: string) =>
  Effect.gen(function*() {
    const family = yield* agent.registry.candidates.captureFamily(agentId)
    const check = family.find((candidate) => candidate.agentId === agentId)?.canStopRuntime
    if (check === undefined) return assert.fail("the pi runtime offers a safety probe")
    return yield* check
  })

/** The probe's veto reason; a permit fails the test. */
const vetoReason = (agent: RealAgent, agentId: string) =>
  Effect.map(probe(agent, agentId), (answer) => answer.canStop ? assert.fail("the probe permitted") : answer.reason)

/** Field 4 of /proc/<pid>/stat; -1 once the process is gone. */
const parentOf = (pid: number): number => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return -1
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Collects the released-and-resumable runtime and proves the next prompt resumes the same session. */
const releaseAndResume = (agent: RealAgent, agentId: string, sessionId: string) =>
  Effect.gen(function*() {
    const runtimePid = (yield* agent.registry.get(agentId)).pid
    const collected = yield* agent.collector.collectNow(agentId)
    assert.strictEqual(collected._tag, "Collected", "the probe permits an idle Pi")
    assert.isFalse((yield* agent.registry.get(agentId)).resident)
    assert.isNotNull(runtimePid)
    yield* eventually(Effect.sync(() => !groupAlive(runtimePid!)), "the released runtime's process group is gone")
    const resumed = yield* agent.promptAndFinish(agentId, "again")
    assert.isTrue(resumed.receipt.resumed, "the prompt resumed the released agent")
    assert.strictEqual(resumed.receipt.sessionId, sessionId, "the same session")
    assert.strictEqual(resumed.outcome.kind, "finished")
    assert.strictEqual(yield* sessionOf(agent, agentId), sessionId)
  })

describe("pi --mode rpc (real CLI)", () => {
  it.live("a streaming turn with a pending steer vetoes; idle permits; the released session resumes", (ctx) =>
    withRealCli(piCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const created = yield* agent.create
        const first = yield* agent.promptAndFinish(created.agentId, "hello")
        assert.strictEqual(first.outcome.kind, "finished")
        const sessionId = yield* sessionOf(agent, created.agentId)
        assert.isString(sessionId, "pi reported a saved session")

        // A foreground command that runs until the gate opens keeps the turn streaming.
        const job = gatedJob(agent.home)
        const finish = yield* Effect.forkChild(agent.registry.awaitFinish(created.agentId), { startImmediately: true })
        const started = yield* agent.registry.prompt(created.agentId, `RUN: ${job.command}`)
        assert.strictEqual(started.disposition, "turn")
        yield* eventually(
          Effect.sync(() => model.requests.some((request) => request.lastUserText.startsWith("RUN:"))),
          "the model was asked to run the command"
        )
        const steered = yield* agent.registry.prompt(created.agentId, "and then stop")
        assert.strictEqual(steered.disposition, "steer", "a prompt during the turn is steered into it")
        assert.match(yield* vetoReason(agent, created.agentId), /^turn \S+ is in flight$/, "the probe vetoes while the turn streams")
        const retained = yield* agent.collector.collectNow(created.agentId)
        assert.strictEqual(retained._tag, "Retained")
        assert.isTrue((yield* agent.registry.get(created.agentId)).resident)

        yield* job.end
        assert.strictEqual((yield* bounded(Fiber.join(finish), "the gated turn's finish")).kind, "finished")
        yield* bounded(agent.registry.awaitIdle(created.agentId), "the turn's end")
        assert.isTrue(
          model.requests.some((request) => request.lastUserText === "and then stop"),
          "the steer reached the model after the command"
        )
        assert.deepStrictEqual(yield* probe(agent, created.agentId), { canStop: true }, "get_state of an idle Pi permits")

        yield* releaseAndResume(agent, created.agentId, sessionId!)
        assert.deepStrictEqual(model.unrouted, [])
      })), 180_000)

  it.live("closing the agent mid-command ends the command, which Pi ran in a process group of its own", (ctx) =>
    withRealCli(piCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const binary = agentCliBinary("pi")
        if ("missing" in binary) return ctx.skip(binary.missing)
        const launch = piCli.launch({ binary: binary.path, home: agent.home, model })
        const client = yield* makePiClient({
          provider: "pi",
          variant: "pi",
          ...launch,
          closeGrace: "3 seconds",
          onSpawn: (pid) => agent.pids.push(pid)
        })
        const session = yield* client.create(sessionConfig(agent.home))
        // A foreground command: the turn runs until the gate opens, which it never does here.
        const job = gatedJob(agent.home)
        const pidFile = join(agent.home, "command.pid")
        const done = yield* session.startTurn(`RUN: echo $BASHPID > '${pidFile}'; ${job.command}`, "turn-1")
        yield* eventually(Effect.sync(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== ""), "the command runs")
        const commandPid = Number(readFileSync(pidFile, "utf8").trim())
        assert.isTrue(alive(commandPid))
        const cliPid = agent.pids[0]!
        yield* session.close
        yield* Effect.exit(bounded(done, "the turn's end after close"))
        // The command's group was noted at close and reported beside the CLI's.
        assert.isAtLeast(agent.pids.length, 2, "the command's process group was reported")
        yield* eventually(
          Effect.sync(() => !alive(commandPid) && agent.pids.every((pgid) => !groupAlive(pgid))),
          "the command and every reported group are gone",
          { tries: 50 }
        )
        assert.isFalse(groupAlive(cliPid))
      })), 180_000)

  it.live("a job left behind with `&` runs outside Pi's tree: it vetoes the release until it ends; then released and resumed", (ctx) =>
    withRealCli(piCli, (note) => ctx.skip(note), (agent) =>
      Effect.gen(function*() {
        const created = yield* agent.create
        assert.strictEqual((yield* agent.promptAndFinish(created.agentId, "hello")).outcome.kind, "finished")
        const sessionId = yield* sessionOf(agent, created.agentId)
        assert.isString(sessionId)
        const cliPid = (yield* agent.registry.get(created.agentId)).pid
        assert.isNotNull(cliPid)

        const job = gatedJob(agent.home)
        const pidFile = join(agent.home, "job.pid")
        const started = yield* agent.promptAndFinish(
          created.agentId,
          piCli.startJob(`echo $BASHPID > '${pidFile}'; ${job.command}`)
        )
        assert.strictEqual(started.outcome.kind, "finished")
        yield* eventually(Effect.sync(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== ""), "the job runs")
        const jobPid = Number(readFileSync(pidFile, "utf8").trim())
        assert.isTrue(alive(jobPid))
        assert.notStrictEqual(parentOf(jobPid), cliPid, "the job was reparented away from Pi")
        yield* bounded(agent.registry.awaitIdle(created.agentId), "the turn's end")

        // Pi's get_state says idle; the job carries the runtime's marker, so the probe vetoes.
        const reason = yield* vetoReason(agent, created.agentId)
        assert.match(reason, /started by the runtime run outside it/, "the escaped job vetoes")
        assert.include(reason, `(pid ${jobPid})`, "the veto names the job")
        const vetoed = yield* agent.collector.collectNow(created.agentId)
        assert.strictEqual(vetoed._tag, "Retained", "the job keeps the runtime")
        assert.isTrue((yield* agent.registry.get(created.agentId)).resident)

        yield* job.end
        yield* eventually(Effect.sync(() => !alive(jobPid)), "the job ended at its gate")
        yield* releaseAndResume(agent, created.agentId, sessionId!)
      })), 180_000)
})
