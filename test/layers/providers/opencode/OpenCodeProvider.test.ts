/**
 * The OpenCode provider against a stand-in for `opencode serve` (test/fixtures/fakeOpencodeServer.mjs)
 * spawned as a real process: create, resume, turns, interrupt, permissions, close, and the P4
 * probe run against the runtime's own server. Time is real here, so waits poll with a bound; every
 * test proves its server process groups are gone.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { SessionEvent } from "../../../../src/domain/provider.ts"
import { makeOpenCodeClient, type OpenCodeProviderOptions } from "../../../../src/layers/providers/opencode/OpenCodeProvider.ts"
import { groupAlive } from "../../../../src/layers/providers/plugin/PluginProcess.ts"

const fakeServer = join(import.meta.dirname, "../../../fixtures/fakeOpencodeServer.mjs")

const eventually = (condition: () => boolean, what: string, tries = 100) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries; i++) {
      if (condition()) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

interface Harness {
  readonly client: Effect.Success<ReturnType<typeof makeOpenCodeClient>>
  readonly config: { readonly agentId: string; readonly cwd: string; readonly labels: {}; readonly onEvent: (event: SessionEvent) => void }
  readonly events: Array<SessionEvent>
  readonly servers: Array<{ readonly pid: number; readonly baseUrl: string; readonly sessionId: string }>
  /** Merges state into the newest server's scripted inventories. */
  readonly control: (state: Record<string, unknown>) => Effect.Effect<void>
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
            const servers: Array<{ readonly pid: number; readonly baseUrl: string; readonly sessionId: string }> = []
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
            const control = (state: Record<string, unknown>) =>
              Effect.promise(() =>
                fetch(`${servers.at(-1)!.baseUrl}/__control`, {
                  method: "POST",
                  headers: { "content-type": "application/json" },
                  body: JSON.stringify(state)
                }).then((response) => response.text())
              ).pipe(Effect.asVoid)
            const config = { agentId: "a1", cwd: dir, labels: {}, onEvent: (event: SessionEvent) => events.push(event) }
            yield* body({ client, config, events, servers, control })
          }))
          yield* eventually(() => pids.every((pid) => !groupAlive(pid)), "no server process group is left")
          assert.isAbove(pids.length, 0)
        }),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
  })

const trusting = { trustMissingInventories: true }

describe("opencode provider", () => {
  it.live("create, a turn with its reply, close: the server's process group ends", () =>
    withClient(trusting, ({ client, config, events, servers }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const handle = yield* session.persistence
        assert.strictEqual(handle?.provider, "opencode")
        assert.match(handle?.sessionId ?? "", /^ses_/)
        assert.strictEqual(handle?.sessionId, servers[0]!.sessionId)
        const done = yield* session.startTurn("hello")
        yield* done
        assert.deepStrictEqual(events.filter((event) => event._tag === "Reply"), [{ _tag: "Reply", text: "echo: hello" }])
        assert.isTrue(events.some((event) => event._tag === "Activity"))
        assert.isTrue(yield* session.canStopRuntime!)
        yield* session.close
        assert.isFalse(groupAlive(session.pid!))
      })))

  it.live("resume starts a new server on the saved session; an unknown session fails to resume", () =>
    withClient(trusting, ({ client, config, servers }) =>
      Effect.gen(function*() {
        const first = yield* client.create(config)
        yield* Effect.flatten(first.startTurn("one"))
        const handle = (yield* first.persistence)!
        yield* first.close
        const resumed = yield* client.resume(handle, config)
        assert.strictEqual((yield* resumed.persistence)?.sessionId, handle.sessionId)
        assert.notStrictEqual(resumed.pid, first.pid)
        assert.strictEqual(servers[1]!.sessionId, handle.sessionId)
        yield* Effect.flatten(resumed.startTurn("two"))
        yield* resumed.close

        const missing = yield* Effect.exit(client.resume({ ...handle, sessionId: "ses_missing" }, config))
        assert.isTrue(Exit.isFailure(missing))
        if (Exit.isFailure(missing)) assert.include(String(missing.cause), "NotFoundError")
      })))

  it.live("a turn in flight vetoes without asking the server; interrupt aborts it and the turn ends", () =>
    withClient(trusting, ({ client, config }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const done = yield* session.startTurn("HANG")
        const waiting = yield* Effect.forkChild(done)
        assert.isFalse(yield* session.canStopRuntime!)
        yield* session.interrupt
        const exit = yield* Fiber.await(waiting)
        assert.isTrue(Exit.isSuccess(exit), "an aborted turn ends, it does not fail")
        assert.isTrue(yield* session.canStopRuntime!)
      })))

  it.live("a session error fails the turn", () =>
    withClient(trusting, ({ client, config }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const exit = yield* Effect.exit(Effect.flatten(session.startTurn("FAIL please")))
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) assert.include(String(exit.cause), "UnknownError")
      })))

  it.live("a permission is surfaced, vetoes, and is answered through the permission route", () =>
    withClient(trusting, ({ client, config, events }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const done = yield* session.startTurn("PERMISSION")
        yield* eventually(() => events.some((event) => event._tag === "PermissionRequested"), "the permission is asked")
        const asked = events.find((event) => event._tag === "PermissionRequested")
        const id = asked?._tag === "PermissionRequested" ? asked.id : ""
        assert.match(id, /^per_/)
        assert.isFalse(yield* session.canStopRuntime!)
        yield* session.respondToPermission(id, true)
        yield* done
        assert.isTrue(events.some((event) => event._tag === "PermissionResolved" && event.id === id))
        assert.strictEqual(events.filter((event) => event._tag === "PermissionResolved").length, 1)
        assert.isTrue(yield* session.canStopRuntime!)
      })))

  it.live("the probe vetoes on a busy status, a PTY and a busy child session of its own server", () =>
    withClient(trusting, ({ client, config, control }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const sessionId = (yield* session.persistence)!.sessionId
        assert.isTrue(yield* session.canStopRuntime!)

        yield* control({ status: { [sessionId]: { type: "busy" } } })
        assert.isFalse(yield* session.canStopRuntime!, "busy")
        yield* control({ status: { [sessionId]: { type: "retry", attempt: 1, message: "m", next: 1 } } })
        assert.isFalse(yield* session.canStopRuntime!, "retry")
        yield* control({ status: {} })

        yield* control({
          pty: [{ id: "pty_1", title: "T", command: "bash", args: [], cwd: config.cwd, status: "running", pid: 1 }]
        })
        assert.isFalse(yield* session.canStopRuntime!, "PTY")
        yield* control({ pty: [] })
        assert.isTrue(yield* session.canStopRuntime!)
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
    withClient(trusting, ({ client, config, control, events, servers }) =>
      Effect.gen(function*() {
        const session = yield* client.create(config)
        const sessionId = (yield* session.persistence)!.sessionId
        const child = yield* Effect.promise(() =>
          fetch(`${servers[0]!.baseUrl}/session?directory=${encodeURIComponent(config.cwd)}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ parentID: sessionId })
          }).then((response) => response.json())
        )
        const childId = typeof child === "object" && child !== null && "id" in child ? String(child.id) : ""
        yield* eventually(() => events.some((event) => event._tag === "SubagentStarted" && event.id === childId), "the subagent is reported")
        assert.isTrue(yield* session.canStopRuntime!, "an idle child does not veto")
        yield* control({ status: { [childId]: { type: "busy" } } })
        assert.isFalse(yield* session.canStopRuntime!, "a busy child vetoes")
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
        const done = yield* session.startTurn("HANG")
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
})
