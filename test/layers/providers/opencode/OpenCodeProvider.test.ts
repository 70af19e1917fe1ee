/**
 * The OpenCode provider against a stand-in for `opencode serve` (test/fixtures/fakeOpencodeServer.mjs)
 * spawned as a real process: create, resume, turns, interrupt, permissions, close, and the P4
 * probe run against the runtime's own server. Time is real here, so waits poll with a bound; every
 * test proves its server process groups are gone.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Schema, Scope } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type SessionConfig, type SessionEvent, type StopAnswer, stopPermitted } from "../../../../src/domain/provider.ts"
import {
  makeOpenCodeClient,
  type OpenCodeProviderOptions,
  type OpenCodeServerInfo
} from "../../../../src/layers/providers/opencode/OpenCodeProvider.ts"
import { groupAlive } from "../../../../src/platform/processGroups.ts"
import { type LogEntry, recordingLogs } from "../../../support/logs.ts"
import { freshMarker, markedStray, markerOf, sessionConfig } from "../../../support/runtimeMarker.ts"

const fakeServer = join(import.meta.dirname, "../../../fixtures/fakeOpencodeServer.mjs")

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

interface Harness {
  readonly client: Effect.Success<ReturnType<typeof makeOpenCodeClient>>
  readonly config: SessionConfig
  readonly events: Array<SessionEvent>
  readonly servers: Array<OpenCodeServerInfo>
  /** Merges state into the newest server's scripted inventories; its JSON answer. */
  readonly control: (state: Record<string, unknown>) => Effect.Effect<unknown>
  /** Creates a session on the newest server (a child when `parentID` is given); its id. */
  readonly createSession: (parentID: string) => Effect.Effect<string>
}

/** Runs the body with a client whose layer scope closes afterwards; then no server group may be left. */
const withClient = <E>(options: Partial<OpenCodeProviderOptions>, body: (harness: Harness) => Effect.Effect<void, E, Scope.Scope>) =>
  Effect.gen(function*() {
    const pids: Array<number> = []
    // The temp folder is removed even when the test is interrupted (a timeout).
    yield* Effect.acquireUseRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-opencode-"))),
      (dir) =>
        Effect.gen(function*() {
          yield* Effect.scoped(Effect.gen(function*() {
            const events: Array<SessionEvent> = []
            const servers: Array<OpenCodeServerInfo> = []
            const client = yield* makeOpenCodeClient({
              command: process.execPath,
              args: [fakeServer],
              requestTimeout: "2 seconds",
              closeGrace: "1 second",
              onSpawn: (pid) => pids.push(pid),
              onServer: (server) => servers.push(server),
              ...options,
              env: { FAKE_OPENCODE_STATE: join(dir, "state.json"), ...options.env }
            })
            const post = (path: string, state: Record<string, unknown>) =>
              Effect.promise((): Promise<unknown> => {
                const server = servers.at(-1)!
                return fetch(`${server.baseUrl}${path}`, {
                  method: "POST",
                  headers: { "content-type": "application/json", ...server.headers },
                  body: JSON.stringify(state),
                  signal: AbortSignal.timeout(5_000)
                }).then((response) => response.json())
              })
            const control = (state: Record<string, unknown>) => post("/__control", state)
            const createSession = (parentID: string) =>
              post(`/session?directory=${encodeURIComponent(dir)}`, { parentID }).pipe(
                Effect.map((created) => Schema.decodeUnknownSync(Schema.Struct({ id: Schema.String }))(created).id)
              )
            const config = sessionConfig(dir, (event) => void events.push(event))
            yield* body({ client, config, events, servers, control, createSession })
          }))
          yield* eventually(() => pids.every((pid) => !groupAlive(pid)), "no server process group is left")
          assert.isAbove(pids.length, 0)
        }),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
  })

const trusting = { trustMissingInventories: true }

const activities = (events: ReadonlyArray<SessionEvent>) => events.filter((event) => event._tag === "Activity").length

/** Sends events of the tree through the fake server and waits until the adapter has seen each. */
const emitSeen = (harness: Pick<Harness, "control" | "events">, emit: ReadonlyArray<{ readonly type: string; readonly properties: unknown }>) =>
  Effect.gen(function*() {
    const before = activities(harness.events)
    yield* harness.control({ emit })
    yield* eventually(() => activities(harness.events) >= before + emit.length, "the adapter saw the events")
  })

const statusEvent = (sessionID: string, type: "busy" | "idle") => ({
  type: "session.status",
  properties: { sessionID, status: { type } }
})

describe("opencode provider", () => {
  it.live("create, a turn with its reply, close: the server's process group ends", () =>
    withClient(trusting, ({ client, config, events, servers }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const handle = yield* session.persistence
        assert.strictEqual(handle?.provider, "opencode")
        assert.match(handle?.sessionId ?? "", /^ses_/)
        assert.strictEqual(handle?.sessionId, servers[0]!.sessionId)
        assert.strictEqual(markerOf(session.pid!), config.runtimeMarker, "the server carries the runtime's marker")
        assert.isUndefined(session.steer, "OpenCode does not steer: the registry queues the prompt instead")
        const done = yield* session.startTurn("hello", "turn-1")
        assert.deepStrictEqual(yield* done, { reply: "echo: hello" }, "the turn succeeds with its reply")
        assert.deepStrictEqual(events.filter((event) => event._tag === "Reply"), [{ _tag: "Reply", text: "echo: hello" }])
        assert.isTrue(events.some((event) => event._tag === "Activity"))
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
        yield* session.close
        assert.isFalse(groupAlive(session.pid!))
      })))

  it.live("resume starts a new server on the saved session; an unknown session fails to resume", () =>
    withClient(trusting, ({ client, config, servers }) =>
      Effect.gen(function*() {
        const first = yield* client.create(config)
        assert.strictEqual((yield* Effect.flatten(first.startTurn("one", "turn-1"))).reply, "echo: one")
        const handle = (yield* first.persistence)!
        yield* first.close
        const resumed = yield* client.resume(handle, config)
        assert.strictEqual((yield* resumed.persistence)?.sessionId, handle.sessionId)
        assert.notStrictEqual(resumed.pid, first.pid)
        assert.strictEqual(servers[1]!.sessionId, handle.sessionId)
        assert.strictEqual((yield* Effect.flatten(resumed.startTurn("two", "turn-2"))).reply, "echo: two")
        yield* resumed.close

        const missing = yield* Effect.exit(client.resume({ ...handle, sessionId: "ses_missing" }, config))
        assert.isTrue(Exit.isFailure(missing))
        if (Exit.isFailure(missing)) assert.include(String(missing.cause), "NotFoundError")
      })))

  it.live("a turn in flight vetoes without asking the server; interrupt aborts it and the turn ends", () =>
    withClient(trusting, ({ client, config }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        assert.deepStrictEqual(yield* Effect.flatten(session.startTurn("one", "turn-0")), { reply: "echo: one" })
        const done = yield* session.startTurn("HANG", "turn-1")
        const waiting = yield* Effect.forkChild(done)
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), "turn turn-1 is running")
        yield* session.interrupt
        const exit = yield* Fiber.await(waiting)
        assert.isTrue(Exit.isSuccess(exit), "an aborted turn ends, it does not fail")
        // It never answered: its reply is none, never the previous turn's.
        if (Exit.isSuccess(exit)) assert.isNull(exit.value.reply)
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      })))

  it.live("a process carrying the runtime's marker outside the server's tree vetoes; another runtime's does not", () =>
    withClient(trusting, ({ client, config }) =>
      Effect.gen(function*() {
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
        let permitted = false
        yield* eventually(() => permitted, "the ended process no longer vetoes").pipe(
          Effect.raceFirst(Effect.forever(Effect.tap(probe, (answer) => Effect.sync(() => (permitted = answer.canStop)))))
        )
      })))

  it.live("a session error fails the turn", () =>
    withClient(trusting, ({ client, config }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const exit = yield* Effect.exit(Effect.flatten(session.startTurn("FAIL please", "turn-1")))
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) assert.include(String(exit.cause), "UnknownError")
      })))

  it.live("a permission is surfaced, vetoes, and is answered through the permission route", () =>
    withClient(trusting, ({ client, config, events }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const done = yield* session.startTurn("PERMISSION", "turn-1")
        yield* eventually(() => events.some((event) => event._tag === "PermissionRequested"), "the permission is asked")
        const asked = events.find((event) => event._tag === "PermissionRequested")
        const id = asked?._tag === "PermissionRequested" ? asked.id : ""
        assert.match(id, /^per_/)
        // The turn is checked first; it is the turn that waits for the answer.
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), "turn turn-1 is running")
        yield* session.respondToPermission(id, true)
        assert.strictEqual((yield* done).reply, "echo: PERMISSION")
        assert.isTrue(events.some((event) => event._tag === "PermissionResolved" && event.id === id))
        assert.strictEqual(events.filter((event) => event._tag === "PermissionResolved").length, 1)
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      })))

  it.live("the probe vetoes on a busy status, a PTY and a busy child session of its own server", () =>
    withClient(trusting, ({ client, config, control }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const sessionId = (yield* session.persistence)!.sessionId
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)

        yield* control({ status: { [sessionId]: { type: "busy" } } })
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), `session ${sessionId} is busy in ${config.cwd} (v1)`, "busy")
        yield* control({ status: { [sessionId]: { type: "retry", attempt: 1, message: "m", next: 1 } } })
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), `session ${sessionId} is retrying in ${config.cwd} (v1)`, "retry")
        yield* control({ status: {} })

        yield* control({
          pty: [{ id: "pty_1", title: "T", command: "bash", args: [], cwd: config.cwd, status: "running", pid: 1 }]
        })
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), `PTY pty_1 \`bash\` (running, pid 1) in ${config.cwd} (v1)`, "PTY")
        yield* control({ pty: [] })
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      })))

  it.live("close removes the session directory's PTYs through the API before ending the server", () =>
    withClient(trusting, ({ client, config, control }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        yield* control({
          pty: [{ id: "pty_9", title: "T", command: "sleep", args: ["60"], cwd: config.cwd, status: "running", pid: 1 }]
        })
        yield* session.close
        const state: unknown = JSON.parse(readFileSync(join(config.cwd, "state.json"), "utf8"))
        const deleted = typeof state === "object" && state !== null && "deletedPtys" in state ? state.deletedPtys : undefined
        assert.deepStrictEqual(deleted, ["pty_9"])
      })))

  it.live("a child session created on the server is a subagent, and vetoes while it is busy", () =>
    withClient(trusting, ({ client, config, control, createSession, events }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const sessionId = (yield* session.persistence)!.sessionId
        const childId = yield* createSession(sessionId)
        yield* eventually(() => events.some((event) => event._tag === "SubagentStarted" && event.id === childId), "the subagent is reported")
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted, "an idle child does not veto")
        yield* control({ status: { [childId]: { type: "busy" } } })
        assert.match(vetoed(yield* session.canStopRuntime!), new RegExp(`^session ${childId} is busy in `), "a busy child vetoes")
      })))

  it.live("an HTML answer to an inventory route fails the probe with a typed reason", () =>
    withClient(trusting, ({ client, config, control }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        yield* control({ html: ["/pty"] })
        const exit = yield* Effect.exit(session.canStopRuntime!)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const text = String(exit.cause)
          assert.include(text, "RuntimeProbeFailed")
          assert.include(text, "GET /pty?directory=")
          assert.include(text, "answered HTML")
        }
      })))

  it.live("by default the inventories 1.18.33 lacks retain: the probe fails naming them", () =>
    withClient({}, ({ client, config }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const exit = yield* Effect.exit(session.canStopRuntime!)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) assert.match(String(exit.cause), /v2 shell list .* unavailable: GET \/api\/shell\?.*answered HTML/)
      })))

  it.live("trusting missing inventories needs a release known to lack them", () =>
    withClient({ ...trusting, env: { FAKE_OPENCODE_VERSION: "1.19.0" } }, ({ client, config }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const exit = yield* Effect.exit(session.canStopRuntime!)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) assert.include(String(exit.cause), "release 1.19.0 is not known to lack it")
      })))

  it.live("a server that exits on its own ends the session and fails its turn", () =>
    withClient(trusting, ({ client, config, control }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const done = yield* session.startTurn("HANG", "turn-1")
        yield* control({ exit: true })
        const exit = yield* Effect.exit(done)
        assert.isTrue(Exit.isFailure(exit))
        yield* session.exited!
      })))

  it.live("closing the client's scope ends every server it started", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      yield* withClient(trusting, ({ client, config }) =>
        Effect.gen(function*() {
          yield* client.create(config)
          yield* client.create(config)
          yield* Deferred.succeed(started, undefined)
        }))
      assert.isTrue(Deferred.isDoneUnsafe(started))
    }))
  it.live("every server has a password of its own: a request without it is refused", () =>
    withClient(trusting, ({ client, config, servers }) =>
      Effect.gen(function*() {
        yield* client.create(config)
        yield* client.create(config)
        const [first, second] = servers
        assert.match(first!.headers["authorization"] ?? "", /^Basic /)
        assert.notStrictEqual(first!.headers["authorization"], second!.headers["authorization"])
        const status = (headers: Readonly<Record<string, string>>) =>
          Effect.promise(() =>
            fetch(`${first!.baseUrl}/global/health`, { headers, signal: AbortSignal.timeout(5_000) }).then((response) =>
              response.status
            )
          )
        assert.strictEqual(yield* status({}), 401)
        assert.strictEqual(yield* status(second!.headers), 401)
        assert.strictEqual(yield* status(first!.headers), 200)
      })))

  it.live("after a child goes idle the release is vetoed until the parent has run its completion notice", () =>
    withClient(trusting, (harness) =>
      Effect.gen(function*() {
        const { client, config, createSession } = harness
        const session = yield* client.create(config)
        const sessionId = (yield* session.persistence)!.sessionId
        const childId = yield* createSession(sessionId)
        yield* emitSeen(harness, [statusEvent(childId, "busy"), statusEvent(childId, "idle")])
        // Every inventory the server serves is empty now: the notice is in none of them.
        const notice = `session ${sessionId} has not yet run the completion notice of ${childId}`
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), notice, "the parent has not run the notice yet")
        yield* emitSeen(harness, [statusEvent(sessionId, "busy")])
        yield* harness.control({ status: { [sessionId]: { type: "busy" } } })
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), notice, "the notice is running")
        yield* harness.control({ status: {} })
        yield* emitSeen(harness, [statusEvent(sessionId, "idle")])
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted, "the notice ran")
      })))

  it.live("a completion notice never seen fails the probe past its bound; it never permits", () =>
    withClient({ ...trusting, completionNoticeTimeout: "200 millis" }, (harness) =>
      Effect.gen(function*() {
        const { client, config, createSession } = harness
        const session = yield* client.create(config)
        const sessionId = (yield* session.persistence)!.sessionId
        const childId = yield* createSession(sessionId)
        yield* emitSeen(harness, [statusEvent(childId, "busy"), { type: "session.idle", properties: { sessionID: childId } }])
        assert.include(vetoed(yield* session.canStopRuntime!), `completion notice of ${childId}`)
        yield* Effect.sleep("300 millis")
        const exit = yield* Effect.exit(session.canStopRuntime!)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          assert.include(String(exit.cause), "RuntimeProbeFailed")
          assert.include(String(exit.cause), "completion notice")
        }
      })))

  it.live("a grandchild session is a subagent; its permission is surfaced, vetoes and is answered", () =>
    withClient(trusting, ({ client, config, control, createSession, events }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const sessionId = (yield* session.persistence)!.sessionId
        const childId = yield* createSession(sessionId)
        const grandchildId = yield* createSession(childId)
        yield* eventually(
          () => events.some((event) => event._tag === "SubagentStarted" && event.id === grandchildId),
          "the grandchild is reported"
        )
        const asked = Schema.decodeUnknownSync(Schema.String)(yield* control({ ask: { sessionID: grandchildId } }))
        yield* eventually(
          () => events.some((event) => event._tag === "PermissionRequested" && event.id === asked),
          "the grandchild's permission is surfaced"
        )
        assert.strictEqual(vetoed(yield* session.canStopRuntime!), `permission ${asked} is pending`)
        yield* session.respondToPermission(asked, true)
        assert.isTrue(events.some((event) => event._tag === "PermissionResolved" && event.id === asked))
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      })))

  it.live("an event stream the server ends is reopened: the next turn still ends", () =>
    withClient(trusting, ({ client, config, control }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        yield* Effect.flatten(session.startTurn("one", "turn-1"))
        yield* control({ dropEvents: true })
        yield* Effect.sleep("100 millis")
        const two = yield* Effect.flatten(session.startTurn("two", "turn-2")).pipe(
          Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.die("the turn hung after the stream ended") })
        )
        assert.strictEqual(two.reply, "echo: two")
        assert.deepStrictEqual(yield* session.canStopRuntime!, stopPermitted)
      })))

  it.live("an event stream that cannot be reopened fails the turn in flight, later turns and the probe", () =>
    withClient(trusting, ({ client, config, control }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const done = yield* session.startTurn("HANG", "turn-1")
        yield* control({ refuseEvents: true })
        yield* control({ dropEvents: true })
        const exit = yield* Effect.exit(done).pipe(
          Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.die("the turn hung after the stream ended") })
        )
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) assert.include(String(exit.cause), "ProviderFailed")
        const next = yield* Effect.exit(session.startTurn("again", "turn-2"))
        assert.isTrue(Exit.isFailure(next))
        const probe = yield* Effect.exit(session.canStopRuntime!)
        assert.isTrue(Exit.isFailure(probe))
        if (Exit.isFailure(probe)) assert.include(String(probe.cause), "RuntimeProbeFailed")
      })))
})
