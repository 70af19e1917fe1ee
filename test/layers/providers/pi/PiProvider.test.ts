/**
 * The Pi provider against a scripted peer speaking Pi's RPC wire format (test/fixtures/fakePiRpc.mjs),
 * spawned as a real process: the safety probe's veto and permit (P5), turns, and that closing the
 * session leaves no process behind. Time is real here, so waits poll with a bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type SessionEvent, type StopAnswer, stopPermitted } from "../../../../src/domain/provider.ts"
import { makePiClient } from "../../../../src/layers/providers/pi/PiProvider.ts"
import { missingSettlement, type PiVariant } from "../../../../src/layers/providers/pi/safety.ts"
import { groupAlive } from "../../../../src/platform/processGroups.ts"
import { descendantGroups } from "../../../../src/platform/detachedGroups.ts"
import { type LogEntry, recordingLogs } from "../../../support/logs.ts"
import { freshMarker, markedStray, markerOf, sessionConfig } from "../../../support/runtimeMarker.ts"

const fakePi = join(import.meta.dirname, "../../../fixtures/fakePiRpc.mjs")

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-pi-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const eventuallyEffect = <E>(condition: Effect.Effect<boolean, E>, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      if (yield* condition) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

const eventually = (condition: () => boolean, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      if (condition()) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

/** A veto's reason; a permit fails the test. */
const vetoed = (answer: StopAnswer): string => answer.canStop ? assert.fail("the probe permitted") : answer.reason

/** Whether the probe permits, for polling. */
const permits = <E>(probe: Effect.Effect<StopAnswer, E>) => Effect.map(probe, (answer) => answer.canStop)

const setup = Effect.fnUntraced(function*(
  variant: PiVariant,
  extraArgs: ReadonlyArray<string> = [],
  extraEnv: Readonly<Record<string, string>> = {}
) {
  const dir = yield* tempDir
  const stateFile = join(dir, "state.json")
  const setState = (state: Record<string, unknown>) => writeFileSync(stateFile, JSON.stringify(state))
  setState({})
  const pids: Array<number> = []
  const events: Array<SessionEvent> = []
  const client = yield* makePiClient({
    provider: variant,
    variant,
    command: process.execPath,
    args: [fakePi, "--mode", "rpc", ...extraArgs],
    env: {
      FAKE_PI_VARIANT: variant,
      FAKE_PI_STATE_FILE: stateFile,
      FAKE_PI_SESSION_DIR: dir,
      FAKE_PI_GATE: join(dir, "gate"),
      FAKE_PI_CHILD: "1",
      ...extraEnv
    },
    requestTimeout: "1 second",
    closeGrace: "1 second",
    onSpawn: (pid) => pids.push(pid)
  })
  const config = sessionConfig(dir, (event) => void events.push(event))
  return { client, config, setState, pids, events, dir }
})

describe("pi provider: the runtime safety probe (P5)", () => {
  it.live("pi: permits when idle, vetoes on streaming / compacting / pending messages, retains on missing fields", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, setState } = yield* setup("pi")
      const session = yield* client.create(config)
      assert.isDefined(session.canStopRuntime)
      const probe = session.canStopRuntime!
      assert.deepStrictEqual(yield* probe, stopPermitted)
      for (
        const [state, expected] of [
          [{ isStreaming: true }, "isStreaming is true"],
          [{ isCompacting: true }, "isCompacting is true"],
          [{ pendingMessageCount: 2 }, "2 message(s) pending"],
          [{ pendingMessageCount: null }, "get_state reports no pending message count"],
          [{ isStreaming: null }, "isStreaming is undefined"],
          [{}, undefined]
        ] as const
      ) {
        setState(state)
        const answer = yield* probe
        if (expected === undefined) assert.deepStrictEqual(answer, stopPermitted, JSON.stringify(state))
        else assert.strictEqual(vetoed(answer), expected, JSON.stringify(state))
      }
      yield* session.close
    })))

  it.live("omp: needs isSettled === true and hasPendingAsyncWork === false", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, setState } = yield* setup("omp")
      const session = yield* client.create(config)
      const probe = session.canStopRuntime!
      assert.deepStrictEqual(yield* probe, stopPermitted)
      for (
        const [state, expected] of [
          [{ isSettled: false }, /^isSettled is false$/],
          [{ hasPendingAsyncWork: true }, /^hasPendingAsyncWork is true$/],
          [{ isSettled: null }, /^isSettled is /],
          [{ hasPendingAsyncWork: null }, /^hasPendingAsyncWork is /],
          [{ queuedMessageCount: 1 }, /message\(s\) pending$/],
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

  for (const reply of ["malformed", "fail", "silent", "no-id"] as const) {
    it.live(`a ${reply} get_state answer is a RuntimeProbeFailed`, () =>
      Effect.scoped(Effect.gen(function*() {
        const { client, config, setState } = yield* setup("pi")
        const session = yield* client.create(config)
        setState({ __reply: reply })
        const exit = yield* Effect.exit(session.canStopRuntime!)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")
          assert.strictEqual(error?._tag === "Fail" ? error.error._tag : undefined, "RuntimeProbeFailed")
        }
        yield* session.close
      })))
  }

  it.live("a turn in flight vetoes without asking the CLI; its end permits again", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events, setState } = yield* setup("pi")
      const session = yield* client.create(config)
      const done = yield* session.startTurn("hold on", "turn-1")
      // Even a CLI claiming idle is not believed while the adapter's turn runs.
      setState({ isStreaming: false })
      assert.strictEqual(vetoed(yield* session.canStopRuntime!), "turn turn-1 is in flight")
      assert.isDefined(session.steer, "Pi can steer")
      assert.isTrue(yield* session.steer("also this", "turn-1"))
      yield* session.interrupt
      assert.strictEqual((yield* done).reply, "aborted", "the aborted turn ends with what it said")
      setState({})
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      assert.deepStrictEqual(events.filter((event) => event._tag === "Reply"), [{ _tag: "Reply", text: "aborted" }])
      yield* session.close
    })))

  it.live("a turn ends on agent_end and reports the reply", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup("pi")
      const session = yield* client.create(config)
      assert.isDefined(session.steer)
      assert.isFalse(yield* session.steer("nothing to steer into", "turn-0"))
      assert.deepStrictEqual(yield* Effect.flatten(session.startTurn("hello", "turn-1")), { reply: "echo: hello" })
      assert.deepStrictEqual(events.filter((event) => event._tag === "Reply"), [{ _tag: "Reply", text: "echo: hello" }])
      assert.isTrue(events.some((event) => event._tag === "Activity"))
      yield* session.close
    })))
})

describe("pi provider: extension dialogs and failures", () => {
  it.live("an extension dialog is cancelled at once, with a warning; a notification is only activity", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, events } = yield* setup("pi")
      const logs: Array<LogEntry> = []
      // The session's reader logs with what its creation was given.
      const session = yield* recordingLogs(logs)(client.create(config))
      // The peer's run ends only once its select dialog is answered; the reply is the answer.
      const answer = JSON.stringify({ type: "extension_ui_response", id: "ui-2", cancelled: true })
      assert.strictEqual((yield* Effect.flatten(session.startTurn("dialog please", "turn-1"))).reply, answer)
      assert.deepStrictEqual(events.filter((event) => event._tag === "Reply"), [{ _tag: "Reply", text: answer }])
      assert.isTrue(logs.some((entry) => entry.level === "Warn" && entry.message.includes("select")))
      assert.isFalse(logs.some((entry) => entry.message.includes("notify")), "a notification is not answered")
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      yield* session.close
    })))

  it.live("a CLI that refuses to start fails the session with what it printed on stderr", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config } = yield* setup("pi", [], { FAKE_PI_REFUSE: "Error: no model configured" })
      const exit = yield* Effect.exit(client.create(config))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "exited with code 1: starting | Error: no model configured")
    })))

  it.live("close ends a running command's own process group too, and reports it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, pids } = yield* setup("pi")
      const session = yield* client.create(config)
      const done = yield* session.startTurn("command that runs on", "turn-1")
      yield* eventually(() => descendantGroups(pids[0]!).length === 1, "the command runs")
      yield* session.close
      yield* Effect.exit(done)
      const [cli, ...commands] = pids
      assert.strictEqual(session.pid, cli)
      assert.strictEqual(commands.length, 1, "the command's group was noted at close and reported")
      yield* eventually(() => !groupAlive(cli!) && !groupAlive(commands[0]!), "both groups are gone")
    })))
})

describe("omp provider: what the real OMP 18.2 showed", () => {
  it.live("a run ending with isTerminal: false ends the turn but vetoes until OMP's own run ends terminal", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, dir, events } = yield* setup("omp")
      const session = yield* client.create(config)
      const replies = () => events.filter((event) => event._tag === "Reply")
      // The foreground turn ends with the run, though OMP still owes the job's result.
      assert.strictEqual((yield* Effect.flatten(session.startTurn("async job", "turn-1"))).reply, "started: async job")
      assert.deepStrictEqual(replies(), [{ _tag: "Reply", text: "started: async job" }])
      assert.strictEqual(
        vetoed(yield* session.canStopRuntime!),
        "the last run ended non-terminal: a continuation is scheduled",
        "a scheduled continuation vetoes"
      )
      // The job ends: OMP starts a run of its own to deliver the result.
      const before = events.length
      writeFileSync(join(dir, "gate"), "")
      yield* eventually(() => events.length > before, "OMP's own run starts")
      assert.strictEqual(
        vetoed(yield* session.canStopRuntime!),
        "the CLI is running a continuation of its own",
        "a run OMP started on its own vetoes"
      )
      writeFileSync(join(dir, "gate.2"), "")
      yield* eventually(() => replies().length === 2, "OMP's own run ends")
      assert.deepStrictEqual(replies()[1], { _tag: "Reply", text: "job result" })
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted, "settled after the terminal agent_end")
      yield* session.close
    })))

  it.live("a prompt during a run OMP started itself is queued as a follow-up, not rejected", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, dir, events } = yield* setup("omp")
      const session = yield* client.create(config)
      yield* Effect.flatten(session.startTurn("async job", "turn-1"))
      const before = events.length
      writeFileSync(join(dir, "gate"), "")
      yield* eventually(() => events.length > before, "OMP's own run starts")
      const done = yield* session.startTurn("next", "turn-2")
      writeFileSync(join(dir, "gate.2"), "")
      yield* done
      yield* eventually(
        () => events.some((event) => event._tag === "Reply" && event.text === "echo: next"),
        "the queued prompt ran"
      )
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      yield* session.close
    })))

  it.live("OMP's second response failing an accepted prompt fails the turn", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config } = yield* setup("omp")
      const session = yield* client.create(config)
      const done = yield* session.startTurn("late-fail please", "turn-1")
      const exit = yield* Effect.exit(done)
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "the model is unavailable")
      assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted, "no turn is left in flight")
      yield* session.close
    })))

  it.live("OMP 18.2's get_state (no settlement fields) keeps the runtime, saying why", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, setState } = yield* setup("omp")
      const session = yield* client.create(config)
      setState({ isSettled: null, hasPendingAsyncWork: null })
      const logs: Array<LogEntry> = []
      const answer = yield* recordingLogs(logs)(session.canStopRuntime!)
      assert.strictEqual(vetoed(answer), missingSettlement)
      // It names no work, only that none can be ruled out: a shutdown says so apart from interrupted work.
      assert.isTrue(!answer.canStop && answer.workUnknown === true)
      assert.strictEqual(vetoed(yield* recordingLogs(logs)(session.canStopRuntime!)), missingSettlement)
      const reasons = logs.map((entry) => [entry.level, entry.annotations["reason"]])
      // Warned once per session, then kept at debug.
      assert.deepStrictEqual(reasons, [["Warn", missingSettlement], ["Debug", missingSettlement]])
      yield* session.close
    })))
})

describe("pi provider: persistence and processes", () => {
  it.live("the session file is the persistence handle, and resuming opens it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, dir } = yield* setup("pi")
      const session = yield* client.create(config)
      const handle = yield* session.persistence
      assert.isNotNull(handle)
      assert.strictEqual(handle!.provider, "pi")
      assert.strictEqual(handle!.data?.["sessionFile"], join(dir, `${handle!.sessionId}.jsonl`))
      yield* session.close
      const resumed = yield* client.resume(handle!, config)
      assert.deepStrictEqual(yield* resumed.persistence, handle)
      yield* resumed.close
    })))

  it.live("without a session file there is no handle, so the runtime is never released", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config } = yield* setup("pi", ["--no-session"])
      const session = yield* client.create(config)
      assert.isNull(yield* session.persistence)
      yield* session.close
    })))

  it.live("close ends the whole process group, children included", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config, pids } = yield* setup("pi")
      const session = yield* client.create(config)
      assert.strictEqual(pids.length, 1)
      assert.strictEqual(session.pid, pids[0])
      assert.isTrue(groupAlive(pids[0]!))
      assert.strictEqual(markerOf(pids[0]!), config.runtimeMarker, "the CLI carries the runtime's marker")
      yield* session.close
      yield* eventually(() => !groupAlive(pids[0]!), "the group is gone")
    })))

  it.live("a process carrying the runtime's marker outside its tree vetoes; another runtime's does not", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, config } = yield* setup("pi")
      const session = yield* client.create(config)
      const probe = session.canStopRuntime!
      assert.deepStrictEqual(yield* probe, stopPermitted)
      const other = yield* markedStray(freshMarker())
      assert.deepStrictEqual(yield* probe, stopPermitted, "a process of another runtime is none of this one's")
      other.kill()
      const stray = yield* markedStray(config.runtimeMarker)
      const logs: Array<LogEntry> = []
      const reason = vetoed(yield* recordingLogs(logs)(probe))
      assert.include(reason, `sleep 60 (pid ${stray.pid})`, "the veto names the escaped process and its command")
      assert.isTrue(
        logs.some((entry) => String(entry.annotations["reason"]).includes(`(pid ${stray.pid})`)),
        "the log names the escaped process"
      )
      stray.kill()
      yield* eventuallyEffect(permits(probe), "the ended process no longer vetoes")
      yield* session.close
    })))

  it.live("the provider's scope ends every process it started", () =>
    Effect.gen(function*() {
      const pids: Array<number> = []
      yield* Effect.scoped(Effect.gen(function*() {
        const { client, config, pids: started } = yield* setup("omp")
        yield* client.create(config)
        yield* client.create(config)
        pids.push(...started)
      }))
      assert.strictEqual(pids.length, 2)
      yield* eventually(() => pids.every((pid) => !groupAlive(pid)), "every group is gone")
    }))
})
