/**
 * The Codex app-server provider against a scripted JSON-RPC peer (test/fixtures/fakeCodexAppServer.mjs),
 * spawned as a real process: the safety probe (P3) — permit, vetoes by terminal, cursor and pending
 * server request, failures on an unsupported method or a malformed result — turns, and that closing
 * the session leaves no process behind. Time is real here, so waits poll with a bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Logger } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type SessionEvent, type StopAnswer, stopPermitted } from "../../../../src/domain/provider.ts"
import { makeCodexClient } from "../../../../src/layers/providers/codex/CodexProvider.ts"
import { groupAlive } from "../../../../src/platform/processGroups.ts"
import { markerOf, sessionConfig } from "../../../support/runtimeMarker.ts"

const fakeCodex = join(import.meta.dirname, "../../../fixtures/fakeCodexAppServer.mjs")

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-codex-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const eventually = (condition: () => boolean, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      if (condition()) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

const setup = Effect.fnUntraced(function*(extraEnv: Readonly<Record<string, string>> = {}) {
  const dir = yield* tempDir
  const stateFile = join(dir, "state.json")
  const logFile = join(dir, "methods.log")
  const setState = (state: Record<string, unknown>) => writeFileSync(stateFile, JSON.stringify(state))
  const methodsSeen = () => existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n").filter((line) => line !== "") : []
  setState({})
  const pids: Array<number> = []
  const events: Array<SessionEvent> = []
  const client = yield* makeCodexClient({
    command: process.execPath,
    args: [fakeCodex, "app-server"],
    env: { FAKE_CODEX_STATE_FILE: stateFile, FAKE_CODEX_LOG: logFile, FAKE_CODEX_CHILD: "1", ...extraEnv },
    requestTimeout: "1 second",
    closeGrace: "1 second",
    onSpawn: (pid) => pids.push(pid)
  })
  const config = sessionConfig(dir, (event) => void events.push(event))
  return { client, config, setState, methodsSeen, pids, events }
})

/** A veto's reason; a permit fails the test. */
const vetoed = (answer: StopAnswer): string => answer.canStop ? assert.fail("the probe permitted") : answer.reason

const probeFailure = <A>(exit: Exit.Exit<A, { readonly _tag: string }>) => {
  if (Exit.isSuccess(exit)) return undefined
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason?._tag === "Fail" ? reason.error._tag : "defect"
}

describe("codex provider: the runtime safety probe (P3)", () => {
  it.live("permits with no terminals; vetoes on a terminal or a next cursor", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, setState, methodsSeen } = yield* setup()
      const session = yield* client.create(config)
      assert.isDefined(session.canStopRuntime)
      const probe = session.canStopRuntime!
      assert.deepStrictEqual(yield* probe, stopPermitted)
      const seen = methodsSeen()
      assert.includeMembers(seen, ["initialize", "initialized", "thread/start", "thread/loaded/list", "thread/backgroundTerminals/list"])
      for (
        const [state, expected] of [
          [
            { terminals: [{ processId: "p1", itemId: "i1", command: "npm run dev", cwd: "/", osPid: 7, cpuPercent: null, rssKb: null }] },
            /has a background terminal: npm run dev$/
          ],
          [{ terminalsCursor: "page-2" }, /terminal listing has a further page/],
          [{ loadedCursor: "page-2" }, /^the loaded-thread listing has a further page$/],
          [{}, undefined]
        ] as const
      ) {
        setState(state)
        const answer = yield* probe
        if (expected === undefined) assert.deepStrictEqual(answer, stopPermitted, JSON.stringify(state))
        else assert.match(vetoed(answer), expected, JSON.stringify(state))
      }
      yield* session.close
    })))

  for (
    const [name, state] of [
      ["a server answering -32600 for backgroundTerminals", { terminalsReply: "unsupported" }],
      ["a malformed backgroundTerminals result", { terminalsReply: "malformed" }],
      ["a malformed loaded-thread result", { loadedReply: "malformed" }],
      ["a server lacking thread/loaded/list", { loadedReply: "unsupported" }],
      ["a server that never answers", { loadedReply: "silent" }]
    ] as const
  ) {
    it.live(`${name} is a RuntimeProbeFailed`, () =>
      Effect.scoped(Effect.gen(function*() {
        const { client, config, setState } = yield* setup()
        const session = yield* client.create(config)
        setState(state)
        assert.strictEqual(probeFailure(yield* Effect.exit(session.canStopRuntime!)), "RuntimeProbeFailed")
        yield* session.close
      })))
  }

  it.live("a pending server→client request vetoes without listing; answering it permits again", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events, methodsSeen } = yield* setup()
      const session = yield* client.create(config)
      assert.strictEqual((yield* Effect.flatten(session.startTurn("ask to run a command", "turn-1"))).reply, "asked")
      const requested = events.find((event) => event._tag === "PermissionRequested")
      assert.isDefined(requested)
      const permissionId = requested?._tag === "PermissionRequested" ? requested.id : ""
      const before = methodsSeen().length
      assert.strictEqual(vetoed(yield* session.canStopRuntime!), `permission ${permissionId} is pending`)
      assert.notInclude(methodsSeen().slice(before), "thread/loaded/list")
      assert.strictEqual(methodsSeen().length, before)
      yield* session.respondToPermission(permissionId, true)
      yield* eventually(() => methodsSeen().includes("response:srv-1:accept"), "the server has the answer")
      assert.isTrue(events.some((event) => event._tag === "PermissionResolved"))
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      yield* session.close
    })))

  for (
    const [method, allowed, denied] of [
      ["item/commandExecution/requestApproval", "accept", "decline"],
      ["item/fileChange/requestApproval", "accept", "decline"],
      ["execCommandApproval", "approved", `{"decision":{"denied":{"rejection":"Denied through Quiesce"}}}`],
      ["applyPatchApproval", "approved", `{"decision":{"denied":{"rejection":"Denied through Quiesce"}}}`],
      [
        "item/permissions/requestApproval",
        `{"permissions":{"network":{"enabled":true}},"scope":"turn"}`,
        `{"permissions":{},"scope":"turn"}`
      ]
    ] as const
  ) {
    it.live(`${method} is answered in its own response shape, allowed and denied`, () =>
      Effect.scoped(Effect.gen(function*() {
        const { client, config, events, methodsSeen } = yield* setup()
        const session = yield* client.create(config)
        for (const [allow, expected, n] of [[true, allowed, 1], [false, denied, 2]] as const) {
          yield* Effect.flatten(session.startTurn(`ask-${method} please`, `turn-${n}`))
          const requested = events.filter((event) => event._tag === "PermissionRequested").at(-1)
          assert.match(vetoed(yield* session.canStopRuntime!), /^permission string:srv-\d+ is pending$/)
          yield* session.respondToPermission(requested?._tag === "PermissionRequested" ? requested.id : "", allow)
          yield* eventually(() => methodsSeen().some((line) => line.startsWith(`response:srv-${n}:`)), "the server has the answer")
          assert.include(methodsSeen(), `response:srv-${n}:${expected}`)
        }
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
        yield* session.close
      })))
  }

  it.live("a server request the adapter does not handle is refused at once, with a warning naming it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, methodsSeen } = yield* setup()
      const warnings: Array<string> = []
      const capture = Logger.layer([
        Logger.make((options) => {
          if (options.logLevel === "Warn") warnings.push(JSON.stringify(options.message))
        })
      ])
      // The session's reader logs with what its creation was given.
      const session = yield* client.create(config).pipe(Effect.provide(capture))
      for (const [n, method] of ["item/tool/requestUserInput", "mcpServer/elicitation/request", "item/tool/call"].entries()) {
        // The peer ends the turn only once its request is answered.
        const end = yield* Effect.flatten(session.startTurn(`request-${method} now`, `turn-${n + 1}`))
        assert.deepStrictEqual(end, { reply: "answered", interrupted: false })
        assert.include(
          methodsSeen(),
          `response:srv-${n + 1}:{"error":{"code":-32601,"message":"not supported by Quiesce"}}`
        )
        assert.isTrue(warnings.some((line) => line.includes(method)), `a warning names ${method}`)
      }
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      yield* session.close
    })))

  it.live("a subagent still running after its turn vetoes without listing; its completion permits", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events, methodsSeen } = yield* setup()
      const session = yield* client.create(config)
      assert.strictEqual((yield* Effect.flatten(session.startTurn("spawn a helper", "turn-1"))).reply, "spawned")
      assert.deepStrictEqual(events.filter((event) => event._tag === "SubagentStarted"), [{ _tag: "SubagentStarted", id: "agent-1" }])
      const before = methodsSeen().length
      assert.strictEqual(vetoed(yield* session.canStopRuntime!), "subagent agent-1 has not finished")
      assert.strictEqual(methodsSeen().length, before)
      assert.strictEqual((yield* Effect.flatten(session.startTurn("reap it", "turn-2"))).reply, "reaped")
      assert.deepStrictEqual(events.filter((event) => event._tag === "SubagentFinished"), [{ _tag: "SubagentFinished", id: "agent-1" }])
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      yield* session.close
    })))

  it.live("a running turn vetoes without listing; its end permits again", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events, methodsSeen } = yield* setup()
      const session = yield* client.create(config)
      const done = yield* session.startTurn("hold on", "turn-1")
      const before = methodsSeen().length
      assert.strictEqual(vetoed(yield* session.canStopRuntime!), "turn turn-1 is running")
      assert.strictEqual(methodsSeen().length, before)
      assert.isDefined(session.steer, "Codex can steer")
      assert.isTrue(yield* session.steer("also this", "turn-1"))
      assert.include(methodsSeen(), "turn/steer")
      yield* session.interrupt
      assert.deepStrictEqual(yield* done, { reply: "interrupted", interrupted: true }, "Codex reports the turn cut short")
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      assert.deepStrictEqual(events.filter((event) => event._tag === "Reply").at(-1), { _tag: "Reply", text: "interrupted" })
      yield* session.close
    })))

  it.live("a late completion of an earlier turn does not end the current one", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup()
      const session = yield* client.create(config)
      assert.strictEqual((yield* Effect.flatten(session.startTurn("hello", "turn-1"))).reply, "echo: hello")
      const replied = events.filter((event) => event._tag === "Reply").length
      // The peer completes turn-1 again, before and after answering turn/start for turn-2, which runs on.
      const done = yield* session.startTurn("stale completions arrive", "turn-2")
      const steer = session.steer
      assert.isDefined(steer)
      // Steering needs the turn's id, and its response follows both stale completions on the wire.
      let steered = false
      yield* eventually(() => steered, "the turn can be steered", 40).pipe(
        Effect.raceFirst(Effect.forever(Effect.tap(steer("go on", "turn-2"), (ok) => Effect.sync(() => (steered = ok)))))
      )
      assert.strictEqual(events.filter((event) => event._tag === "Reply").length, replied, "no completion was taken for this turn")
      assert.strictEqual(vetoed(yield* session.canStopRuntime!), "turn turn-2 is running", "the current turn still runs")
      yield* session.interrupt
      // Its own end, not a stale one: the reply it gave and the interruption.
      assert.deepStrictEqual(yield* done, { reply: "interrupted", interrupted: true })
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      yield* session.close
    })))

  it.live("a turn ends on turn/completed and reports the reply", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup()
      const session = yield* client.create(config)
      assert.isDefined(session.steer)
      assert.isFalse(yield* session.steer("nothing to steer into", "turn-0"))
      const end = yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      assert.deepStrictEqual(end, { reply: "echo: hello", interrupted: false })
      assert.deepStrictEqual(events.filter((event) => event._tag === "Reply").at(-1), { _tag: "Reply", text: "echo: hello" })
      yield* session.close
    })))

  it.live("a failed turn fails with the server's error; the session goes on", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config } = yield* setup()
      const session = yield* client.create(config)
      const exit = yield* Effect.exit(Effect.flatten(session.startTurn("fail please", "turn-1")))
      assert.strictEqual(probeFailure(exit), "ProviderFailed")
      assert.include(Exit.isFailure(exit) ? String(exit.cause) : "", "model refused")
      assert.strictEqual((yield* Effect.flatten(session.startTurn("hello", "turn-2"))).reply, "echo: hello")
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      yield* session.close
    })))
})

describe("codex provider: persistence and processes", () => {
  it.live("a server that refuses to start fails the session with the reason it printed", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config } = yield* setup({ FAKE_CODEX_REFUSE: `approval_policy = "untrusted" is no longer supported` })
      const exit = yield* Effect.exit(client.create(config))
      assert.strictEqual(probeFailure(exit), "ProviderFailed")
      assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), `Error: approval_policy = "untrusted" is no longer supported`)
    })))

  it.live("the thread id is the persistence handle, and resuming opens it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, methodsSeen } = yield* setup()
      const session = yield* client.create(config)
      const handle = yield* session.persistence
      assert.deepStrictEqual(handle, { provider: "codex", sessionId: "thread-1" })
      yield* session.close
      const resumed = yield* client.resume(handle!, config)
      assert.deepStrictEqual(yield* resumed.persistence, handle)
      assert.include(methodsSeen(), "thread/resume")
      yield* resumed.close
    })))

  it.live("close ends the whole process group, children included", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, pids } = yield* setup()
      const session = yield* client.create(config)
      assert.strictEqual(pids.length, 1)
      assert.strictEqual(session.pid, pids[0])
      assert.isTrue(groupAlive(pids[0]!))
      assert.strictEqual(markerOf(pids[0]!), config.runtimeMarker, "the server carries the runtime's marker")
      yield* session.close
      yield* eventually(() => !groupAlive(pids[0]!), "the group is gone")
    })))

  for (
    const [name, end] of [
      ["close", (session: { readonly close: Effect.Effect<void, unknown> }) => session.close],
      // A server killed outright (OOM, crash) cannot end its commands: the adapter does.
      ["the server's own death", (session: { readonly pid?: number | undefined }) =>
        Effect.sync(() => process.kill(-session.pid!, "SIGKILL"))]
    ] as const
  ) {
    it.live(`${name} ends the commands the server started in process groups of their own`, () =>
      Effect.scoped(Effect.gen(function*() {
        const { client, config, pids } = yield* setup()
        const session = yield* client.create(config)
        assert.strictEqual((yield* Effect.flatten(session.startTurn("detach a dev server", "turn-1"))).reply, "detached")
        assert.strictEqual(pids.length, 2, "the command's group was reported")
        const [server, command] = pids
        assert.notStrictEqual(command, server)
        assert.isTrue(groupAlive(command!))
        yield* Effect.orDie(end(session))
        yield* eventually(() => !groupAlive(server!) && !groupAlive(command!), "both groups are gone")
      })))
  }

  it.live("the provider's scope ends every process it started", () =>
    Effect.gen(function*() {
      const pids: Array<number> = []
      yield* Effect.scoped(Effect.gen(function*() {
        const { client, config, pids: started } = yield* setup()
        yield* client.create(config)
        yield* client.create(config)
        pids.push(...started)
      }))
      assert.strictEqual(pids.length, 2)
      yield* eventually(() => pids.every((pid) => !groupAlive(pid)), "every group is gone")
    }))
})
