/**
 * The OpenCode safety probe (P4) against a real HTTP server on 127.0.0.1 that answers like
 * `opencode serve` 1.18.33: JSON for the routes it serves, `200 text/html` for every other route.
 * The fake additionally serves the v2 inbox and shell routes (absent in 1.18.33) unless told not to.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { RuntimeProbeFailed } from "../../../../src/domain/errors.ts"
import { type StopAnswer, stopPermitted, stopVetoed } from "../../../../src/domain/provider.ts"
import { canStopRuntime, probeDecision } from "../../../../src/layers/providers/opencode/probe.ts"

interface FakeSession {
  readonly id: string
  readonly directory: string
  readonly parentID?: string
}

interface FakeState {
  sessions: Array<FakeSession>
  /** v1 status by directory (only non-idle sessions, as the real server lists). */
  status: Record<string, Record<string, { readonly type: string; readonly [field: string]: unknown }>>
  pty: Record<string, Array<unknown>>
  ptyV2: Record<string, Array<unknown>>
  active: Record<string, { type: string }>
  /** undefined: route not served (HTML, like 1.18.33). */
  inbox: Record<string, Array<unknown>> | undefined
  shells: Record<string, Array<unknown>> | undefined
  /** Raw answers by pathname, replacing the route. */
  override: Record<string, { status?: number; contentType: string; body: string }>
  requests: Array<string>
}

const DEFAULT_DIR = "/srv/default"
const HTML = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\" /></head><body></body></html>"

const fullSession = (session: FakeSession) => ({
  slug: "s",
  projectID: "global",
  path: session.directory.slice(1),
  cost: 0,
  tokens: { input: 0, output: 0, reasoning: 0, cache: { read: 0, write: 0 } },
  title: "t",
  version: "1.18.33",
  time: { created: 1, updated: 1 },
  ...session
})

const ptyOf = (cwd: string) => ({
  id: "pty_1",
  title: "Terminal",
  command: "sleep",
  args: ["100"],
  cwd,
  status: "running",
  pid: 4242
})

const handle = (state: FakeState) => (req: IncomingMessage, res: ServerResponse) => {
  const url = new URL(req.url ?? "/", "http://127.0.0.1")
  state.requests.push(`${url.pathname}${url.search}`)
  const json = (body: unknown, status = 200) => {
    res.writeHead(status, { "content-type": "application/json" })
    res.end(JSON.stringify(body))
  }
  const html = () => {
    res.writeHead(200, { "content-type": "text/html" })
    res.end(HTML)
  }
  const override = state.override[url.pathname]
  if (override !== undefined) {
    res.writeHead(override.status ?? 200, { "content-type": override.contentType })
    res.end(override.body)
    return
  }
  const directory = url.searchParams.get("directory") ?? DEFAULT_DIR
  const location = url.searchParams.get("location[directory]") ?? DEFAULT_DIR
  const path = url.pathname
  let match: RegExpMatchArray | null
  if (path === "/session/status") return json(state.status[directory] ?? {})
  if (path === "/pty") return json(state.pty[directory] ?? [])
  if (path === "/api/pty") {
    return json({ location: { directory: location, project: { id: "global", directory: "/" } }, data: state.ptyV2[location] ?? [] })
  }
  if (path === "/api/session/active") return json({ data: state.active })
  if (path === "/api/shell") {
    if (state.shells === undefined) return html()
    return json({ location: { directory: location }, data: state.shells[location] ?? [] })
  }
  if ((match = path.match(/^\/api\/session\/([^/]+)\/inbox$/)) !== null) {
    if (state.inbox === undefined) return html()
    return json({ data: state.inbox[decodeURIComponent(match[1]!)] ?? [] })
  }
  if ((match = path.match(/^\/session\/([^/]+)\/children$/)) !== null) {
    const id = decodeURIComponent(match[1]!)
    return json(state.sessions.filter((s) => s.parentID === id).map(fullSession))
  }
  if ((match = path.match(/^\/session\/([^/]+)$/)) !== null) {
    const id = decodeURIComponent(match[1]!)
    const session = state.sessions.find((s) => s.id === id)
    if (session === undefined) return json({ name: "NotFoundError", data: { message: `Session not found: ${id}` } }, 404)
    return json(fullSession(session))
  }
  return html()
}

const freshState = (): FakeState => ({
  sessions: [
    { id: "ses_root", directory: "/w/a" },
    { id: "ses_child", directory: "/w/b", parentID: "ses_root" },
    { id: "ses_grandchild", directory: "/w/c", parentID: "ses_child" },
    { id: "ses_unrelated", directory: "/w/z" }
  ],
  status: {},
  pty: {},
  ptyV2: {},
  active: {},
  inbox: {},
  shells: {},
  override: {},
  requests: []
})

const withServer = <A, E>(
  setup: (state: FakeState) => void,
  use: (baseUrl: string, state: FakeState) => Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.acquireUseRelease(
    Effect.promise(() =>
      new Promise<{ server: Server; state: FakeState }>((resolve) => {
        const state = freshState()
        setup(state)
        const server = createServer(handle(state))
        server.listen(0, "127.0.0.1", () => resolve({ server, state }))
      })
    ),
    ({ server, state }) => {
      const address = server.address()
      // Listening on a TCP port, the address is an object (a string only for a pipe or socket).
      if (address === null || typeof address === "string") return Effect.die(`unexpected address ${String(address)}`)
      return use(`http://127.0.0.1:${address.port}`, state)
    },
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  )

/** The exit of a probe that vetoed for `reason`. */
const vetoedFor = (reason: string) => Exit.succeed(stopVetoed(reason))

const probe = (setup: (state: FakeState) => void, sessionId = "ses_root") =>
  withServer(setup, (baseUrl) => Effect.exit(canStopRuntime({ agentId: "agent-1", baseUrl, sessionId })))

const isProbeFailed = Schema.is(RuntimeProbeFailed)

const failureMessage = (exit: Exit.Exit<StopAnswer, { readonly message: string }>): string => {
  assert.isTrue(Exit.isFailure(exit), `expected failure, got ${JSON.stringify(exit)}`)
  if (Exit.isFailure(exit)) {
    const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")
    assert.isDefined(error)
    if (error?._tag === "Fail") {
      assert.isTrue(isProbeFailed(error.error), `expected RuntimeProbeFailed, got ${String(error.error)}`)
      return error.error.message
    }
  }
  return ""
}

describe("opencode probe (P4) against a fake server", () => {
  it.effect("idle tree → permitted, after asking every directory of the tree", () =>
    withServer(() => {}, (baseUrl, state) =>
      Effect.gen(function*() {
        const result = yield* canStopRuntime({ agentId: "agent-1", baseUrl, sessionId: "ses_root" })
        assert.deepStrictEqual(result, stopPermitted)
        for (const dir of ["/w/a", "/w/b", "/w/c"]) {
          const enc = new URLSearchParams({ directory: dir }).toString()
          assert.include(state.requests, `/session/status?${enc}`)
          assert.include(state.requests, `/pty?${enc}`)
          assert.include(state.requests, `/api/pty?${new URLSearchParams({ "location[directory]": dir }).toString()}`)
        }
        assert.include(state.requests, "/api/session/active")
        assert.include(state.requests, "/api/session/ses_grandchild/inbox")
        assert.isFalse(state.requests.some((r) => r.includes("/w/z")))
      })))

  it.effect("busy root session (v1) → vetoed, naming it", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) => (s.status["/w/a"] = { ses_root: { type: "busy" } }))
      assert.deepStrictEqual(exit, vetoedFor("session ses_root is busy in /w/a (v1)"))
    }))

  it.effect("busy grandchild in its own directory (v1) → vetoed, naming it", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) => (s.status["/w/c"] = { ses_grandchild: { type: "busy" } }))
      assert.deepStrictEqual(exit, vetoedFor("session ses_grandchild is busy in /w/c (v1)"))
    }))

  it.effect("retrying child (v1) → vetoed, naming it", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) =>
        (s.status["/w/b"] = { ses_child: { type: "retry", attempt: 2, message: "rate limited", next: 9 } })
      )
      assert.deepStrictEqual(exit, vetoedFor("session ses_child is retrying in /w/b (v1)"))
    }))

  it.effect("active child (v2) → vetoed, naming it", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) => (s.active = { ses_child: { type: "running" } }))
      assert.deepStrictEqual(exit, vetoedFor("session ses_child is active (v2)"))
    }))

  it.effect("unrelated busy session and PTY elsewhere → permitted", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) => {
        s.status["/w/z"] = { ses_unrelated: { type: "busy" } }
        s.active = { ses_unrelated: { type: "running" } }
        s.pty["/w/z"] = [ptyOf("/w/z")]
      })
      assert.deepStrictEqual(exit, Exit.succeed(stopPermitted))
    }))

  it.effect("PTY in the session's directory (v1) → vetoed, naming the PTY and its command", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) => (s.pty["/w/a"] = [ptyOf("/w/a")]))
      assert.deepStrictEqual(exit, vetoedFor("PTY pty_1 `sleep 100` (running, pid 4242) in /w/a (v1)"))
    }))

  it.effect("PTY in a child's directory (v2 registry) → vetoed, naming the PTY", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) => (s.ptyV2["/w/b"] = [ptyOf("/w/b")]))
      assert.deepStrictEqual(exit, vetoedFor("PTY pty_1 `sleep 100` (running, pid 4242) in /w/b (v2)"))
    }))

  it.effect("inbox message or shell (v2) → vetoed, naming it", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* probe((s) => (s.inbox = { ses_child: [{ id: "m1" }] })),
        vetoedFor("session ses_child has inbox item m1 not yet delivered (v2)")
      )
      assert.deepStrictEqual(
        yield* probe((s) => (s.shells = { "/w/c": [{ id: "sh1", command: "npm run dev" }] })),
        vetoedFor("shell sh1 `npm run dev` in /w/c (v2)")
      )
    }))

  it.effect("a required route answering HTML 200 → RuntimeProbeFailed", () =>
    Effect.gen(function*() {
      for (const path of ["/session/status", "/pty", "/api/pty", "/api/session/active", "/session/ses_child/children"]) {
        const exit = yield* probe((s) => (s.override[path] = { contentType: "text/html", body: HTML }))
        assert.include(failureMessage(exit), "HTML", path)
      }
    }))

  it.effect("HTML with a JSON content type, or JSON with a non-JSON type → RuntimeProbeFailed", () =>
    Effect.gen(function*() {
      const a = yield* probe((s) => (s.override["/pty"] = { contentType: "application/json", body: HTML }))
      failureMessage(a)
      const b = yield* probe((s) => (s.override["/pty"] = { contentType: "text/plain", body: "[]" }))
      assert.include(failureMessage(b), "content type")
    }))

  it.effect("malformed JSON → RuntimeProbeFailed", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) => (s.override["/session/status"] = { contentType: "application/json", body: "{\"ses_root\":" }))
      assert.include(failureMessage(exit), "malformed JSON")
    }))

  it.effect("JSON of the wrong shape or an unknown status → RuntimeProbeFailed", () =>
    Effect.gen(function*() {
      failureMessage(yield* probe((s) => (s.override["/api/session/active"] = { contentType: "application/json", body: "{}" })))
      failureMessage(yield* probe((s) => (s.status["/w/a"] = { ses_root: { type: "sleeping" } })))
    }))

  it.effect("missing v2 inbox or shell route (HTML, as in 1.18.33) → RuntimeProbeFailed, never empty", () =>
    Effect.gen(function*() {
      assert.include(failureMessage(yield* probe((s) => (s.inbox = undefined))), "inbox")
      assert.include(failureMessage(yield* probe((s) => (s.shells = undefined))), "shell")
      // Even when something is busy, the unknown is what is reported.
      assert.include(
        failureMessage(yield* probe((s) => {
          s.inbox = undefined
          s.active = { ses_root: { type: "running" } }
        })),
        "inbox"
      )
    }))

  it.effect("an error status or an unknown session → RuntimeProbeFailed", () =>
    Effect.gen(function*() {
      failureMessage(yield* probe(() => {}, "ses_missing"))
      failureMessage(
        yield* probe((s) => (s.override["/api/pty"] = { status: 500, contentType: "application/json", body: "{}" }))
      )
    }))

  it.effect("a child naming another parent → RuntimeProbeFailed", () =>
    Effect.gen(function*() {
      const exit = yield* probe((s) =>
        (s.override["/session/ses_root/children"] = {
          contentType: "application/json",
          body: JSON.stringify([fullSession({ id: "ses_x", directory: "/w/x", parentID: "ses_other" })])
        })
      )
      assert.include(failureMessage(exit), "names parent")
    }))

  it.effect("an unreachable server → RuntimeProbeFailed", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        canStopRuntime({ agentId: "agent-1", baseUrl: "http://127.0.0.1:1", sessionId: "ses_root" })
      )
      failureMessage(exit)
    }))

  it.effect("probeDecision reports the reason", () =>
    withServer((s) => (s.pty["/w/b"] = [ptyOf("/w/b")]), (baseUrl) =>
      Effect.gen(function*() {
        const decision = yield* probeDecision({ agentId: "agent-1", baseUrl, sessionId: "ses_root" })
        assert.strictEqual(decision._tag, "Busy")
        if (decision._tag === "Busy") assert.include(decision.reason, "/w/b")
      })))
})
