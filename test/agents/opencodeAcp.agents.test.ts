/**
 * The ACP adapter against a real ACP agent: `opencode acp` (opencode-ai@1.18.33) with the fake
 * model. ACP gives no safety probe (P6), so these cases prove what the baseline and the protocol
 * carry: turns, release and resume through `session/load`, and permission requests held open
 * until a person answers them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { groupAlive } from "../../src/platform/processGroups.ts"
import { makeOpencodeAcpCli } from "./support/opencodeAcpCli.ts"
import { bounded, eventually, type RealAgent, withRealCli } from "./support/realAgent.ts"

/** Prompts a command the model runs with `bash`, which OpenCode asks permission for; the pending id. */
const askToRun = (agent: RealAgent, agentId: string, command: string) =>
  Effect.gen(function*() {
    const asked = yield* agent.promptAndFinish(agentId, `RUN: ${command}`)
    assert.strictEqual(asked.outcome.kind, "needs-permission")
    const pending = (yield* agent.registry.get(agentId)).pendingPermissions
    assert.strictEqual(pending.length, 1, "the request is pending")
    return { turnId: asked.receipt.turnId, permission: pending[0]! }
  })

describe("OpenCode 1.18.33 over ACP (real CLI)", () => {
  it.live("a turn's reply; the idle runtime is released and the next prompt loads the same session", (ctx) =>
    withRealCli(makeOpencodeAcpCli(), (note) => ctx.skip(note), (agent) =>
      Effect.gen(function*() {
        const created = yield* agent.create
        const sessionId = created.persistence?.sessionId
        assert.isString(sessionId, "opencode acp advertises loadSession: the agent is resumable")
        const first = yield* agent.promptAndFinish(created.agentId, "hello")
        assert.deepStrictEqual(first.outcome, { kind: "finished", lastReply: "echo: hello" })
        const pid = (yield* agent.registry.get(created.agentId)).pid
        assert.strictEqual((yield* agent.collector.collectNow(created.agentId))._tag, "Collected")
        if (pid !== null) yield* eventually(Effect.sync(() => !groupAlive(pid)), "the released runtime's process group is gone")
        const again = yield* agent.promptAndFinish(created.agentId, "again")
        assert.isTrue(again.receipt.resumed)
        assert.strictEqual(again.receipt.sessionId, sessionId)
        assert.deepStrictEqual(again.outcome, { kind: "finished", lastReply: "echo: again" })
      })), 180_000)

  it.live("with bash on ask: the request is pending, keeps the turn and the runtime, and an allow runs the command", (ctx) =>
    withRealCli(makeOpencodeAcpCli({ bash: "ask" }), (note) => ctx.skip(note), (agent) =>
      Effect.gen(function*() {
        const { agentId } = yield* agent.create
        const { turnId, permission } = yield* askToRun(agent, agentId, "echo permitted > answer.txt")
        assert.strictEqual((yield* agent.registry.turn(agentId, turnId)).state, "running")
        const held = yield* agent.collector.collectNow(agentId)
        assert.isTrue(
          held._tag === "Retained" && held.residency.blockers.some((blocker) => blocker.kind === "pending-permission"),
          "a pending permission keeps the runtime"
        )
        assert.isFalse(existsSync(join(agent.home, "answer.txt")), "the command waits for the answer")

        const finish = yield* Effect.forkChild(agent.registry.awaitFinish(agentId), { startImmediately: true })
        yield* agent.registry.respondToPermission(agentId, permission, true)
        assert.deepStrictEqual(
          yield* bounded(Fiber.join(finish), "the turn's finish after the answer"),
          { kind: "finished", lastReply: "done" },
          "the command ran and the model closed its turn"
        )
        assert.strictEqual(readFileSync(join(agent.home, "answer.txt"), "utf8"), "permitted\n")
        yield* bounded(agent.registry.awaitIdle(agentId), "the turn's end")
        assert.strictEqual((yield* agent.registry.turn(agentId, turnId)).state, "completed")
        assert.deepStrictEqual((yield* agent.registry.get(agentId)).pendingPermissions, [])
      })), 180_000)

  it.live("with bash on ask: a deny refuses the command and ends the turn", (ctx) =>
    withRealCli(makeOpencodeAcpCli({ bash: "ask" }), (note) => ctx.skip(note), (agent) =>
      Effect.gen(function*() {
        const { agentId } = yield* agent.create
        const { turnId, permission } = yield* askToRun(agent, agentId, "echo refused > denied.txt")
        const finish = yield* Effect.forkChild(agent.registry.awaitFinish(agentId), { startImmediately: true })
        yield* agent.registry.respondToPermission(agentId, permission, false)
        // 1.18.33 ends the turn at a rejection, without asking the model again: no reply.
        assert.deepStrictEqual(
          yield* bounded(Fiber.join(finish), "the turn's finish after the deny"),
          { kind: "finished", lastReply: null }
        )
        yield* bounded(agent.registry.awaitIdle(agentId), "the turn's end")
        assert.strictEqual((yield* agent.registry.turn(agentId, turnId)).state, "completed")
        assert.isFalse(existsSync(join(agent.home, "denied.txt")), "the denied command did not run")
        assert.deepStrictEqual((yield* agent.registry.get(agentId)).pendingPermissions, [])
      })), 180_000)
})
