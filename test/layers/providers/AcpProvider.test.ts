/**
 * The ACP provider (P6) against a real ACP agent process (`test/fixtures/acpAgent.mjs`, written
 * with the same SDK), through the real registry and collector. Time is real here (processes
 * run), so waits poll or time out with a bound.
 */
import * as RuntimeCollectorLive from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, type Scope } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FakeCallerProtection } from "../../../src/testing/FakeRuntimes.ts"
import type { PermissionOptionKind } from "@agentclientprotocol/sdk"
import type { SessionEvent } from "../../../src/domain/provider.ts"
import * as AcpProvider from "../../../src/layers/providers/acp/AcpProvider.ts"
import { makeOpenPermissions, outcomeFor } from "../../../src/layers/providers/acp/permissions.ts"
import { groupAlive } from "../../../src/platform/processGroups.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { RuntimeCollector } from "../../../src/services/RuntimeCollector.ts"
import { recordingLogs } from "../../support/logs.ts"
import { recordingTracer } from "../../support/recordingTracer.ts"
import { freshMarker, markerOf } from "../../support/runtimeMarker.ts"

const acpAgent = join(import.meta.dirname, "../../fixtures/acpAgent.mjs")

const tempHome = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-acp-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Polls until the condition holds, at most `tries` times 50 ms apart. */
const eventually = (condition: () => boolean, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      if (condition()) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

/** Fails the test instead of hanging when a wait takes too long. */
const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, what: string) =>
  effect.pipe(Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(`timed out: ${what}`) }))

/** The fixture's saved transcript of one session. */
const transcript = (home: string, sessionId: string) => readFileSync(join(home, "sessions", `${sessionId}.json`), "utf8")

const setup = Effect.fnUntraced(function*(options: {
  readonly home: string
  readonly pids: Array<number>
  readonly env?: Record<string, string>
}) {
  const provider = "acp"
  const pids = options.pids
  const acp = AcpProvider.layer({
    provider,
    command: process.execPath,
    args: [acpAgent],
    env: { ACP_FIXTURE_HOME: join(options.home, "sessions"), ...options.env },
    closeGrace: "1 second",
    onSpawn: (pid) => pids.push(pid)
  })
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([AgentStoreMemory.layer, TurnJournalMemory.layer, RuntimeLedgerMemory.layer, acp.pipe(Layer.provideMerge(ProviderRegistry.layer))])
  )
  const collectorLayer = RuntimeCollectorLive.layer({ tickInterval: "3650 days" }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, new FakeCallerProtection().layer])
  )
  const context = yield* Layer.build(
    collectorLayer.pipe(Layer.provideMerge(registryLayer), Layer.provideMerge(ProviderRegistry.layer))
  )
  const registry = Context.get(context, AgentRegistry)
  const collector = Context.get(context, RuntimeCollector)
  const providers = Context.get(context, ProviderRegistry)
  const create = registry.create({ provider, cwd: options.home })
  /** Prompts and waits for the turn's finish, which is watched before the prompt goes out. */
  const promptAndFinish = (agentId: string, text: string) =>
    Effect.gen(function*() {
      const finish = yield* Effect.forkChild(registry.awaitFinish(agentId), { startImmediately: true })
      const receipt = yield* registry.prompt(agentId, text)
      const outcome = yield* bounded(Fiber.join(finish), `the finish of "${text}"`)
      return { receipt, outcome }
    })
  return { registry, collector, providers, create, promptAndFinish, pids }
})

type Setup = Effect.Success<ReturnType<typeof setup>>

/**
 * Prompts "permission", which the fixture holds on a permission request: waits for the finish
 * the request announces, and returns the turn and the one pending permission.
 */
const askPermission = (s: Setup, agentId: string, text = "permission") =>
  Effect.gen(function*() {
    const finish = yield* Effect.forkChild(s.registry.awaitFinish(agentId), { startImmediately: true })
    const receipt = yield* s.registry.prompt(agentId, text)
    const asked = yield* bounded(Fiber.join(finish), "the permission request")
    assert.deepStrictEqual(asked, { kind: "needs-permission", lastReply: null })
    const pending = (yield* s.registry.get(agentId)).pendingPermissions
    assert.strictEqual(pending.length, 1, "the request is pending")
    return { receipt, permission: pending[0]! }
  })

/**
 * Runs a test against a fresh registry in a temp home, then proves that once the test's scope
 * has closed, no agent process group it started is left and the home is gone.
 */
const withAcp = <E>(
  body: (s: Setup, home: string) => Effect.Effect<void, E, Scope.Scope>,
  env?: Record<string, string>
) =>
  Effect.gen(function*() {
    const pids: Array<number> = []
    let home = ""
    yield* Effect.scoped(Effect.gen(function*() {
      home = yield* tempHome
      yield* body(yield* setup({ home, pids, ...(env === undefined ? {} : { env }) }), home)
    }))
    yield* eventually(() => pids.every((pid) => !groupAlive(pid)), "no agent process group is left")
    assert.isFalse(existsSync(home), "the temp home is removed")
  }).pipe(recordingLogs([]))

describe("ACP provider (P6)", () => {
  it.live("a reply is recorded; release ends the process group; the next prompt loads the same session", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const agent = yield* s.create
      const sessionId = agent.persistence!.sessionId
      assert.strictEqual(s.pids.length, 1, "one agent process per session")
      const [first] = s.pids
      assert.isTrue(groupAlive(first!))

      const hello = yield* s.promptAndFinish(agent.agentId, "hello")
      assert.strictEqual(hello.receipt.disposition, "turn")
      assert.strictEqual(hello.outcome.kind, "finished")
      assert.strictEqual(hello.outcome.lastReply, "echo: hello", "the reply is put together from its chunks")
      const helloTurn = yield* s.registry.turn(agent.agentId, hello.receipt.turnId)
      assert.strictEqual(helloTurn.state, "completed")
      assert.strictEqual(helloTurn.reply, "echo: hello", "the turn's reply is the one its end reported")

      // Baseline only: nothing is asked of the agent, and the idle runtime is released.
      const released = yield* s.collector.collectNow(agent.agentId)
      assert.strictEqual(released._tag, "Collected")
      assert.isFalse((yield* s.registry.get(agent.agentId)).resident)
      yield* eventually(() => !groupAlive(first!), "the released agent's process group is gone")

      const again = yield* s.promptAndFinish(agent.agentId, "again")
      assert.isTrue(again.receipt.resumed)
      assert.strictEqual(again.receipt.sessionId, sessionId)
      assert.strictEqual(s.pids.length, 2, "the resume started a new agent process")
      // The conversation the agent replayed while loading is not taken for this turn's reply.
      assert.strictEqual(again.outcome.lastReply, "echo: again")
      const saved = transcript(home, sessionId)
      for (const text of ["echo: hello", "echo: again"]) assert.include(saved, text)

      yield* s.registry.close(agent.agentId)
      yield* eventually(() => s.pids.every((pid) => !groupAlive(pid)), "every agent process group is gone")
    })), 30_000)

  it.live("each request to the agent is a Provider.request span, under what asked for it", () => {
    const { tracer: recording, spans } = recordingTracer()
    const requests = () =>
      spans.filter((span) => span.name === "Provider.request").map((span) => ({
        peer: span.attributes.get("quiesce.peer"),
        method: span.attributes.get("rpc.method"),
        parent: span.parent._tag === "Some" && span.parent.value._tag === "Span" ? span.parent.value.name : undefined
      }))
    return withAcp((s) => Effect.gen(function*() {
      const agent = yield* s.create
      yield* s.promptAndFinish(agent.agentId, "hello")
      const methods = requests().map((request) => request.method)
      for (const method of ["initialize", "session/new", "session/prompt"]) assert.include(methods, method)
      assert.isTrue(requests().every((request) => request.peer === "acp"))
      assert.strictEqual(requests().find((request) => request.method === "session/prompt")?.parent, "Turn.run")
    })).pipe(Effect.withTracer(recording))
  }, 30_000)

  it.live("an agent process that dies on its own is released; the next prompt loads its session", () =>
    withAcp((s) => Effect.gen(function*() {
      const agent = yield* s.create
      yield* s.promptAndFinish(agent.agentId, "hello")
      process.kill(-s.pids[0]!, "SIGKILL")
      for (let i = 0; i < 100 && (yield* s.registry.get(agent.agentId)).resident; i++) yield* Effect.sleep("50 millis")
      assert.isFalse((yield* s.registry.get(agent.agentId)).resident, "the dead runtime is released")
      const again = yield* s.promptAndFinish(agent.agentId, "after the crash")
      assert.isTrue(again.receipt.resumed)
      assert.strictEqual(again.receipt.sessionId, agent.persistence!.sessionId)
      assert.strictEqual(again.outcome.lastReply, "echo: after the crash")
    })), 30_000)

  it.live("an interrupt cancels a slow turn, which ends at once", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const agent = yield* s.create
      const finish = yield* Effect.forkChild(s.registry.awaitFinish(agent.agentId), { startImmediately: true })
      const started = Date.now()
      const receipt = yield* s.registry.prompt(agent.agentId, "slow")
      yield* s.registry.interrupt(agent.agentId)
      const outcome = yield* bounded(Fiber.join(finish), "the interrupted turn's finish")
      assert.isBelow(Date.now() - started, 1500, "the turn did not run its 2 s")
      assert.strictEqual(outcome.kind, "finished")
      assert.strictEqual(outcome.lastReply, "slow cancelled")
      yield* s.registry.awaitIdle(agent.agentId)
      const turn = yield* s.registry.turn(agent.agentId, receipt.turnId)
      assert.strictEqual(turn.state, "interrupted")
      assert.strictEqual(turn.reply, "slow cancelled")
      assert.include(transcript(home, agent.persistence!.sessionId), "slow cancelled")
    })), 30_000)

  it.live("a permission request holds its turn and its runtime until a person allows it; the tool then runs", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const agent = yield* s.create
      const { receipt, permission } = yield* askPermission(s, agent.agentId)
      // The turn waits on the answer, and nothing releases the runtime meanwhile.
      assert.strictEqual((yield* s.registry.turn(agent.agentId, receipt.turnId)).state, "running")
      const held = yield* s.collector.collectNow(agent.agentId)
      assert.strictEqual(held._tag, "Retained")
      assert.include(held._tag === "Retained" ? held.residency.blockers.map((b) => b.kind) : [], "pending-permission")
      assert.isTrue((yield* s.registry.get(agent.agentId)).resident)
      assert.isFalse(existsSync(join(home, "notes.txt")), "the tool waits for the answer")
      assert.match(permission, /^permission-[0-9a-f]{8}$/, "random: an answer never reaches a later process's request")

      const finish = yield* Effect.forkChild(s.registry.awaitFinish(agent.agentId), { startImmediately: true })
      yield* s.registry.respondToPermission(agent.agentId, permission, true)
      const done = yield* bounded(Fiber.join(finish), "the allowed turn's end")
      // The agent's own reply: it chose the one-time allow among the four options it offered.
      assert.deepStrictEqual(done, { kind: "finished", lastReply: "wrote notes.txt (allow-once)" })
      yield* bounded(s.registry.awaitIdle(agent.agentId), "the turn's end")
      const turn = yield* s.registry.turn(agent.agentId, receipt.turnId)
      assert.strictEqual(turn.state, "completed")
      assert.strictEqual(turn.reply, "wrote notes.txt (allow-once)")
      assert.isTrue(existsSync(join(home, "notes.txt")), "the allowed tool ran")
      assert.deepStrictEqual((yield* s.registry.get(agent.agentId)).pendingPermissions, [])
      const repeated = yield* Effect.flip(s.registry.respondToPermission(agent.agentId, permission, true))
      assert.strictEqual(repeated._tag, "PermissionNotPending", "an answered request is not pending")
      assert.strictEqual((yield* s.collector.collectNow(agent.agentId))._tag, "Collected")
    })), 30_000)

  it.live("a denied permission refuses the tool, and the turn ends with the agent's refusal", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const agent = yield* s.create
      const { receipt, permission } = yield* askPermission(s, agent.agentId)
      const finish = yield* Effect.forkChild(s.registry.awaitFinish(agent.agentId), { startImmediately: true })
      yield* s.registry.respondToPermission(agent.agentId, permission, false)
      assert.deepStrictEqual(
        yield* bounded(Fiber.join(finish), "the denied turn's end"),
        { kind: "finished", lastReply: "refused (reject-once)" }
      )
      yield* bounded(s.registry.awaitIdle(agent.agentId), "the turn's end")
      assert.strictEqual((yield* s.registry.turn(agent.agentId, receipt.turnId)).state, "completed")
      assert.isFalse(existsSync(join(home, "notes.txt")), "the refused tool did not run")
      assert.deepStrictEqual((yield* s.registry.get(agent.agentId)).pendingPermissions, [])
      assert.include(transcript(home, agent.persistence!.sessionId), "refused (reject-once)")
    })), 30_000)

  it.live("a request in the name of another session (a subagent's) is shown and answered too", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const agent = yield* s.create
      const { permission } = yield* askPermission(s, agent.agentId, "subagent permission")
      const finish = yield* Effect.forkChild(s.registry.awaitFinish(agent.agentId), { startImmediately: true })
      yield* s.registry.respondToPermission(agent.agentId, permission, true)
      assert.deepStrictEqual(
        yield* bounded(Fiber.join(finish), "the allowed turn's end"),
        { kind: "finished", lastReply: "wrote notes.txt (allow-once)" }
      )
      assert.isTrue(existsSync(join(home, "notes.txt")))
    })), 30_000)

  it.live("a request left open when its turn ends is answered cancelled: it holds nothing", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const agent = yield* s.create
      const receipt = yield* s.registry.prompt(agent.agentId, "orphan permission")
      yield* bounded(s.registry.awaitIdle(agent.agentId), "the turn's end")
      const turn = yield* s.registry.turn(agent.agentId, receipt.turnId)
      assert.strictEqual(turn.state, "completed")
      assert.strictEqual(turn.reply, "asked and ended")
      assert.deepStrictEqual((yield* s.registry.get(agent.agentId)).pendingPermissions, [])
      yield* eventually(
        () => transcript(home, agent.persistence!.sessionId).includes("orphan answered cancelled"),
        "the agent has the answer"
      )
      assert.strictEqual((yield* s.collector.collectNow(agent.agentId))._tag, "Collected")
    })), 30_000)

  it.live("a close while a permission is pending names it among what it ended; nothing is left pending, and the next prompt resumes", () =>
    withAcp((s) => Effect.gen(function*() {
      const agent = yield* s.create
      const { receipt, permission } = yield* askPermission(s, agent.agentId)
      const ended = (yield* s.registry.close(agent.agentId)).map((found) => found.kind)
      assert.includeMembers(ended, ["pending-permission", "foreground-turn"])
      yield* bounded(s.registry.awaitIdle(agent.agentId), "the turn's end")
      assert.notStrictEqual((yield* s.registry.turn(agent.agentId, receipt.turnId)).state, "running")
      const closed = yield* s.registry.get(agent.agentId)
      assert.isFalse(closed.resident)
      assert.deepStrictEqual(closed.pendingPermissions, [])
      assert.strictEqual((yield* Effect.flip(s.registry.respondToPermission(agent.agentId, permission, true)))._tag, "PermissionNotPending")
      const again = yield* s.promptAndFinish(agent.agentId, "after the close")
      assert.isTrue(again.receipt.resumed)
      assert.strictEqual(again.outcome.lastReply, "echo: after the close")
    })), 30_000)

  it.live("an agent that dies while asking leaves nothing pending: its runtime is released and an answer is not pending", () =>
    withAcp((s) => Effect.gen(function*() {
      const agent = yield* s.create
      const { receipt, permission } = yield* askPermission(s, agent.agentId)
      process.kill(-s.pids[0]!, "SIGKILL")
      yield* bounded(s.registry.awaitIdle(agent.agentId), "the turn's end")
      for (let i = 0; i < 100 && (yield* s.registry.get(agent.agentId)).resident; i++) yield* Effect.sleep("50 millis")
      const dead = yield* s.registry.get(agent.agentId)
      assert.isFalse(dead.resident, "the dead runtime is released")
      assert.deepStrictEqual(dead.pendingPermissions, [])
      assert.notStrictEqual((yield* s.registry.turn(agent.agentId, receipt.turnId)).state, "running")
      assert.strictEqual((yield* Effect.flip(s.registry.respondToPermission(agent.agentId, permission, true)))._tag, "PermissionNotPending")
    })), 30_000)

  it.live("an interrupt answers a pending permission cancelled, and the turn ends interrupted", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const agent = yield* s.create
      const { receipt } = yield* askPermission(s, agent.agentId)
      const finish = yield* Effect.forkChild(s.registry.awaitFinish(agent.agentId), { startImmediately: true })
      yield* s.registry.interrupt(agent.agentId)
      assert.deepStrictEqual(
        yield* bounded(Fiber.join(finish), "the interrupted turn's end"),
        { kind: "finished", lastReply: "permission cancelled" }
      )
      yield* bounded(s.registry.awaitIdle(agent.agentId), "the turn's end")
      assert.strictEqual((yield* s.registry.turn(agent.agentId, receipt.turnId)).state, "interrupted")
      assert.deepStrictEqual((yield* s.registry.get(agent.agentId)).pendingPermissions, [])
      assert.isFalse(existsSync(join(home, "notes.txt")))
      assert.strictEqual((yield* s.collector.collectNow(agent.agentId))._tag, "Collected")
    })), 30_000)

  it.live("an agent without loadSession is never released, and cannot be resumed", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const agent = yield* s.create
      assert.isNull(agent.persistence, "no handle: the conversation could not be loaded again")
      assert.strictEqual((yield* s.promptAndFinish(agent.agentId, "hi")).outcome.lastReply, "echo: hi")
      assert.strictEqual((yield* s.collector.collectNow(agent.agentId))._tag, "Retained")
      assert.isTrue((yield* s.registry.get(agent.agentId)).resident)

      const client = yield* s.providers.get("acp")
      const error = yield* Effect.flip(client.resume({ provider: "acp", sessionId: "unknown" }, {
        agentId: "agent-direct",
        cwd: home,
        labels: {},
        runtimeMarker: freshMarker(),
        onEvent: () => {}
      }))
      assert.strictEqual(error._tag, "ProviderFailed")
      assert.include(error.message, "agent cannot resume sessions")
      assert.strictEqual(s.pids.length, 2)
      yield* eventually(() => !groupAlive(s.pids[1]!), "the failed resume's process group is gone")
    }), { ACP_FIXTURE_NO_LOAD: "1" }), 30_000)

  it.live("a session cannot steer; a turn succeeds with its reply, and a cancelled one says it was cut short", () =>
    withAcp((s, home) => Effect.gen(function*() {
      const client = yield* s.providers.get("acp")
      const runtimeMarker = freshMarker()
      const session = yield* client.create({ agentId: "agent-direct", cwd: home, labels: {}, runtimeMarker, onEvent: () => {} })
      assert.isUndefined(session.steer, "ACP has no way to add input to a running turn")
      assert.strictEqual(markerOf(session.pid!), runtimeMarker, "the agent process carries the runtime's marker")
      const hi = yield* bounded(Effect.flatten(session.startTurn("hi", "turn-1")), "the turn's end")
      assert.deepStrictEqual(hi, { reply: "echo: hi", interrupted: false })
      const slow = yield* session.startTurn("slow", "turn-2")
      yield* session.interrupt
      assert.deepStrictEqual(yield* bounded(slow, "the cancelled turn's end"), { reply: "slow cancelled", interrupted: true })
      yield* session.close
    })), 30_000)

  it.live("a failing agent start is a typed error, with the agent's last words, and leaves no process", () =>
    withAcp((s) => Effect.gen(function*() {
      // Without a home the fixture exits before answering `initialize`.
      const error = yield* Effect.flip(s.create)
      assert.strictEqual(error._tag, "ProviderFailed")
      assert.include(error.message, "ACP_FIXTURE_HOME is required")
      assert.strictEqual(s.pids.length, 1)
      yield* eventually(() => !groupAlive(s.pids[0]!), "the agent's process group is gone")
    }), { ACP_FIXTURE_HOME: "" }), 30_000)

  it.live("closing the layer scope ends every agent process group, turns in flight included", () =>
    withAcp((s) => Effect.gen(function*() {
      const agents = yield* Effect.forEach(Array.from({ length: 3 }), () => s.create)
      yield* s.registry.prompt(agents[0]!.agentId, "slow")
      assert.strictEqual(s.pids.length, 3)
      assert.isTrue(s.pids.every(groupAlive))
      // The scope closes with the turn still running; `withAcp` checks that every group is gone.
    })), 30_000)
})

describe("ACP permission answers", () => {
  const option = (optionId: string, kind: PermissionOptionKind) => ({ optionId, name: optionId, kind })
  const everyKind = [
    option("a-always", "allow_always"),
    option("a-once", "allow_once"),
    option("r-always", "reject_always"),
    option("r-once", "reject_once")
  ]
  const request = (options: ReadonlyArray<ReturnType<typeof option>>) => ({
    sessionId: "session-1",
    toolCall: { toolCallId: "call-1" },
    options: [...options]
  })

  it("permit and deny pick the one-time option of their kind, else the lasting one", () => {
    assert.deepStrictEqual(outcomeFor(everyKind, true), { outcome: "selected", optionId: "a-once" })
    assert.deepStrictEqual(outcomeFor(everyKind, false), { outcome: "selected", optionId: "r-once" })
    const lasting = [option("a-always", "allow_always"), option("r-always", "reject_always")]
    assert.deepStrictEqual(outcomeFor(lasting, true), { outcome: "selected", optionId: "a-always" })
    assert.deepStrictEqual(outcomeFor(lasting, false), { outcome: "selected", optionId: "r-always" })
    // Without a reject option, deny is `cancelled`; without an allow option there is no way to allow.
    assert.deepStrictEqual(outcomeFor([option("a-once", "allow_once")], false), { outcome: "cancelled" })
    assert.isUndefined(outcomeFor([option("r-once", "reject_once")], true))
  })

  it.effect("a request is pending until answered; an allow the agent does not offer fails and leaves it pending", () =>
    Effect.gen(function*() {
      const events: Array<SessionEvent> = []
      const permissions = makeOpenPermissions("acp", (event) => events.push(event))
      const answered = permissions.ask(request([option("r-once", "reject_once")]), new AbortController().signal)
      assert.strictEqual(events.length, 1)
      const [asked] = events
      const id = asked?._tag === "PermissionRequested" ? asked.id : assert.fail("a request is reported")
      const refused = yield* Effect.flip(permissions.answer(id, true))
      assert.strictEqual(refused._tag, "ProviderFailed")
      assert.isTrue(refused.refused)
      assert.include(refused.message, "offers no option to allow")
      assert.strictEqual(events.length, 1, "still pending")
      yield* permissions.answer(id, false)
      assert.deepStrictEqual(yield* Effect.promise(() => answered), { outcome: { outcome: "selected", optionId: "r-once" } })
      assert.deepStrictEqual(events.slice(1), [{ _tag: "PermissionResolved", id }])
      // Answered once: a second answer changes nothing.
      yield* permissions.answer(id, true)
      assert.strictEqual(events.length, 2)
    }))

  it.effect("a withdrawn request and a cancelled turn's requests resolve `cancelled`", () =>
    Effect.gen(function*() {
      const events: Array<SessionEvent> = []
      const permissions = makeOpenPermissions("acp", (event) => events.push(event))
      const withdraw = new AbortController()
      const withdrawn = permissions.ask(request(everyKind), withdraw.signal)
      const first = permissions.ask(request(everyKind), new AbortController().signal)
      const second = permissions.ask(request(everyKind), new AbortController().signal)
      withdraw.abort()
      assert.deepStrictEqual(yield* Effect.promise(() => withdrawn), { outcome: { outcome: "cancelled" } })
      permissions.cancelAll()
      assert.deepStrictEqual(yield* Effect.promise(() => first), { outcome: { outcome: "cancelled" } })
      assert.deepStrictEqual(yield* Effect.promise(() => second), { outcome: { outcome: "cancelled" } })
      const requested = events.flatMap((event) => event._tag === "PermissionRequested" ? [event.id] : [])
      const resolved = events.flatMap((event) => event._tag === "PermissionResolved" ? [event.id] : [])
      assert.strictEqual(new Set(requested).size, 3, "each request has an id of its own")
      assert.sameMembers(resolved, requested)
    }))
})
