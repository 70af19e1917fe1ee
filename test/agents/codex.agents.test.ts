/**
 * The Codex adapter (P3) against the real pinned `codex app-server`, driven by the fake model on
 * loopback (test/agents/support/codexCli.ts). Real processes run, so time is real and every wait
 * polls with a bound; each test proves that no process group it started is left.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { agentCliBinary } from "../../scripts/agentClis.ts"
import { type LogEntry, recordingLogs } from "../support/logs.ts"
import type { SessionEvent, StopAnswer } from "../../src/domain/provider.ts"
import { makeCodexClient } from "../../src/layers/providers/codex/CodexProvider.ts"
import { groupAlive } from "../../src/platform/processGroups.ts"
import { codexCli } from "./support/codexCli.ts"
import { backgroundJobScenario, bounded, eventually, gatedJob, sessionConfig, withRealCli } from "./support/realAgent.ts"

/** A veto's reason; a permit fails the test. */
const vetoed = (answer: StopAnswer): string => answer.canStop ? assert.fail("the probe permitted") : answer.reason

/** The same CLI, whose scripted model asks to run each command outside the sandbox. */
const escalatingCli = {
  ...codexCli,
  shell: {
    name: "exec_command",
    input: (command: string) => ({ cmd: command, sandbox_permissions: "require_escalated", justification: "the test asks" })
  }
}

describe("codex app-server (real CLI)", () => {
  it.live("a background terminal vetoes the release until it ends; the thread resumes", (ctx) =>
    withRealCli(codexCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const logs: Array<LogEntry> = []
        const outcome = yield* recordingLogs(logs)(backgroundJobScenario(agent, codexCli.startJob))
        assert.strictEqual(outcome.vetoed._tag, "Retained")
        // The veto was the server's listing, not the connection's own state.
        assert.isTrue(
          logs.some((entry) => /has a background terminal: until /.test(String(entry.annotations["reason"]))),
          "the background terminal was the reason"
        )
        assert.deepStrictEqual(model.unrouted, [])
        assert.isTrue(model.requests.some((request) => request.afterToolResult), "the shell tool ran")
        // The job ran in a process group of its own, reported beside the server's; the harness
        // proves every reported group is gone.
        assert.isAtLeast(agent.pids.length, 3, "two servers and the job's group were reported")
      })), 180_000)

  it.live("an approval request is a pending permission that vetoes until answered", (ctx) =>
    withRealCli(escalatingCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const binary = agentCliBinary("codex")
        if ("missing" in binary) return ctx.skip(binary.missing)
        const launch = codexCli.launch({ binary: binary.path, home: agent.home, model })
        const client = yield* makeCodexClient({
          ...launch,
          // 0.171.0 refuses "untrusted": the model asks for each escalation itself, under "on-request".
          args: [...(launch.args ?? []), "-c", `approval_policy="on-request"`, "-c", `sandbox_mode="read-only"`],
          onSpawn: (pid) => agent.pids.push(pid)
        })
        const events: Array<SessionEvent> = []
        const session = yield* client.create(sessionConfig(agent.home, (e) => void events.push(e)))
        const done = yield* session.startTurn(codexCli.startJob("touch approved-file"), "turn-1")
        yield* eventually(
          Effect.sync(() => events.some((event) => event._tag === "PermissionRequested")),
          "the server asks for approval"
        )
        const requested = events.find((event) => event._tag === "PermissionRequested")
        const permissionId = requested?._tag === "PermissionRequested" ? requested.id : ""
        // The turn waits for the approval, and the turn is what the veto names first.
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), "turn turn-1 is running", "a pending approval (and the turn) vetoes")
        yield* session.respondToPermission(permissionId, true)
        assert.deepStrictEqual(yield* bounded(done, "the turn's end"), { reply: "done", interrupted: false })
        assert.isTrue(existsSync(join(agent.home, "approved-file")), "the approved command ran")
        assert.deepInclude(events, { _tag: "PermissionResolved", id: permissionId })
        yield* eventually(
          Effect.map(session.canStopRuntime!, (answer) => answer.canStop),
          "the probe permits once the command has ended"
        )
        yield* session.close
      })), 180_000)

  it.live("a warm server started in a neutral folder runs its thread in the agent's cwd, new and resumed (H4)", (ctx) =>
    withRealCli(codexCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const binary = agentCliBinary("codex")
        if ("missing" in binary) return ctx.skip(binary.missing)
        const warmCwd = mkdtempSync(join(tmpdir(), "quiesce-codex-warm-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(warmCwd, { recursive: true, force: true })))
        const client = yield* makeCodexClient({
          ...codexCli.launch({ binary: binary.path, home: agent.home, model }),
          warmCwd,
          onSpawn: (pid) => agent.pids.push(pid)
        })
        const startWarm = client.startWarm ?? assert.fail("codex starts warm")
        const config = sessionConfig(agent.home)
        const warm = yield* startWarm(config.runtimeMarker)
        assert.strictEqual(readlinkSync(`/proc/${warm.pid}/cwd`), realpathSync(warmCwd))
        const session = yield* warm.create(config)
        const done = yield* session.startTurn(codexCli.startJob("pwd > where.txt"), "turn-1")
        assert.strictEqual((yield* bounded(done, "the turn's end")).reply, "done")
        assert.strictEqual(readFileSync(join(agent.home, "where.txt"), "utf8").trim(), realpathSync(agent.home))
        const handle = (yield* session.persistence) ?? assert.fail("a thread id")
        yield* session.close

        const again = sessionConfig(agent.home)
        const resumed = yield* (yield* startWarm(again.runtimeMarker)).resume(handle, again)
        assert.deepStrictEqual(yield* resumed.persistence, handle)
        const next = yield* resumed.startTurn(codexCli.startJob("pwd > again.txt"), "turn-2")
        assert.strictEqual((yield* bounded(next, "the resumed turn's end")).reply, "done")
        assert.strictEqual(readFileSync(join(agent.home, "again.txt"), "utf8").trim(), realpathSync(agent.home))
        yield* resumed.close
        // A warm server closed without a thread ends too (the harness checks every reported group).
        yield* (yield* startWarm(sessionConfig(agent.home).runtimeMarker)).close
      })), 180_000)

  // Codex runs each command in a session and process group of its own. On SIGTERM the server ends
  // them; a server killed outright does not, and a backgrounded child of the command survives it.
  for (
    const [name, end] of [
      ["close", (session: { readonly close: Effect.Effect<void, unknown> }) => Effect.orDie(session.close)],
      ["a server killed outright", (session: { readonly pid?: number | undefined }) =>
        Effect.sync(() => process.kill(-session.pid!, "SIGKILL"))]
    ] as const
  ) {
    it.live(`${name} leaves no shell command of a background terminal behind`, (ctx) =>
      withRealCli(codexCli, (note) => ctx.skip(note), (agent, model) =>
        Effect.gen(function*() {
          const binary = agentCliBinary("codex")
          if ("missing" in binary) return ctx.skip(binary.missing)
          const launch = codexCli.launch({ binary: binary.path, home: agent.home, model })
          const pids: Array<number> = []
          const client = yield* makeCodexClient({
            ...launch,
            closeGrace: "3 seconds",
            onSpawn: (pid) => {
              pids.push(pid)
              agent.pids.push(pid)
            }
          })
          const events: Array<SessionEvent> = []
          const session = yield* client.create(sessionConfig(agent.home, (e) => void events.push(e)))
          const job = gatedJob(agent.home)
          // Ends the job however the test ends, so a failure leaves nothing running either.
          yield* Effect.addFinalizer(() => job.end)
          // The loop runs in a subshell: a child of the command that outlives the command's shell.
          const done = yield* session.startTurn(codexCli.startJob(`(${job.command}) & wait`), "turn-1")
          assert.strictEqual((yield* bounded(done, "the turn's end")).reply, "done")
          const logs: Array<LogEntry> = []
          const reason = vetoed(yield* recordingLogs(logs)(session.canStopRuntime!))
          assert.match(reason, /^thread \S+ has a background terminal: \(until /, "the background terminal vetoes")
          assert.strictEqual(String(logs.at(-1)?.annotations["reason"]), reason, "the log says the same")
          // Besides the job, the server may have run short commands of its own (git) in groups of their own.
          const [server, ...commands] = pids
          const running = commands.filter(groupAlive)
          assert.strictEqual(running.length, 1, "the job's process group was reported and runs")
          yield* end(session)
          yield* eventually(Effect.sync(() => !groupAlive(server!) && !groupAlive(running[0]!)), "both groups are gone")
        })), 180_000)
  }
})
