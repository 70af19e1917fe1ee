/**
 * The plugin provider against real plugin processes: the shell reference provider (P7, P8) and a
 * misbehaving fixture. Time is real here (processes run), so waits poll with a bound.
 */
import * as RuntimeCollectorLive from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type SessionConfig, type SessionEvent, stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import { FakeCallerProtection } from "../../../src/testing/FakeRuntimes.ts"
import { groupAlive } from "../../../src/platform/processGroups.ts"
import * as PluginProvider from "../../../src/layers/providers/plugin/PluginProvider.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as AgentStoreMemory from "../../../src/layers/store/AgentStoreMemory.ts"
import * as RuntimeLedgerMemory from "../../../src/layers/store/RuntimeLedgerMemory.ts"
import * as TurnJournalMemory from "../../../src/layers/store/TurnJournalMemory.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { RuntimeCollector, type RuntimeCollectorOptions } from "../../../src/services/RuntimeCollector.ts"
import { type LogEntry, recordingLogs } from "../../support/logs.ts"
import { freshMarker, markerOf } from "../../support/runtimeMarker.ts"

const shellPlugin = join(import.meta.dirname, "../../../plugins/shell/main.ts")
const misbehavingPlugin = join(import.meta.dirname, "../../fixtures/misbehavingPlugin.mjs")

const tempHome = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-plugin-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Polls until the condition holds, at most `tries` times 50 ms apart. */
const eventually = (condition: () => boolean | Effect.Effect<boolean>, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      const result = condition()
      if (typeof result === "boolean" ? result : yield* result) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

const setup = Effect.fnUntraced(function*(options: {
  readonly home: string
  readonly env?: Record<string, string>
  readonly script?: string
  readonly provider?: string
  readonly collector?: RuntimeCollectorOptions
}) {
  const provider = options.provider ?? "shell"
  const pids: Array<number> = []
  const plugin = PluginProvider.layer({
    provider,
    plugin: { command: process.execPath, args: [options.script ?? shellPlugin], env: options.env },
    home: options.home,
    closeGrace: "1 second",
    onSpawn: (pid) => pids.push(pid)
  })
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([AgentStoreMemory.layer, TurnJournalMemory.layer, RuntimeLedgerMemory.layer, plugin.pipe(Layer.provideMerge(ProviderRegistry.layer))])
  )
  const collectorLayer = RuntimeCollectorLive.layer({ tickInterval: "3650 days", ...options.collector }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, new FakeCallerProtection().layer])
  )
  const context = yield* Layer.build(collectorLayer.pipe(Layer.provideMerge(registryLayer)))
  const registry = Context.get(context, AgentRegistry)
  const collector = Context.get(context, RuntimeCollector)
  const create = registry.create({ provider, cwd: options.home })
  return { registry, collector, create, pids }
})

/** A session config of its own (a fresh marker), its events recorded into `events`. */
const directConfig = (cwd: string, events: Array<SessionEvent> = []): SessionConfig => ({
  agentId: "direct",
  cwd,
  labels: {},
  runtimeMarker: freshMarker(),
  onEvent: (event) => void events.push(event)
})

/** A client of the misbehaving plugin answering `version` on connect, its received lines logged to `log`. */
const misbehavingClient = (home: string, version: number, log: string, pids: Array<number> = []) =>
  PluginProvider.makePluginClient({
    provider: "misbehaving",
    plugin: {
      command: process.execPath,
      args: [misbehavingPlugin],
      env: { MISBEHAVING_PROTOCOL: String(version), MISBEHAVING_LOG: log }
    },
    home,
    closeGrace: "1 second",
    onSpawn: (pid) => pids.push(pid)
  })

/** The JSON lines the plugin received, decoded far enough to read a field. */
const receivedLines = (log: string): ReadonlyArray<Readonly<Record<string, unknown>>> =>
  readFileSync(log, "utf8").split("\n").filter((line) => line !== "").map((line): Readonly<Record<string, unknown>> => {
    const value: unknown = JSON.parse(line)
    return typeof value === "object" && value !== null ? { ...value } : {}
  })

const protocolErrors = (entries: ReadonlyArray<LogEntry>) =>
  entries.filter((entry) => entry.message === "Plugin protocol error").map((entry) => String(entry.annotations["error"]))

const replies = (events: ReadonlyArray<SessionEvent>) => events.flatMap((event) => event._tag === "Reply" ? [event.text] : [])

/**
 * Writes a minimal plugin into `dir` that offers the safety query and answers every one with
 * `canStopResult` (its `sessionId` filled in), and returns its path.
 */
const scriptedSafetyPlugin = (dir: string, canStopResult: Readonly<Record<string, unknown>>): string => {
  const path = join(dir, "scriptedSafetyPlugin.mjs")
  writeFileSync(
    path,
    `import { createInterface } from "node:readline"
const send = (message) => process.stdout.write(JSON.stringify(message) + "\\n")
const sessionId = "scripted-1"
const capabilities = ["session.can_stop_runtime"]
const canStopResult = ${JSON.stringify(canStopResult)}
createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line)
  switch (message.type) {
    case "connect":
      send({ type: "connected", requestId: message.requestId, protocolVersion: 2, provider: "scripted", capabilities })
      break
    case "session.open":
      send({ type: "session.opened", requestId: message.requestId, sessionId, capabilities })
      break
    case "session.can_stop_runtime":
      send({ type: "request.completed", requestId: message.requestId, result: { sessionId, ...canStopResult } })
      break
    case "session.close":
      send({ type: "request.completed", requestId: message.requestId })
      process.exit(0)
  }
})
`
  )
  return path
}

describe("plugin provider: the runtime safety query (P7)", () => {
  for (
    const [answer, expected] of [
      ["true", "Collected"],
      ["false", "Retained"],
      ["error", "Failed"],
      ["wrong-session", "Failed"],
      ["none", "Collected"]
    ] as const
  ) {
    it.live(`a plugin answering ${answer} gives ${expected}`, () =>
      Effect.scoped(Effect.gen(function*() {
        const home = yield* tempHome
        const s = yield* setup({ home, env: { QUIESCE_SHELL_CAN_STOP: answer } })
        const agent = yield* s.create
        const outcome = yield* s.collector.collectNow(agent.agentId)
        assert.strictEqual(outcome._tag, expected)
        if (answer === "false" && outcome._tag === "Retained") {
          assert.strictEqual(outcome.residency.state, "vetoed")
          assert.strictEqual(outcome.residency.veto?.outcome, "vetoed")
          assert.strictEqual(outcome.residency.veto?.message, "QUIESCE_SHELL_CAN_STOP=false", "the plugin's reason is kept")
        }
        if (expected === "Failed" && outcome._tag === "Failed") {
          assert.strictEqual(outcome.error._tag, "RuntimeProbeFailed")
        }
      })), 20_000)
  }

  it.live("the session itself answers false while its turn runs, though the plugin would permit", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const client = yield* PluginProvider.makePluginClient({
        provider: "shell",
        plugin: { command: process.execPath, args: [shellPlugin], env: { QUIESCE_SHELL_CAN_STOP: "true" } },
        home,
        closeGrace: "1 second"
      })
      const config = directConfig(home)
      const session = yield* client.create(config)
      assert.strictEqual(markerOf(session.pid!), config.runtimeMarker, "the plugin carries the runtime's marker")
      const probe = session.canStopRuntime!
      assert.deepStrictEqual(yield* probe, stopPermitted, "idle: the plugin is asked and permits")
      const turn = yield* session.startTurn("sleep 1; echo done", "turn-1")
      assert.deepStrictEqual(yield* probe, stopVetoed("turn turn-1 is running"), "a turn in flight answers false locally")
      assert.deepStrictEqual(yield* turn, { reply: "done\n" }, "the turn succeeds with the command's output")
      assert.deepStrictEqual(yield* probe, stopPermitted)
      yield* session.close
    })), 20_000)

  it.live("a running background job vetoes with a reason naming the job's command", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const client = yield* PluginProvider.makePluginClient({
        provider: "shell",
        plugin: { command: process.execPath, args: [shellPlugin] },
        home,
        closeGrace: "1 second"
      })
      const session = yield* client.create(directConfig(home))
      const probe = session.canStopRuntime!
      assert.deepStrictEqual(yield* probe, stopPermitted, "nothing running: the plugin permits")
      const started = yield* Effect.flatten(session.startTurn("sleep 30 &", "turn-1"))
      assert.match(started.reply ?? "", /^started job 1 /)
      assert.deepStrictEqual(yield* probe, stopVetoed("background job 1 `sleep 30`"))
      yield* session.close
    })), 20_000)

  for (
    const [reply, expected] of [
      [{ canStop: false }, "scripted reports work a release would lose"],
      [{ canStop: false, reason: "3 uploads pending" }, "3 uploads pending"],
      [{ canStop: false, reason: "  " }, "scripted reports work a release would lose"],
      [{ canStop: false, reason: "\nupload\u001b[31m running\nsecond line" }, "upload [31m running"],
      [{ canStop: false, reason: "x".repeat(5000) }, `${"x".repeat(299)}…`]
    ] as const
  ) {
    it.live(`a plugin veto ${"reason" in reply ? `keeps its reason, in one bounded line (${JSON.stringify(reply.reason.slice(0, 12))})` : "without a reason gets the generic one"}`, () =>
      Effect.scoped(Effect.gen(function*() {
        const home = yield* tempHome
        const client = yield* PluginProvider.makePluginClient({
          provider: "scripted",
          plugin: { command: process.execPath, args: [scriptedSafetyPlugin(home, reply)] },
          home,
          closeGrace: "1 second"
        })
        const session = yield* client.create(directConfig(home))
        assert.deepStrictEqual(yield* session.canStopRuntime!, { canStop: false, reason: expected })
        yield* session.close
      })), 20_000)
  }

  it.live("a session with a turn in flight answers false without asking the plugin", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      // The plugin would permit, but the turn is still running.
      const s = yield* setup({ home, env: { QUIESCE_SHELL_CAN_STOP: "true" } })
      const agent = yield* s.create
      yield* s.registry.prompt(agent.agentId, "sleep 2")
      const outcome = yield* s.collector.collectNow(agent.agentId)
      assert.strictEqual(outcome._tag, "Retained")
    })), 20_000)
})

describe("plugin provider: turns", () => {
  it.live("the shell plugin does not steer: its sessions have no steer; a failed command fails the turn", () => {
    const entries: Array<LogEntry> = []
    return Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const client = yield* PluginProvider.makePluginClient({
        provider: "shell",
        plugin: { command: process.execPath, args: [shellPlugin] },
        home,
        closeGrace: "1 second"
      })
      const events: Array<SessionEvent> = []
      const session = yield* client.create(directConfig(home, events))
      assert.isUndefined(session.steer, "no session.steer capability, so nothing to steer with")
      assert.deepStrictEqual(yield* Effect.flatten(session.startTurn("echo one", "turn-1")), { reply: "one\n" })
      const failed = yield* Effect.exit(Effect.flatten(session.startTurn("echo oops; exit 3", "turn-2")))
      assert.isTrue(Exit.isFailure(failed))
      assert.include(Exit.isFailure(failed) ? String(failed.cause) : "", "exited with code 3")
      // The session goes on, and no event of its turns was refused.
      assert.deepStrictEqual(yield* Effect.flatten(session.startTurn("echo two", "turn-3")), { reply: "two\n" })
      assert.deepStrictEqual(replies(events), ["one\n", "two\n"])
      assert.deepStrictEqual(protocolErrors(entries), [])
      yield* session.close
    })).pipe(recordingLogs(entries))
  }, 20_000)

  it.live("version 2: a turn event naming a turn that is not running, or none, is a protocol error and ignored", () => {
    const entries: Array<LogEntry> = []
    return Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const log = join(home, "received.log")
      const client = yield* misbehavingClient(home, 2, log)
      const events: Array<SessionEvent> = []
      const session = yield* client.create(directConfig(home, events))
      assert.isUndefined(session.steer)
      // The plugin sends another turn's completion and failure and a completion naming no turn first.
      assert.deepStrictEqual(yield* Effect.flatten(session.startTurn("anything", "turn-7")), { reply: "still fine" })
      assert.deepStrictEqual(replies(events), ["still fine"], "no ignored completion was reported as a reply")
      const errors = protocolErrors(entries)
      assert.include(errors, "turn.completed for turn turn-nobody-runs, which is not running")
      assert.include(errors, "turn.failed for turn turn-nobody-runs, which is not running")
      assert.include(errors, "turn.completed without a turnId (protocol 2 requires one)")

      const received = receivedLines(log)
      const connect = received.find((line) => line["type"] === "connect")
      assert.strictEqual(connect?.["protocolVersion"], 1, "a version-1 plugin still finds the version it checks")
      assert.deepStrictEqual(connect?.["protocolVersions"], [1, 2])
      const prompt = received.find((line) => line["type"] === "session.prompt")
      assert.strictEqual(prompt?.["turnId"], "turn-7", "the prompt names the daemon's turn")
      assert.strictEqual(prompt?.["mode"], "turn")
      yield* session.close
    })).pipe(recordingLogs(entries))
  }, 20_000)

  it.live("a version-1 plugin (no turn ids in its events) still runs turns", () => {
    const entries: Array<LogEntry> = []
    return Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const client = yield* misbehavingClient(home, 1, join(home, "received.log"))
      const events: Array<SessionEvent> = []
      const session = yield* client.create(directConfig(home, events))
      assert.isUndefined(session.steer, "no session.steer capability")
      assert.deepStrictEqual(yield* Effect.flatten(session.startTurn("anything", "turn-1")), { reply: "still fine" })
      assert.deepStrictEqual(yield* Effect.flatten(session.startTurn("again", "turn-2")), { reply: "still fine" })
      assert.deepStrictEqual(replies(events), ["still fine", "still fine"])
      // Only the connect-time garbage is refused; no turn event is.
      assert.isFalse(protocolErrors(entries).some((error) => error.startsWith("turn.")), "its turn events are taken")
      yield* session.close
    })).pipe(recordingLogs(entries))
  }, 20_000)

  it.live("a plugin answering a version the daemon does not speak fails the session, and its process ends", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const pids: Array<number> = []
      const client = yield* misbehavingClient(home, 3, join(home, "received.log"), pids)
      const error = yield* Effect.flip(client.create(directConfig(home)))
      assert.strictEqual(error._tag, "ProviderFailed")
      assert.include(error.message, "plugin speaks protocol 3; this daemon speaks 1, 2")
      assert.strictEqual(pids.length, 1)
      yield* eventually(() => !groupAlive(pids[0]!), "the plugin's process group is gone")
    })), 20_000)
})

describe("plugin provider: protocol hygiene (P7)", () => {
  it.live("malformed, oversized, unknown and unsolicited messages are logged and never fatal", () => {
    const entries: Array<LogEntry> = []
    return Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const s = yield* setup({ home, script: misbehavingPlugin, provider: "misbehaving" })
      const agent = yield* s.create
      const receipt = yield* s.registry.prompt(agent.agentId, "anything")
      assert.strictEqual(receipt.disposition, "turn")
      yield* s.registry.awaitIdle(agent.agentId)
      const errors = entries.filter((entry) => entry.message === "Plugin protocol error").map((e) => String(e.annotations["error"]))
      assert.isTrue(errors.some((e) => e.includes("undecodable")), "malformed JSON")
      assert.isTrue(errors.some((e) => e.includes("exceeds")), "oversized line")
      assert.isTrue(errors.some((e) => e.includes("unknown request")), "unsolicited reply")
      assert.isAtLeast(errors.length, 4)
    })).pipe(recordingLogs(entries))
  }, 20_000)
})

describe("shell reference provider end to end (P8)", () => {
  it.live("a background job vetoes release; its report restarts the idle period; release ends the group; resume keeps the transcript", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const s = yield* setup({ home, collector: { idlePeriod: "600 millis" } })
      const agent = yield* s.create
      const sessionId = agent.persistence!.sessionId
      yield* s.registry.prompt(agent.agentId, "echo first")
      yield* s.registry.awaitIdle(agent.agentId)
      yield* s.registry.prompt(agent.agentId, "sleep 1.5 &")
      yield* s.registry.awaitIdle(agent.agentId)
      yield* Effect.sleep("700 millis")
      const vetoed = yield* s.collector.sweep
      assert.deepStrictEqual(vetoed.collected, [], "a running job vetoes the release")
      const explained = yield* s.collector.explain(agent.agentId)
      assert.strictEqual(explained.state, "vetoed")
      assert.strictEqual(explained.veto?.outcome, "vetoed")
      assert.strictEqual(explained.veto?.message, "background job 1 `sleep 1.5`", "the veto names the job")

      // The job ends and its completion report reaches the daemon.
      yield* eventually(
        () => readFileSync(join(home, "shell", `${sessionId}.json`), "utf8").includes("exited with code 0"),
        "the job's report is in the transcript"
      )
      yield* Effect.sleep("200 millis")
      assert.deepStrictEqual((yield* s.collector.sweep).collected, [], "a fresh idle period starts after the report")
      // A full idle period after that, a sweep releases it.
      const collectedBySweep: Array<string> = []
      yield* eventually(
        () =>
          Effect.map(s.collector.sweep, (report) => {
            collectedBySweep.push(...report.collected.map((c) => c.sessionId))
            return collectedBySweep.length > 0
          }),
        "a sweep releases the runtime"
      )
      assert.deepStrictEqual(collectedBySweep, [sessionId])
      assert.isFalse((yield* s.registry.get(agent.agentId)).resident)

      const receipt = yield* s.registry.prompt(agent.agentId, "echo second")
      assert.isTrue(receipt.resumed)
      assert.strictEqual(receipt.sessionId, sessionId)
      yield* s.registry.awaitIdle(agent.agentId)
      const transcript = readFileSync(join(home, "shell", `${sessionId}.json`), "utf8")
      for (const text of ["echo first", "sleep 1.5 &", "echo second"]) assert.include(transcript, text)
    })), 30_000)

  it.live("50 runtimes with background jobs are released and leave no process behind", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const s = yield* setup({ home })
      const agents = yield* Effect.forEach(Array.from({ length: 50 }), () => s.create, { concurrency: 8 })
      yield* Effect.forEach(agents, (agent) => s.registry.prompt(agent.agentId, "sleep 30 &"), { concurrency: 8 })
      const pids = [...s.pids]
      assert.strictEqual(pids.length, 50, "one plugin process group per runtime")
      assert.isTrue(pids.every(groupAlive))
      yield* Effect.forEach(agents, (agent) => s.registry.close(agent.agentId), { concurrency: 8, discard: true })
      yield* eventually(() => pids.every((pid) => !groupAlive(pid)), "every plugin process group is gone", 100)
    })), 60_000)

  it.live("closing the host's scope ends every plugin process group, jobs included", () =>
    Effect.gen(function*() {
      const pids = yield* Effect.scoped(Effect.gen(function*() {
        const dir = yield* tempHome
        const s = yield* setup({ home: dir })
        const agents = yield* Effect.forEach(Array.from({ length: 3 }), () => s.create)
        yield* Effect.forEach(agents, (agent) => s.registry.prompt(agent.agentId, "sleep 30 &"), { discard: true })
        assert.isTrue(s.pids.every(groupAlive))
        return [...s.pids]
      }))
      assert.strictEqual(pids.length, 3)
      yield* eventually(() => pids.every((pid) => !groupAlive(pid)), "every group is gone after scope closure")
    }), 30_000)

  it.live("a plugin that dies on its own is released; the next prompt resumes its session", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const s = yield* setup({ home })
      const agent = yield* s.create
      yield* s.registry.prompt(agent.agentId, "echo before the crash")
      yield* s.registry.awaitIdle(agent.agentId)
      process.kill(-s.pids[0]!, "SIGKILL")
      yield* eventually(
        () => s.registry.get(agent.agentId).pipe(Effect.map((view) => !view.resident), Effect.orDie),
        "the dead runtime is released"
      )
      const receipt = yield* s.registry.prompt(agent.agentId, "echo after the crash", { wait: true })
      assert.isTrue(receipt.resumed)
      assert.strictEqual(receipt.sessionId, agent.persistence!.sessionId)
      assert.include(receipt.output ?? "", "after the crash")
    })), 30_000)

  it.live("work a prompt put in the background by itself vetoes the release until it ends", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const s = yield* setup({ home })
      const agent = yield* s.create
      yield* s.registry.prompt(agent.agentId, "nohup sh -c 'sleep 1.5' >/dev/null 2>&1 & echo started", { wait: true })
      yield* s.registry.awaitIdle(agent.agentId)
      const early = yield* s.collector.collectNow(agent.agentId)
      assert.strictEqual(early._tag === "Retained" && early.residency.state, "vetoed")
      yield* eventually(
        () => Effect.map(s.collector.collectNow(agent.agentId), (outcome) => outcome._tag === "Collected").pipe(Effect.orDie),
        "the stray process ended and the runtime is released"
      )
    })), 30_000)

  it.live("a plugin that cannot resume sessions gives no handle, so its runtime is never released", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempHome
      const s = yield* setup({ home, script: misbehavingPlugin, provider: "misbehaving" })
      const agent = yield* s.create
      assert.isNull(agent.persistence)
      const outcome = yield* s.collector.collectNow(agent.agentId)
      assert.strictEqual(outcome._tag === "Retained" && outcome.residency.state, "not-resumable")
    })), 20_000)
})

