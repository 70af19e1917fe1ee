/**
 * The Claude Code provider against a scripted stream-json peer (test/fixtures/fakeClaude.mjs),
 * spawned as a real process: session ids, turns, interrupts, resume, permissions, the safety
 * probe (P2) and that no process is left behind. Time is real here, so waits poll with a bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Logger, References } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { SessionEvent, StopAnswer } from "../../../../src/domain/provider.ts"
import * as ClaudeProvider from "../../../../src/layers/providers/claude/ClaudeProvider.ts"
import { groupAlive } from "../../../../src/platform/processGroups.ts"
import { ProviderRegistry } from "../../../../src/services/ProviderRegistry.ts"
import { markerOf, sessionConfig } from "../../../support/runtimeMarker.ts"

const fakeClaude = join(import.meta.dirname, "../../../fixtures/fakeClaude.mjs")

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-claude-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const eventually = <E>(condition: Effect.Effect<boolean, E>, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      if (yield* condition) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

/** A veto's reason; a permit fails the test. */
const vetoed = (answer: StopAnswer): string => answer.canStop ? assert.fail("the probe permitted") : answer.reason

/** Whether the probe permits, for polling. */
const permits = <E>(probe: Effect.Effect<StopAnswer, E>) => Effect.map(probe, (answer) => answer.canStop)

/** Runs an effect (and the fibers it starts) logging into `lines`: every log call's message, as JSON. */
const logInto = (lines: Array<string>) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.provide(Logger.layer([Logger.make((options) => void lines.push(JSON.stringify(options.message)))])),
    Effect.provideService(References.MinimumLogLevel, "Debug")
  )

/** Runs an effect and returns its exit and what it logged. */
const logged = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const exit = yield* Effect.exit(logInto(lines)(effect))
    return { exit, lines }
  })

/** Polls the probe until it fails (a false right after a turn is the CLI still settling), and says why. */
const probeFailure = (probe: Effect.Effect<StopAnswer, { readonly _tag: string; readonly message: string }>) =>
  Effect.gen(function*() {
    let failure: string | undefined
    yield* eventually(
      Effect.map(Effect.exit(probe), (exit) => {
        failure = failureTag(exit)
        return failure !== undefined
      }),
      "the probe fails"
    )
    return failure
  })

const failureTag = <A>(exit: Exit.Exit<A, { readonly _tag: string; readonly message: string }>) => {
  if (Exit.isSuccess(exit)) return undefined
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason?._tag === "Fail" ? `${reason.error._tag}: ${reason.error.message}` : "defect"
}

const setup = Effect.fnUntraced(function*(env: Readonly<Record<string, string>> = {}) {
  const dir = yield* tempDir
  const logFile = join(dir, "claude.log")
  const pids: Array<number> = []
  const events: Array<SessionEvent> = []
  const options: ClaudeProvider.ClaudeProviderOptions = {
    command: process.execPath,
    args: [fakeClaude, ...ClaudeProvider.defaultArgs],
    env: { FAKE_CLAUDE_LOG: logFile, ...env },
    requestTimeout: "2 seconds",
    rosterTimeout: "300 millis",
    closeGrace: "1 second",
    onSpawn: (pid) => pids.push(pid)
  }
  const client = yield* ClaudeProvider.makeClaudeClient(options)
  const config = sessionConfig(dir, (event) => void events.push(event))
  /** Each start's argv, then the lines it was sent, in order. */
  const received = () => existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n").filter((line) => line !== "") : []
  return { client, config, options, pids, events, received, dir }
})

const replies = (events: ReadonlyArray<SessionEvent>) =>
  events.flatMap((event) => event._tag === "Reply" ? [event.text] : [])

describe("claude provider: sessions and turns", () => {
  it.live("the session id is chosen at start, confirmed by system/init, and saved once a turn opened", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, received } = yield* setup()
      const session = yield* client.create(config)
      const argv: ReadonlyArray<unknown> = JSON.parse(received()[0]!)
      const requested = argv[argv.indexOf("--session-id") + 1]
      assert.isString(requested)
      assert.isNull(yield* session.persistence, "nothing is saved before the first turn")
      yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      assert.deepStrictEqual(yield* session.persistence, { provider: "claude", sessionId: String(requested) })
      yield* session.close
    })))

  it.live("a turn ends on result and reports its reply; output is activity", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup()
      const session = yield* client.create(config)
      assert.isDefined(session.steer, "Claude can steer")
      assert.isFalse(yield* session.steer("nothing to steer into", "turn-0"))
      const end = yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      assert.deepStrictEqual(end, { reply: "echo: hello", interrupted: false }, "the turn succeeds with its reply")
      assert.deepStrictEqual(replies(events), ["echo: hello"])
      assert.isTrue(events.some((event) => event._tag === "Activity"))
      yield* session.close
    })))

  it.live("interrupt ends a running turn; the turn vetoes until then", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, received } = yield* setup()
      const session = yield* client.create(config)
      const done = yield* session.startTurn("hold", "turn-1")
      assert.strictEqual(vetoed(yield* session.canStopRuntime!), "turn turn-1 is in flight")
      assert.isDefined(session.steer)
      assert.isTrue(yield* session.steer("and this", "turn-1"))
      yield* eventually(Effect.sync(() => received().some((line) => line.includes("and this"))), "the steer reaches the CLI")
      yield* session.interrupt
      // The CLI ends an interrupted turn with an error result: the turn ends, cut short, with what it said so far.
      assert.deepStrictEqual(yield* done, { reply: "working", interrupted: true })
      assert.isTrue(received().some((line) => line.includes(`"subtype":"interrupt"`)))
      yield* session.close
    })))

  it.live("an error result fails the turn; the session goes on", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup()
      const session = yield* client.create(config)
      const exit = yield* Effect.exit(Effect.flatten(session.startTurn("fail", "turn-1")))
      assert.strictEqual(failureTag(exit), "ProviderFailed: success: API Error: 500 overloaded")
      assert.deepStrictEqual(yield* Effect.flatten(session.startTurn("hello", "turn-2")), { reply: "echo: hello", interrupted: false })
      assert.deepStrictEqual(replies(events), ["API Error: 500 overloaded", "echo: hello"])
      yield* session.close
    })))

  it.live("resume passes --resume with the saved id and keeps it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, received } = yield* setup()
      const session = yield* client.create(config)
      yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      const handle = yield* session.persistence
      assert.isNotNull(handle)
      yield* session.close
      const resumed = yield* client.resume(handle!, config)
      assert.deepStrictEqual(yield* resumed.persistence, handle, "known before any turn")
      assert.strictEqual((yield* Effect.flatten(resumed.startTurn("again", "turn-2"))).reply, "echo: again")
      assert.deepStrictEqual(yield* resumed.persistence, handle)
      const starts = received().filter((line) => line.startsWith("["))
      assert.strictEqual(starts.length, 2)
      const argv: ReadonlyArray<unknown> = JSON.parse(starts[1]!)
      assert.strictEqual(argv[argv.indexOf("--resume") + 1], handle!.sessionId)
      assert.notInclude(argv, "--session-id")
      yield* resumed.close
    })))

  it.live("a permission request surfaces as PermissionRequested, vetoes, and is answered", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events, received } = yield* setup()
      const session = yield* client.create(config)
      const done = yield* session.startTurn("permission", "turn-1")
      yield* eventually(Effect.sync(() => events.some((event) => event._tag === "PermissionRequested")), "the request")
      const requested = events.find((event) => event._tag === "PermissionRequested")
      const permissionId = requested?._tag === "PermissionRequested" ? requested.id : ""
      // The turn is checked first; it is the turn that waits for the answer.
      assert.strictEqual(vetoed(yield* session.canStopRuntime!), "turn turn-1 is in flight")
      yield* session.respondToPermission(permissionId, true)
      assert.deepStrictEqual(yield* done, { reply: "allowed", interrupted: false })
      assert.deepStrictEqual(replies(events), ["allowed"])
      assert.isTrue(events.some((event) => event._tag === "PermissionResolved"))
      assert.isTrue(received().some((line) => line.includes(`"behavior":"allow"`)))
      yield* session.close
    })))

  it.live("an interrupt withdraws a pending permission (control_cancel_request)", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup()
      const session = yield* client.create(config)
      const done = yield* session.startTurn("permission", "turn-1")
      yield* eventually(Effect.sync(() => events.some((event) => event._tag === "PermissionRequested")), "the request")
      yield* session.interrupt
      yield* done
      assert.isTrue(events.some((event) => event._tag === "PermissionResolved"))
      yield* eventually(permits(session.canStopRuntime!), "the probe permits")
      yield* session.close
    })))

  it.live("malformed lines are logged, not fatal", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup()
      const lines: Array<string> = []
      // The line reader is forked by create; it logs where create was told to.
      const session = yield* logInto(lines)(client.create(config))
      assert.strictEqual((yield* Effect.flatten(session.startTurn("garbage", "turn-1"))).reply, "echo: garbage")
      assert.isAtLeast(lines.filter((line) => line.includes("Claude stream-json protocol error")).length, 1)
      assert.deepStrictEqual(replies(events), ["echo: garbage"])
      yield* eventually(permits(session.canStopRuntime!), "the probe permits")
      yield* session.close
    })))

  it.live("a CLI that refuses to start fails the session with what it said", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, pids } = yield* setup({ FAKE_CLAUDE_REFUSE: "cannot be used with root/sudo privileges" })
      const exit = yield* Effect.exit(client.create(config))
      assert.include(failureTag(exit), "ProviderFailed: claude exited with code 1: cannot be used with root/sudo privileges")
      yield* eventually(Effect.sync(() => pids.every((pid) => !groupAlive(pid))), "no process is left")
    })))

  it.live("the layer registers the client under its provider id", () =>
    Effect.gen(function*() {
      const registry = yield* ProviderRegistry
      assert.deepStrictEqual(yield* registry.providers, ["claude"])
      assert.strictEqual((yield* registry.get("claude")).provider, "claude")
    }).pipe(Effect.provide(ClaudeProvider.layer({ command: process.execPath }).pipe(Layer.provideMerge(ProviderRegistry.layer)))))
})

describe("claude provider: the runtime safety probe (P2)", () => {
  it.live("an empty roster permits; a live task vetoes; its report vetoes until a later turn consumed it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup({ FAKE_CLAUDE_WAKE_MS: "800" })
      const session = yield* client.create(config)
      const probe = session.canStopRuntime!
      yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      yield* eventually(permits(probe), "an idle runtime is permitted")
      assert.strictEqual((yield* Effect.flatten(session.startTurn("job t1 500", "turn-2"))).reply, "started t1")
      const reasons = new Set<string>()
      const logLines = new Set<string>()
      // Poll through the job's end, its report and the turn the report wakes, collecting reasons.
      yield* eventually(
        Effect.gen(function*() {
          const { exit, lines } = yield* logged(probe)
          for (const line of lines) if (line.includes("Claude runtime is busy")) logLines.add(line)
          if (Exit.isSuccess(exit) && !exit.value.canStop) reasons.add(exit.value.reason)
          return Exit.isSuccess(exit) && exit.value.canStop
        }),
        "the probe permits once the woken turn has ended"
      )
      const all = [...reasons].join("\n")
      assert.include(all, "background task t1 is running")
      assert.include(all, "the completion report of background task t1 is not yet delivered to the agent")
      // The debug log says the same.
      assert.include([...logLines].join("\n"), "background task t1 is running")
      assert.include(replies(events), "noted t1", "the report woke the agent")
      yield* session.close
    })))

  it.live("a CLI that never reported its version retains, with a reason", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config } = yield* setup({ FAKE_CLAUDE_VERSION: "none", FAKE_CLAUDE_NO_ROSTER: "1" })
      const session = yield* client.create(config)
      yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      assert.include(yield* probeFailure(session.canStopRuntime!), "RuntimeProbeFailed: the CLI has not reported its version yet")
      yield* session.close
    })))

  it.live("a CLI that sends no roster after the probe's initialize fails the probe, never permits", () =>
    Effect.scoped(Effect.gen(function*() {
      // 2.1.332 is known to report its roster, and none was ever seen: the cached roster is the empty fresh one.
      const { client, config } = yield* setup({ FAKE_CLAUDE_NO_ROSTER: "1" })
      const session = yield* client.create(config)
      yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      assert.include(yield* probeFailure(session.canStopRuntime!), "RuntimeProbeFailed: no roster within")
      yield* session.close
    })))

  it.live("an old CLI retains until it sends a roster", () =>
    Effect.scoped(Effect.gen(function*() {
      const silent = yield* setup({ FAKE_CLAUDE_VERSION: "2.1.220", FAKE_CLAUDE_NO_ROSTER: "1" })
      const old = yield* silent.client.create(silent.config)
      yield* Effect.flatten(old.startTurn("hello", "turn-1"))
      assert.include(yield* probeFailure(old.canStopRuntime!), "predates 2.1.292 and has sent no roster")
      yield* old.close

      // The same version that answers the probe's initialize with a roster is believed.
      const reporting = yield* setup({ FAKE_CLAUDE_VERSION: "2.1.220" })
      const session = yield* reporting.client.create(reporting.config)
      yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      yield* eventually(permits(session.canStopRuntime!), "the probe permits")
      yield* session.close
    })))

  it.live("an unparseable version retains, with a reason", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config } = yield* setup({ FAKE_CLAUDE_VERSION: "nightly", FAKE_CLAUDE_NO_ROSTER: "1" })
      const session = yield* client.create(config)
      yield* Effect.flatten(session.startTurn("hello", "turn-1"))
      assert.include(yield* probeFailure(session.canStopRuntime!), `unparseable CLI version "nightly"`)
      yield* session.close
    })))
})

describe("claude provider: processes", () => {
  it.live("close ends the CLI's group and the background shells it started in groups of their own", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, pids } = yield* setup()
      const session = yield* client.create(config)
      yield* Effect.flatten(session.startTurn("job long 60000", "turn-1"))
      // Right after the turn the CLI may still be settling; then the live roster vetoes, naming the task.
      yield* eventually(
        Effect.map(session.canStopRuntime!, (answer) => !answer.canStop && answer.reason === "background task long is running"),
        "the live roster vetoes"
      )
      const [cli, ...shells] = pids
      assert.strictEqual(session.pid, cli)
      assert.strictEqual(shells.length, 1, "the job's group was reported")
      assert.isTrue(groupAlive(shells[0]!))
      // Everything the runtime starts carries its marker, the CLI and the shells it detached alike.
      assert.strictEqual(markerOf(cli!), config.runtimeMarker)
      assert.strictEqual(markerOf(shells[0]!), config.runtimeMarker)
      yield* session.close
      yield* eventually(Effect.sync(() => !groupAlive(cli!) && !groupAlive(shells[0]!)), "both groups are gone")
    })))

  it.live("a CLI that dies leaves no background shell; the provider's scope ends every process", () =>
    Effect.gen(function*() {
      const pids: Array<number> = []
      yield* Effect.scoped(Effect.gen(function*() {
        const { client, config, pids: started } = yield* setup()
        const dying = yield* client.create(config)
        yield* Effect.flatten(dying.startTurn("job one 60000", "turn-1"))
        process.kill(-dying.pid!, "SIGKILL")
        yield* dying.exited!
        const kept = yield* client.create(config)
        yield* Effect.flatten(kept.startTurn("job two 60000", "turn-1"))
        pids.push(...started)
      }))
      assert.strictEqual(pids.length, 4, "two CLIs and two job groups")
      yield* eventually(Effect.sync(() => pids.every((pid) => !groupAlive(pid))), "every group is gone")
    }))
})
