/**
 * The Claude Code adapter (P2) against the real pinned CLI, driven by the fake model on loopback
 * (test/agents/support/claudeCli.ts). Real processes run, so time is real and every wait polls
 * with a bound; each test proves that no process group it started is left.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Logger, References } from "effect"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { agentCliBinary } from "../../scripts/agentClis.ts"
import type { SessionEvent, StopAnswer } from "../../src/domain/provider.ts"
import { makeClaudeClient } from "../../src/layers/providers/claude/ClaudeProvider.ts"
import { groupAlive } from "../../src/platform/processGroups.ts"
import { claudeCli } from "./support/claudeCli.ts"
import { backgroundJobScenario, bounded, eventually, gatedJob, sessionConfig, withRealCli } from "./support/realAgent.ts"

type ProbeResult =
  | { readonly _tag: "Permit" }
  | { readonly _tag: "Veto"; readonly reason: string }
  /** The probe failed (RuntimeProbeFailed): neither a permit nor a veto. */
  | { readonly _tag: "Failed"; readonly cause: string }

/**
 * Runs the probe and says what it answered: a permit, a veto with why, or a failure. The veto's
 * debug log must say the same reason as the answer.
 */
const probeResult = (probe: Effect.Effect<StopAnswer, unknown>) =>
  Effect.gen(function*() {
    const messages: Array<unknown> = []
    const capture = Logger.make((options) => void messages.push(options.message))
    const exit = yield* Effect.exit(probe.pipe(
      Effect.provide(Logger.layer([capture])),
      Effect.provideService(References.MinimumLogLevel, "Debug")
    ))
    if (Exit.isFailure(exit)) return { _tag: "Failed", cause: Cause.pretty(exit.cause) } satisfies ProbeResult
    if (exit.value.canStop) return { _tag: "Permit" } satisfies ProbeResult
    const reason = exit.value.reason
    const logged = messages.some((message) => Array.isArray(message) && message[0] === "Claude runtime is busy" && message[1] === reason)
    assert.isTrue(logged, `the veto is logged with its reason: ${reason}`)
    return { _tag: "Veto", reason } satisfies ProbeResult
  }).pipe(Effect.map((result): ProbeResult => result))

describe("claude code (real CLI)", () => {
  it.live("a background shell vetoes the release until it ends; the session resumes", (ctx) =>
    withRealCli(claudeCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const outcome = yield* backgroundJobScenario(agent, claudeCli.startJob)
        assert.strictEqual(outcome.vetoed._tag, "Retained")
        assert.deepStrictEqual(model.unrouted, [])
        assert.isTrue(model.requests.some((request) => request.afterToolResult), "the Bash tool ran")
        // The job's shell ran in a process group of its own, reported beside the CLI's; the
        // harness proves every reported group is gone.
        assert.isAtLeast(agent.pids.length, 3, "two CLI processes and the job's group were reported")
      })), 180_000)

  it.live("a permission prompt is reported, vetoes, and is answered; an interrupt withdraws one", (ctx) =>
    withRealCli(claudeCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const binary = agentCliBinary("claude")
        if ("missing" in binary) return ctx.skip(binary.missing)
        const launch = claudeCli.launch({ binary: binary.path, home: agent.home, model })
        const client = yield* makeClaudeClient({
          ...launch,
          // The default arguments: Bash is not allowed up front, so the CLI asks over stdio.
          args: undefined,
          onSpawn: (pid) => agent.pids.push(pid)
        })
        const events: Array<SessionEvent> = []
        const session = yield* client.create(sessionConfig(agent.home, (e) => void events.push(e)))
        const asked = (n: number) =>
          eventually(Effect.sync(() => events.filter((e) => e._tag === "PermissionRequested").length === n), `permission request ${n}`)

        const made = join(agent.home, "made-by-the-tool")
        const allowed = yield* session.startTurn(`RUN: touch '${made}'`, "turn-1")
        yield* asked(1)
        // The turn waits for the answer, and the turn is what the veto names first.
        assert.deepStrictEqual(
          yield* probeResult(session.canStopRuntime!),
          { _tag: "Veto", reason: "turn turn-1 is in flight" },
          "the pending prompt (within its turn) vetoes"
        )
        const first = events.find((e) => e._tag === "PermissionRequested")
        yield* session.respondToPermission(first?._tag === "PermissionRequested" ? first.id : "", true)
        // After the tool's result the scripted model closes the turn with "done".
        assert.strictEqual((yield* bounded(allowed, "the allowed turn's end")).reply, "done")
        yield* eventually(Effect.sync(() => existsSync(made)), "the allowed command ran")

        const withdrawn = yield* session.startTurn(`RUN: touch '${made}-2'`, "turn-2")
        yield* asked(2)
        yield* session.interrupt
        yield* bounded(withdrawn, "the interrupted turn's end")
        assert.strictEqual(events.filter((e) => e._tag === "PermissionResolved").length, 2)
        assert.isFalse(existsSync(`${made}-2`))
        yield* session.close
      })), 180_000)

  it.live("resuming a conversation the CLI does not have fails, saying so", (ctx) =>
    withRealCli(claudeCli, (note) => ctx.skip(note), (agent, model) =>
      Effect.gen(function*() {
        const binary = agentCliBinary("claude")
        if ("missing" in binary) return ctx.skip(binary.missing)
        const client = yield* makeClaudeClient({
          ...claudeCli.launch({ binary: binary.path, home: agent.home, model }),
          onSpawn: (pid) => agent.pids.push(pid)
        })
        const missing = "11111111-2222-3333-4444-555555555555"
        const error = yield* Effect.flip(
          client.resume({ provider: "claude", sessionId: missing }, sessionConfig(agent.home))
        )
        assert.strictEqual(error._tag, "ProviderFailed")
        assert.include(error.message, `No conversation found with session ID: ${missing}`)
      })), 180_000)

  // The CLI starts each background shell in a session and process group of its own, so ending the
  // CLI's group does not reach it; the adapter ends those groups too, however the CLI ended.
  for (
    const [name, end] of [
      ["close", (session: { readonly close: Effect.Effect<void, unknown> }) => Effect.orDie(session.close)],
      ["a CLI killed outright, then the layer's scope", (session: { readonly pid?: number | undefined }) =>
        Effect.sync(() => process.kill(-session.pid!, "SIGKILL"))]
    ] as const
  ) {
    it.live(`${name} leaves no background shell behind`, (ctx) =>
      withRealCli(claudeCli, (note) => ctx.skip(note), (agent, model) =>
        Effect.gen(function*() {
          const binary = agentCliBinary("claude")
          if ("missing" in binary) return ctx.skip(binary.missing)
          const launch = claudeCli.launch({ binary: binary.path, home: agent.home, model })
          const pids: Array<number> = []
          const job = gatedJob(agent.home)
          // Ends the job however the test ends, so a failure leaves nothing running either.
          yield* Effect.addFinalizer(() => job.end)
          const running = yield* Effect.scoped(Effect.gen(function*() {
            const client = yield* makeClaudeClient({
              ...launch,
              closeGrace: "3 seconds",
              onSpawn: (pid) => {
                pids.push(pid)
                agent.pids.push(pid)
              }
            })
            const events: Array<SessionEvent> = []
            const session = yield* client.create(sessionConfig(agent.home, (e) => void events.push(e)))
            const done = yield* session.startTurn(claudeCli.startJob(job.command), "turn-1")
            assert.strictEqual((yield* bounded(done, "the turn's end")).reply, "done")
            // Right after the turn the CLI may still report itself running; wait for the roster's veto.
            yield* eventually(
              probeResult(session.canStopRuntime!).pipe(
                Effect.map((result) => result._tag === "Veto" && /^background tasks? .* (is|are) running$/.test(result.reason))
              ),
              "the live roster vetoes",
              { tries: 40, every: "250 millis" }
            )
            const [cli, ...shells] = pids
            const live = shells.filter(groupAlive)
            assert.strictEqual(live.length, 1, "the job's process group was reported and runs")
            yield* end(session)
            return { cli: cli!, shell: live[0]! }
          }))
          yield* eventually(Effect.sync(() => !groupAlive(running.cli) && !groupAlive(running.shell)), "both groups are gone")
        })), 180_000)
  }
})
