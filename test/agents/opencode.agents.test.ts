/**
 * The OpenCode adapter against the real `opencode serve` (opencode-ai@1.18.33) and the fake model.
 *
 * What 1.18.33 exposes to the probe, and so what these cases can honestly prove:
 * - a turn's execution and a child session's (`GET /session/status` lists them `busy`): with
 *   `OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=1` the `task` tool runs a subagent in the
 *   background, which is how `backgroundJobScenario` runs here (the subagent runs the job);
 * - PTYs created through the API (`GET /pty`);
 * - NOT a job the model backgrounds with its `bash` tool (`cmd > /dev/null 2>&1 &`): the turn ends,
 *   no inventory lists the job, and the tool ran it in a process group (and session) of its own
 *   that is reparented away from the server. The adapter finds it by the environment marker every
 *   runtime is started with, and vetoes the release while it runs (it never ends it).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Schema } from "effect"
import { mkdirSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { PermissionAskedEvent, Pty } from "../../src/layers/providers/opencode/apiTypes.ts"
import type { OpenCodeServerInfo } from "../../src/layers/providers/opencode/OpenCodeProvider.ts"
import { probeDecision } from "../../src/layers/providers/opencode/probe.ts"
import { groupAlive } from "../../src/platform/processGroups.ts"
import { agentCliBinary } from "../../scripts/agentClis.ts"
import { type ModelPolicy, scriptedPolicy } from "./support/fakeModel/policy.ts"
import { fakeModelServer } from "./support/fakeModel/server.ts"
import { makeOpencodeCli } from "./support/opencodeCli.ts"
import {
  backgroundJobScenario,
  bounded,
  eventually,
  gatedJob,
  type RealAgent,
  withRealAgent,
  withRealCli
} from "./support/realAgent.ts"

type Server = OpenCodeServerInfo

/** The provider's own probe of the agent's live runtime, as the collector would call it. */
const adapterProbe = (agent: RealAgent, agentId: string) =>
  Effect.gen(function*() {
    const family = yield* agent.registry.candidates.captureFamily(agentId)
    const check = family.find((candidate) => candidate.agentId === agentId)?.canStopRuntime
    if (check === undefined) return assert.fail("the opencode runtime offers a safety probe")
    return yield* check
  })

/** A gate in its own folder under the home (`gatedJob` names its file inside the folder). */
const gateIn = (home: string, name: string) => {
  const dir = join(home, name)
  mkdirSync(dir, { recursive: true })
  return gatedJob(dir)
}

/** The CLI with the probe's opt-in, remembering where each runtime's server listens. */
const trusting = () => {
  const servers: Array<Server> = []
  return { servers, cli: makeOpencodeCli({ trustMissingInventories: true, onServer: (server) => servers.push(server) }) }
}

const decodePty = Schema.decodeUnknownSync(Pty)
const decodePtys = Schema.decodeUnknownSync(Schema.Array(Pty))
const decodePermissions = Schema.decodeUnknownSync(Schema.Array(PermissionAskedEvent))

/** One request to a runtime's server, with its password, bounded in time. */
const http = (server: Server, method: "GET" | "POST", path: string, body?: unknown) =>
  Effect.promise(async (): Promise<unknown> => {
    const response = await fetch(`${server.baseUrl}${path}`, {
      method,
      headers: { "content-type": "application/json", ...server.headers },
      signal: AbortSignal.timeout(10_000),
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return response.json()
  })

const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The process group of a pid, from procfs (field 5 of /proc/<pid>/stat, after the command). */
const pgidOf = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])
}

const helloTurn = (agent: RealAgent) =>
  Effect.gen(function*() {
    const created = yield* agent.create
    const first = yield* agent.promptAndFinish(created.agentId, "hello")
    assert.strictEqual(first.outcome.kind, "finished")
    const record = yield* agent.registry.get(created.agentId)
    const sessionId = record.record.persistence?.sessionId
    assert.isString(sessionId)
    return { agentId: created.agentId, sessionId: sessionId ?? "" }
  })

/**
 * The shared script, plus one line: `BACKGROUND: <command>` makes the model start a background
 * subagent (`task` with `background: true`) whose prompt is `RUN: <command>`; the subagent then
 * runs the command with `bash` as usual.
 */
const backgroundTaskPolicy = (bash: ModelPolicy): ModelPolicy => (request) => {
  const background = /^BACKGROUND: (.+)$/m.exec(request.lastUserText)
  if (!request.afterToolResult && background !== null && request.toolNames.includes("task")) {
    return {
      kind: "tool",
      name: "task",
      input: { description: "gated job", prompt: `RUN: ${background[1]}`, subagent_type: "general", background: true }
    }
  }
  return bash(request)
}

describe("OpenCode 1.18.33 (real CLI)", () => {
  it.live("backgroundJobScenario: a background subagent running the job vetoes; it ends; the runtime is released and resumed", (ctx) =>
    Effect.gen(function*() {
      const binary = agentCliBinary("opencode")
      if ("missing" in binary) return ctx.skip(binary.missing)
      const servers: Array<Server> = []
      const cli = makeOpencodeCli({
        trustMissingInventories: true,
        backgroundSubagents: true,
        onServer: (server) => servers.push(server)
      })
      const model = yield* fakeModelServer(backgroundTaskPolicy(scriptedPolicy(cli.shell)), cli.dialects)
      yield* withRealAgent(
        { provider: cli.provider, layer: (home, onSpawn) => cli.layer(cli.launch({ binary: binary.path, home, model }), onSpawn) },
        (agent) =>
          Effect.gen(function*() {
            const result = yield* backgroundJobScenario(agent, (command) => `BACKGROUND: ${command}`)
            const sessionId = result.sessionId ?? ""
            // In the scenario the registry retains first: the adapter reported the child as a subagent.
            assert.isTrue(
              result.vetoed._tag === "Retained" && result.vetoed.residency.blockers.some((blocker) => blocker.kind === "running-subagents")
            )

            // The scenario's veto may come from the registry alone (the adapter reports the child
            // session as a running subagent). Here the probe itself is asked while a child runs.
            const job = gateIn(agent.home, "second-job")
            const started = yield* agent.promptAndFinish(result.agentId, `BACKGROUND: ${job.command}`)
            assert.strictEqual(started.outcome.kind, "finished", "the parent's turn ends while the child runs")
            const server = servers.at(-1)!
            assert.strictEqual(server.sessionId, sessionId)
            const probe = { agentId: result.agentId, baseUrl: server.baseUrl, headers: server.headers, sessionId, trustMissingInventories: { serverVersion: server.version } }
            yield* eventually(
              probeDecision(probe).pipe(Effect.map((decision) =>
                decision._tag === "Busy" && /session ses_\w+ is busy/.test(decision.reason) && !decision.reason.includes(sessionId)
              )),
              "the probe reads the child session busy"
            )
            yield* job.end
            yield* eventually(
              probeDecision(probe).pipe(Effect.map((decision) => decision._tag === "Idle")),
              "the probe permits once the child and the parent's completion turn are done",
              { tries: 60, every: "500 millis" }
            )
            assert.isTrue(
              model.requests.some((request) => request.toolNames.includes("task") && request.lastUserText.startsWith("BACKGROUND:")),
              "the model was asked with the task tool offered"
            )
          })
      )
    }).pipe(Effect.scoped), 180_000)

  it.live("a running turn and a PTY veto; once the PTY has ended the runtime is released and the same session resumes", (ctx) => {
    const { cli, servers } = trusting()
    return withRealCli(cli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const { agentId, sessionId } = yield* helloTurn(agent)
        assert.isTrue(model.requests.some((request) => request.lastUserText === "hello"), "the fake model answered")
        const server = servers.at(-1)!
        assert.strictEqual(server.sessionId, sessionId)
        const probe = { agentId, baseUrl: server.baseUrl, headers: server.headers, sessionId, trustMissingInventories: { serverVersion: server.version } }

        // 1. A turn running a shell command in the foreground: the server reports the session busy.
        const turnJob = gateIn(agent.home, "turn-gate")
        const finish = yield* Effect.forkChild(agent.registry.awaitFinish(agentId), { startImmediately: true })
        yield* agent.registry.prompt(agentId, `RUN: ${turnJob.command}`)
        yield* eventually(
          probeDecision(probe).pipe(Effect.map((decision) => decision._tag === "Busy")),
          "the probe reads the turn as busy"
        )
        const busy = yield* probeDecision(probe)
        assert.strictEqual(busy._tag, "Busy")
        assert.include(busy._tag === "Busy" ? busy.reason : "", "is busy")
        yield* turnJob.end
        assert.strictEqual((yield* bounded(Fiber.join(finish), "the shell turn's finish")).kind, "finished")
        yield* bounded(agent.registry.awaitIdle(agentId), "the turn's end")
        assert.deepStrictEqual(yield* probeDecision(probe), { _tag: "Idle" })

        // 2. A PTY created through the API, running a gated job: the probe vetoes the release.
        const ptyJob = gateIn(agent.home, "pty-gate")
        const pty = decodePty(yield* http(server, "POST", `/pty?directory=${encodeURIComponent(agent.home)}`, {
          command: "bash",
          args: ["-c", ptyJob.command]
        }))
        assert.strictEqual(pty.status, "running")
        const ptyDecision = yield* probeDecision(probe)
        assert.strictEqual(ptyDecision._tag, "Busy")
        assert.include(ptyDecision._tag === "Busy" ? ptyDecision.reason : "", `PTY ${pty.id} \`bash -c `, "the veto names the PTY")
        const vetoed = yield* agent.collector.collectNow(agentId)
        assert.strictEqual(vetoed._tag, "Retained", "the PTY keeps the runtime")
        if (vetoed._tag === "Retained") {
          assert.strictEqual(vetoed.residency.veto?.outcome, "vetoed")
        }
        assert.isTrue((yield* agent.registry.get(agentId)).resident)

        // 3. The job ends; the server drops the PTY; the probe permits; the group is gone.
        yield* ptyJob.end
        yield* eventually(
          http(server, "GET", `/pty?directory=${encodeURIComponent(agent.home)}`).pipe(
            Effect.map((list) => decodePtys(list).length === 0)
          ),
          "the ended PTY is no longer listed"
        )
        yield* eventually(
          agent.collector.collectNow(agentId).pipe(Effect.map((outcome) => outcome._tag === "Collected")),
          "the probe permits the release",
          { tries: 60, every: "500 millis" }
        )
        assert.isFalse((yield* agent.registry.get(agentId)).resident)
        yield* eventually(Effect.sync(() => !groupAlive(server.pid)), "the released server's process group is gone")
        const ptyPid = pty.pid
        assert.isDefined(ptyPid, "the server names the PTY's process")
        if (ptyPid !== undefined) assert.isFalse(processAlive(ptyPid), "the PTY's process is gone")

        // 4. The next prompt starts a new server on the saved session.
        const resumed = yield* agent.promptAndFinish(agentId, "again")
        assert.isTrue(resumed.receipt.resumed)
        assert.strictEqual(resumed.receipt.sessionId, sessionId, "the same session")
        assert.strictEqual(resumed.outcome.kind, "finished")
        assert.strictEqual(servers.length, 2, "a second server")
        assert.notStrictEqual(servers[1]!.pid, server.pid)
        assert.strictEqual(servers[1]!.sessionId, sessionId)

        // 5. Closing a runtime whose PTY still runs: PTYs are process groups of their own that
        // outlive the server, so the adapter removes them through the API first.
        const second = servers[1]!
        const lingering = decodePty(yield* http(second, "POST", `/pty?directory=${encodeURIComponent(agent.home)}`, {
          command: "sleep",
          args: ["120"]
        }))
        // `pid ?? 0` would ask about our own process group (kill(0, 0)), which is always alive.
        const lingeringPid = lingering.pid
        assert.isDefined(lingeringPid, "the server names the PTY's process")
        if (lingeringPid === undefined) return
        assert.isTrue(processAlive(lingeringPid))
        assert.notStrictEqual(pgidOf(lingeringPid), second.pid, "the PTY is not in the server's group")
        yield* agent.registry.close(agentId)
        yield* eventually(Effect.sync(() => !groupAlive(second.pid)), "the closed server's group is gone")
        yield* eventually(Effect.sync(() => !processAlive(lingeringPid)), "the PTY's process is gone")
      }))
  }, 180_000)

  it.live("a job the model backgrounds leaves the server's tree; its marker vetoes the release until it ends; then released and resumed", (ctx) => {
    const { cli, servers } = trusting()
    return withRealCli(cli, (note) => ctx.skip(note), (agent) =>
      Effect.gen(function*() {
        const { agentId, sessionId } = yield* helloTurn(agent)
        const server = servers.at(-1)!
        const job = gatedJob(agent.home)
        const started = yield* agent.promptAndFinish(agentId, cli.startJob(job.command))
        assert.strictEqual(started.outcome.kind, "finished", "the turn ends while the job runs")
        const jobPids = () => findJob(job.command)
        yield* eventually(Effect.sync(() => jobPids().length > 0), "the backgrounded job runs")
        const [jobPid] = jobPids()
        assert.notStrictEqual(pgidOf(jobPid!), server.pid, "the job is not in the runtime's process group")
        yield* bounded(agent.registry.awaitIdle(agentId), "the turn's end")
        // What 1.18.33 exposes says nothing about it: the server's inventories are idle.
        const decision = yield* probeDecision({
          agentId,
          baseUrl: server.baseUrl,
          headers: server.headers,
          sessionId,
          trustMissingInventories: { serverVersion: server.version }
        })
        assert.deepStrictEqual(decision, { _tag: "Idle" })
        // The job carries the runtime's environment marker, so the adapter's probe vetoes, naming it.
        const answer = yield* adapterProbe(agent, agentId)
        assert.include(answer.canStop ? "" : answer.reason, `(pid ${jobPid})`, "the veto names the escaped job")
        const vetoed = yield* agent.collector.collectNow(agentId)
        assert.strictEqual(vetoed._tag, "Retained", "the escaped job keeps the runtime")
        assert.isTrue((yield* agent.registry.get(agentId)).resident)

        yield* job.end
        yield* eventually(Effect.sync(() => jobPids().length === 0), "the job has ended")
        yield* eventually(
          agent.collector.collectNow(agentId).pipe(Effect.map((outcome) => outcome._tag === "Collected")),
          "the probe permits the release once the job has ended",
          { tries: 60, every: "500 millis" }
        )
        assert.isFalse((yield* agent.registry.get(agentId)).resident)
        yield* eventually(Effect.sync(() => !groupAlive(server.pid)), "the released server's process group is gone")
        const resumed = yield* agent.promptAndFinish(agentId, "again")
        assert.isTrue(resumed.receipt.resumed, "the prompt resumed the released agent")
        assert.strictEqual(resumed.receipt.sessionId, sessionId, "the same session")
        assert.strictEqual(resumed.outcome.kind, "finished")
      }))
  }, 180_000)

  it.live("a permission the server asks is surfaced, keeps the runtime, and is answered through the adapter", (ctx) => {
    const servers: Array<Server> = []
    const cli = makeOpencodeCli({ trustMissingInventories: true, bash: "ask", onServer: (server) => servers.push(server) })
    return withRealCli(cli, (note) => ctx.skip(note), (agent) =>
      Effect.gen(function*() {
        const { agentId } = yield* helloTurn(agent)
        const asked = yield* agent.promptAndFinish(agentId, "RUN: echo permitted")
        assert.strictEqual(asked.outcome.kind, "needs-permission")
        const pending = decodePermissions(
          yield* http(servers.at(-1)!, "GET", `/permission?directory=${encodeURIComponent(agent.home)}`)
        )
        assert.strictEqual(pending.length, 1)
        assert.strictEqual(pending[0]!.permission, "bash")
        const retained = yield* agent.collector.collectNow(agentId)
        assert.strictEqual(retained._tag, "Retained", "a pending permission keeps the runtime")
        const finish = yield* Effect.forkChild(agent.registry.awaitFinish(agentId), { startImmediately: true })
        yield* agent.registry.respondToPermission(agentId, pending[0]!.id, true)
        const outcome = yield* bounded(Fiber.join(finish), "the turn's finish after the answer")
        assert.strictEqual(outcome.kind, "finished")
        assert.strictEqual(outcome.lastReply, "done", "the command ran and the model closed its turn")
      }))
  }, 180_000)

  it.live("with the default options the probe retains: 1.18.33 lacks the v2 inbox and shell inventories", (ctx) =>
    withRealCli(makeOpencodeCli(), (note) => ctx.skip(note), (agent) =>
      Effect.gen(function*() {
        const { agentId } = yield* helloTurn(agent)
        // A probe that cannot decide fails (C6): the collector reports the failure and keeps the runtime.
        const outcome = yield* agent.collector.collectNow(agentId)
        assert.strictEqual(outcome._tag, "Failed")
        if (outcome._tag === "Failed") {
          assert.strictEqual(outcome.error._tag, "RuntimeProbeFailed")
          assert.match(outcome.error.message, /v2 shell list .* unavailable: GET \/api\/shell\?.* answered HTML/)
        }
        assert.isTrue((yield* agent.registry.get(agentId)).resident)
      })), 180_000)
  it.live("closing a runtime mid-command ends the command's own process group too", (ctx) => {
    const { cli, servers } = trusting()
    return withRealCli(cli, (note) => ctx.skip(note), (agent) => {
      const job = gateIn(agent.home, "close-gate")
      // Should the close miss it, the command still ends (and is seen to end) before the home goes.
      const cleanup = job.end.pipe(
        Effect.andThen(eventually(Effect.sync(() => findJob(job.command).length === 0), "the command ended by its gate"))
      )
      return Effect.gen(function*() {
        const { agentId } = yield* helloTurn(agent)
        const server = servers.at(-1)!
        const finish = yield* Effect.forkChild(agent.registry.awaitFinish(agentId), { startImmediately: true })
        yield* agent.registry.prompt(agentId, `RUN: ${job.command}`)
        yield* eventually(Effect.sync(() => findJob(job.command).length > 0), "the command runs in the turn")
        const [jobPid] = findJob(job.command)
        assert.isDefined(jobPid)
        // The bash tool starts the command in a process group of its own: ending the server's group misses it.
        if (jobPid !== undefined) assert.notStrictEqual(pgidOf(jobPid), server.pid, "the command is not in the server's group")
        yield* agent.registry.close(agentId)
        yield* eventually(Effect.sync(() => !groupAlive(server.pid)), "the closed server's group is gone")
        yield* eventually(Effect.sync(() => findJob(job.command).length === 0), "no process of the command is left")
        yield* Fiber.interrupt(finish)
      }).pipe(Effect.ensuring(cleanup))
    })
  }, 180_000)
})

/** Pids of processes whose command line runs the job (read from procfs; never signalled). */
const findJob = (command: string): ReadonlyArray<number> => {
  const pids: Array<number> = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ")
      if (cmdline.includes(command) && !cmdline.includes("RUN:")) pids.push(Number(entry))
    } catch {
      // The process ended while the list was read.
    }
  }
  return pids
}
