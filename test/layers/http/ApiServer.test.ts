import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schema } from "effect"
import { HttpClient, HttpClientRequest, HttpServer } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { NetAddress } from "effect/net"
import { TestClock } from "effect/testing"
import * as http from "node:http"
import { parentAgentIdLabel } from "../../../src/domain/agent.ts"
import type { MemberBlocker } from "../../../src/domain/blocker.ts"
import { notResumableDetail } from "../../../src/domain/close.ts"
import { type StopAnswer, stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import { type LogEntry, recordingLogs } from "../../support/logs.ts"
import { QuiesceApi } from "../../../src/api/QuiesceApi.ts"
import { metricsContentType } from "../../../src/api/system.ts"
import { Admission } from "../../../src/services/Admission.ts"
import * as TestApiServer from "../../../src/testing/TestApiServer.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { DaemonLifecycle } from "../../../src/services/DaemonLifecycle.ts"
import { memoryDaemon } from "../../support/memoryDaemon.ts"
import { packageVersion } from "../../../src/domain/version.ts"
import { mkdirSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

// Agents' working directories: real ones, since the API checks that they exist.
const workDir = mkdtempSync(join(tmpdir(), "quiesce-api-"))
const subDir = join(workDir, "sub")
mkdirSync(subDir)

const token = "test-token"
const metricsText = "# HELP quiesce_up 1 when up\nquiesce_up 1\n"

/**
 * The API on an ephemeral port over a daemon's real services (registry, collector, delivery,
 * finish subscriptions, lifecycle) and the in-memory provider. Scheduled sweeps are out of reach;
 * a test sweeps through the API.
 */
const serve = (
  provider: MemoryProvider,
  options: { readonly token?: string; readonly maxRequestBytes?: number; readonly admission?: "opening" | "open" } = {}
) =>
  TestApiServer.layer({
    token: options.token ?? token,
    renderMetrics: Effect.succeed(metricsText),
    maxRequestBytes: options.maxRequestBytes
  }, options.admission).pipe(Layer.provideMerge(memoryDaemon({ provider })))

const apiClient = HttpApiClient.make(QuiesceApi, {
  transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token))
})

/** A raw request; returns status, content type and parsed body (or text when not JSON). */
const raw = Effect.fnUntraced(function*(
  method: "GET" | "POST" | "DELETE",
  url: string,
  options: { readonly token?: string; readonly body?: string; readonly headers?: Record<string, string> } = {}
) {
  const client = yield* HttpClient.HttpClient
  let request = method === "GET" ? HttpClientRequest.get(url) : method === "POST" ? HttpClientRequest.post(url) : HttpClientRequest.delete(url)
  if (options.token !== undefined) request = HttpClientRequest.bearerToken(request, options.token)
  if (options.headers !== undefined) request = HttpClientRequest.setHeaders(request, options.headers)
  if (options.body !== undefined) request = HttpClientRequest.bodyText(request, options.body, "application/json")
  const response = yield* client.execute(request)
  const text = yield* response.text
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch {
    // not JSON
  }
  return {
    status: response.status,
    contentType: response.headers["content-type"],
    retryAfter: response.headers["retry-after"],
    setCookie: response.headers["set-cookie"],
    headers: response.headers,
    body
  }
})

describe("ApiServer", () => {
  it.effect("creates, lists and shows agents", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const parent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      assert.strictEqual(parent.provider, "codex")
      assert.isString(parent.sessionId)
      const child = yield* client.agents.create({
        payload: { provider: "codex", cwd: subDir, parentAgentId: parent.agentId, labels: { team: "a" } }
      })

      const listed = yield* client.agents.list()
      assert.deepStrictEqual(listed.map((agent) => agent.agentId).sort(), [parent.agentId, child.agentId].sort())

      const shown = yield* client.agents.get({ params: { id: child.agentId } })
      assert.deepStrictEqual(shown, {
        agentId: child.agentId,
        provider: "codex",
        cwd: subDir,
        labels: { team: "a", [parentAgentIdLabel]: parent.agentId },
        sessionId: child.sessionId,
        resident: true,
        lifecycle: "active",
        lastActivityAt: shown.lastActivityAt,
        parentAgentId: parent.agentId,
        pid: null,
        pendingPermissions: [],
        providerAvailable: true
      })

      const created = yield* raw("POST", "/v1/agents", {
        token,
        body: JSON.stringify({ provider: "codex", cwd: workDir })
      })
      assert.strictEqual(created.status, 201)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("refuses a parent that does not exist and labels with the daemon's own prefix", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const orphan = yield* raw("POST", "/v1/agents", {
        token,
        body: JSON.stringify({ provider: "codex", cwd: workDir, parentAgentId: "agent-missing" })
      })
      assert.strictEqual(orphan.status, 404)
      assert.include(JSON.stringify(orphan.body), "agent-missing")
      const reserved = yield* raw("POST", "/v1/agents", {
        token,
        body: JSON.stringify({ provider: "codex", cwd: workDir, labels: { "quiesce.internal": "true" } })
      })
      assert.strictEqual(reserved.status, 400)
      assert.include(JSON.stringify(reserved.body), `label \\"quiesce.internal\\" is reserved`)
      // A parent set as a label would skip the check that it exists: refused, naming the label.
      const parentLabel = yield* raw("POST", "/v1/agents", {
        token,
        body: JSON.stringify({ provider: "codex", cwd: workDir, labels: { [parentAgentIdLabel]: "agent-missing" } })
      })
      assert.strictEqual(parentLabel.status, 400)
      assert.deepInclude(parentLabel.body, {
        type: "urn:quiesce:error:ReservedLabel",
        status: 400,
        label: parentAgentIdLabel
      })
      assert.deepStrictEqual(provider.deliveries, [])
      const client = yield* apiClient
      assert.deepStrictEqual(yield* client.agents.list(), [], "nothing was created")
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("a retried prompt with the same clientMessageId gets the same turn, delivered once", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const payload = { text: "do it", clientMessageId: "m-1" }
      const first = yield* client.agents.prompt({ params: { id: agent.agentId }, payload })
      const again = yield* client.agents.prompt({ params: { id: agent.agentId }, payload })
      assert.strictEqual(first.disposition, "turn")
      assert.isFalse(first.resumed)
      assert.isNotNull(first.turnId)
      assert.strictEqual(again.turnId, first.turnId)
      assert.deepStrictEqual(provider.deliveries.map((delivery) => delivery.prompt), ["do it"])
      assert.isUndefined(first.output)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("wait=true returns the turn's reply", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      provider.turnEnd = () => Effect.succeed({ reply: "done!" })
      const receipt = yield* client.agents.prompt({ params: { id: agent.agentId }, payload: { text: "work", wait: true } })
      assert.strictEqual(receipt.state, "completed")
      assert.strictEqual(receipt.output, "done!")
      assert.deepStrictEqual(yield* client.agents.turn({ params: { id: agent.agentId, turnId: receipt.turnId } }), {
        ...(yield* client.agents.turn({ params: { id: agent.agentId, turnId: receipt.turnId } })),
        state: "completed",
        reply: "done!",
        text: "work"
      })
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("lists an agent's recent turns newest first, at most `limit`; 404 for an unknown agent", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const params = { id: agent.agentId }
      assert.deepStrictEqual(yield* client.agents.turns({ params, query: {} }), [])
      provider.turnEnd = () => Effect.succeed({ reply: "ok" })
      const receipts = yield* Effect.forEach(["one", "two", "three"], (text) =>
        client.agents.prompt({ params, payload: { text, wait: true } }))
      const listed = yield* client.agents.turns({ params, query: {} })
      assert.deepStrictEqual(listed.map((turn) => turn.text), ["three", "two", "one"])
      assert.deepStrictEqual(listed.map((turn) => turn.turnId), receipts.map((receipt) => receipt.turnId).reverse())
      assert.deepStrictEqual(listed[0], yield* client.agents.turn({ params: { ...params, turnId: receipts[2]!.turnId } }))
      const limited = yield* client.agents.turns({ params, query: { limit: 2 } })
      assert.deepStrictEqual(limited.map((turn) => turn.text), ["three", "two"])

      const raw2 = yield* raw("GET", `/v1/agents/${agent.agentId}/turns?limit=1`, { token })
      assert.strictEqual(raw2.status, 200)
      assert.deepInclude(Array.isArray(raw2.body) ? raw2.body[0] : raw2.body, { text: "three", state: "completed", reply: "ok" })
      for (const limit of ["0", "101", "1.5", "many"]) {
        const refused = yield* raw("GET", `/v1/agents/${agent.agentId}/turns?limit=${limit}`, { token })
        assert.strictEqual(refused.status, 400, `limit=${limit}`)
      }

      const unknown = yield* client.agents.turns({ params: { id: "nobody" }, query: {} }).pipe(Effect.flip)
      assert.strictEqual(unknown._tag, "AgentNotFound")
      const response = yield* raw("GET", "/v1/agents/nobody/turns", { token })
      assert.strictEqual(response.status, 404)
      assert.deepInclude(response.body, { _tag: "AgentNotFound", agentId: "nobody" })
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("runtimes show blockers while busy and eligibleAt once idle", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const registry = yield* AgentRegistry
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const release = yield* Deferred.make<void>()
      provider.turnGate = Deferred.await(release)
      yield* client.agents.prompt({ params: { id: agent.agentId }, payload: { text: "long task" } })

      const [busy] = yield* client.runtimes.list({ query: {} })
      assert.strictEqual(busy.agentId, agent.agentId)
      assert.strictEqual(busy.state, "blocked")
      assert.isNull(busy.eligibleAt)
      assert.isNull(busy.rssBytes)
      assert.isNull(busy.lastProbe)
      assert.deepInclude(busy.blockers, { agentId: agent.agentId, kind: "foreground-turn" })

      yield* Deferred.succeed(release, undefined)
      yield* registry.awaitIdle(agent.agentId)
      const [idle] = yield* client.runtimes.list({ query: {} })
      assert.deepStrictEqual(idle.blockers, [])
      assert.strictEqual(idle.state, "idle")
      // Times in the API are ISO 8601.
      assert.match(idle.idleSince, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      assert.strictEqual(Date.parse(idle.eligibleAt ?? ""), Date.parse(idle.idleSince) + 60 * 60_000)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("collect releases the runtime; the agent stays, no longer resident", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const result = yield* client.runtimes.collect({ params: { id: agent.agentId } })
      assert.deepStrictEqual(result, { outcome: "collected", blockers: [] })
      const shown = yield* client.agents.get({ params: { id: agent.agentId } })
      assert.isFalse(shown.resident)
      assert.strictEqual(shown.lifecycle, "closed")
      assert.deepStrictEqual(yield* client.runtimes.list({ query: {} }), [])

      const again = yield* client.runtimes.collect({ params: { id: agent.agentId } }).pipe(Effect.flip)
      assert.strictEqual(again._tag, "RuntimeNotFound")

      const resumed = yield* client.agents.prompt({ params: { id: agent.agentId }, payload: { text: "back" } })
      assert.isTrue(resumed.resumed)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("pending permissions are listed and answered; a released agent has none to answer", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const id = { id: agent.agentId }
      provider.emit(agent.agentId, { _tag: "PermissionRequested", id: "perm-1" })
      // The registry takes the provider's events in on a fiber of its own: let it run between looks.
      const pendingOnceSettled = (settled: (pending: ReadonlyArray<string>) => boolean) =>
        Effect.gen(function*() {
          let pending = (yield* client.agents.get({ params: id })).pendingPermissions
          for (let i = 0; i < 100 && !settled(pending); i++) {
            yield* Effect.yieldNow
            pending = (yield* client.agents.get({ params: id })).pendingPermissions
          }
          return pending
        })
      assert.deepStrictEqual(yield* pendingOnceSettled((pending) => pending.length > 0), ["perm-1"])
      const held = yield* client.runtimes.collect({ params: id })
      assert.strictEqual(held.outcome, "retained", "a pending permission keeps the runtime")

      const answered = yield* raw("POST", `/v1/agents/${agent.agentId}/permissions/perm-1`, {
        token,
        body: JSON.stringify({ allow: true })
      })
      assert.strictEqual(answered.status, 204)
      assert.deepStrictEqual(
        yield* pendingOnceSettled((pending) => pending.length === 0),
        [],
        "the provider resolved it"
      )
      assert.strictEqual((yield* client.agents.interrupt({ params: id })), undefined)

      assert.strictEqual((yield* client.runtimes.collect({ params: id })).outcome, "collected")
      const stale = yield* raw("POST", `/v1/agents/${agent.agentId}/permissions/perm-1`, {
        token,
        body: JSON.stringify({ allow: false })
      })
      assert.strictEqual(stale.status, 409)
      assert.include(JSON.stringify(stale.body), "PermissionNotPending")
      const missing = yield* raw("POST", "/v1/agents/agent-missing/permissions/perm-1", {
        token,
        body: JSON.stringify({ allow: true })
      })
      assert.strictEqual(missing.status, 404)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("close releases a runtime that has nothing to lose; the next prompt resumes", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      provider.probe = () => Effect.succeed(stopPermitted)
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const id = { id: agent.agentId }
      assert.deepStrictEqual(
        yield* client.agents.close({ params: id, query: {} }),
        { agentId: agent.agentId, ended: { blockers: [], veto: null } }
      )
      assert.isFalse((yield* client.agents.get({ params: id })).resident)
      const resumed = yield* client.agents.prompt({ params: id, payload: { text: "back" } })
      assert.isTrue(resumed.resumed)
      assert.strictEqual(resumed.sessionId, agent.sessionId)
      const missing = yield* raw("POST", "/v1/agents/agent-missing/close", { token })
      assert.strictEqual(missing.status, 404)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("close of a runtime with blockers or a veto is refused with them (409), unless forced, which names what it ended", () => {
    const provider = new MemoryProvider("codex")
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const client = yield* apiClient
      // Read as the session opens; asked at the close itself, not only by the last sweep.
      provider.probe = () => Effect.succeed(stopVetoed("background job 1 `sleep 301`"))
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const id = { id: agent.agentId }
      provider.emit(agent.agentId, { _tag: "PermissionRequested", id: "perm-1" })

      const refused = yield* raw("POST", `/v1/agents/${agent.agentId}/close`, { token })
      assert.strictEqual(refused.status, 409)
      assert.strictEqual(refused.contentType, "application/problem+json")
      assert.deepInclude(refused.body, {
        _tag: "RuntimeCloseRefused",
        status: 409,
        agentId: agent.agentId,
        blockers: [{ agentId: agent.agentId, kind: "pending-permission" }],
        veto: { agentId: agent.agentId, outcome: "vetoed", message: "background job 1 `sleep 301`" }
      })
      assert.isTrue((yield* client.agents.get({ params: id })).resident, "a refused close closes nothing")
      const typed = yield* Effect.flip(client.agents.close({ params: id, query: { force: "false" } }))
      assert.strictEqual(typed._tag, "RuntimeCloseRefused")
      // Only "true" forces: any other value is a typed 400 naming it, never a silent unforced close.
      for (const force of ["yes", "1", "TRUE", ""]) {
        const invalid = yield* raw("POST", `/v1/agents/${agent.agentId}/close?force=${force}`, { token })
        assert.strictEqual(invalid.status, 400, `force=${force}`)
        assert.deepInclude(invalid.body, { _tag: "InvalidRequest", type: "urn:quiesce:error:InvalidRequest" }, `force=${force}`)
        assert.include(JSON.stringify(invalid.body), `"path":["query","force"]`, `force=${force}`)
      }
      assert.isTrue((yield* client.agents.get({ params: id })).resident, "an invalid force closes nothing")

      const forced = yield* client.agents.close({ params: id, query: { force: "true" } })
      assert.deepStrictEqual(forced.ended, {
        blockers: [{ agentId: agent.agentId, kind: "pending-permission" }],
        veto: { agentId: agent.agentId, outcome: "vetoed", message: "background job 1 `sleep 301`" }
      })
      assert.isFalse((yield* client.agents.get({ params: id })).resident)
      assert.include(
        entries.map((entry) => entry.message),
        `Closed agent ${agent.agentId} by force, ending: pending-permission; vetoed by its provider: background job 1 \`sleep 301\``
      )
    }).pipe(Effect.provide(serve(provider)), recordingLogs(entries))
  })

  it.effect("close of a runtime that cannot be resumed is refused naming that, since it ends the conversation; forced, it says so", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      // Like providers that name their session only once a turn ended: no handle yet.
      provider.reportsSessionAfterTurn = true
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const id = { id: agent.agentId }
      const notResumable: MemberBlocker = { agentId: agent.agentId, kind: "not-resumable", detail: notResumableDetail }
      const refused = yield* Effect.flip(client.agents.close({ params: id, query: {} }))
      assert.strictEqual(refused._tag, "RuntimeCloseRefused")
      assert.deepStrictEqual(refused._tag === "RuntimeCloseRefused" ? refused.blockers : [], [notResumable])
      assert.isTrue((yield* client.agents.get({ params: id })).resident, "a refused close closes nothing")

      // Once a turn named the session, the runtime has nothing to lose.
      yield* client.agents.prompt({ params: id, payload: { text: "hello", wait: true } })
      assert.deepStrictEqual((yield* client.agents.close({ params: id, query: {} })).ended, { blockers: [], veto: null })

      const other = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const forced = yield* client.agents.close({ params: { id: other.agentId }, query: { force: "true" } })
      assert.deepStrictEqual(forced.ended, { blockers: [{ ...notResumable, agentId: other.agentId }], veto: null })
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("a turn admitted while the close asks the provider refuses the close, though the provider then permits", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const asking = yield* Deferred.make<void>()
      const answer = yield* Deferred.make<void>()
      provider.probe = () => Deferred.succeed(asking, undefined).pipe(Effect.andThen(Deferred.await(answer)), Effect.as(stopPermitted))
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const id = { id: agent.agentId }
      const closing = yield* Effect.forkChild(Effect.flip(client.agents.close({ params: id, query: {} })))
      yield* Deferred.await(asking)
      // The provider has not answered yet when a prompt starts a turn; then it permits.
      provider.turnGate = Effect.never
      yield* client.agents.prompt({ params: id, payload: { text: "arrives meanwhile" } })
      yield* Deferred.succeed(answer, undefined)
      const refused = yield* Fiber.join(closing)
      assert.strictEqual(refused._tag, "RuntimeCloseRefused")
      assert.deepInclude(refused._tag === "RuntimeCloseRefused" ? refused.blockers : [], { agentId: agent.agentId, kind: "foreground-turn" })
      assert.isTrue((yield* client.agents.get({ params: id })).resident, "the turn runs on")
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("collect retains a busy runtime and names its blockers", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      provider.turnGate = Effect.never
      yield* client.agents.prompt({ params: { id: agent.agentId }, payload: { text: "forever" } })
      const result = yield* client.runtimes.collect({ params: { id: agent.agentId } })
      assert.strictEqual(result.outcome, "retained")
      assert.strictEqual(result.state, "blocked")
      assert.deepInclude(result.blockers, { agentId: agent.agentId, kind: "foreground-turn" })
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("sweep reports failures as tag + message, then what it collected", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      assert.deepStrictEqual(yield* client.runtimes.sweep(), { collected: [], failures: [] })

      provider.closeFailure = "device busy"
      yield* TestClock.adjust("61 minutes")
      const failed = yield* client.runtimes.sweep()
      assert.deepStrictEqual(failed.collected, [])
      assert.strictEqual(failed.failures.length, 1)
      assert.strictEqual(failed.failures[0].agentId, agent.agentId)
      assert.strictEqual(failed.failures[0].error._tag, "RuntimeCloseFailed")
      assert.include(failed.failures[0].error.message, "device busy")
      assert.deepStrictEqual(Object.keys(failed.failures[0].error).sort(), ["_tag", "message"])

      provider.closeFailure = undefined
      // The first sweep to see the family clear after a retention restarts its idle period.
      yield* TestClock.adjust("1 minute")
      assert.deepStrictEqual((yield* client.runtimes.sweep()).collected, [])
      yield* TestClock.adjust("61 minutes")
      const report = yield* client.runtimes.sweep()
      assert.deepStrictEqual(report, {
        collected: [{ agentId: agent.agentId, provider: "codex", sessionId: agent.sessionId! }],
        failures: []
      })
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("a bearer token is required except for health, metrics and the OpenAPI document", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const missing = yield* raw("GET", "/v1/agents")
      assert.strictEqual(missing.status, 401)
      // Every error is an RFC 9457 problem that also carries the typed error's tag and fields.
      assert.strictEqual(missing.contentType, "application/problem+json")
      assert.deepStrictEqual(missing.body, {
        type: "urn:quiesce:error:Unauthorized",
        title: "Unauthorized",
        status: 401,
        detail: "Missing or invalid bearer token",
        _tag: "Unauthorized",
        message: "Missing or invalid bearer token"
      })
      const wrong = yield* raw("GET", "/v1/runtimes", { token: "nope" })
      assert.strictEqual(wrong.status, 401)
      assert.strictEqual((yield* raw("POST", "/v1/sweep", { token: "test-token-but-longer" })).status, 401)
      // Authentication comes before validation: a bad body without a token is still a 401.
      assert.strictEqual((yield* raw("POST", "/v1/agents", { body: "{}" })).status, 401)
      assert.strictEqual((yield* raw("GET", "/v1/agents", { token })).status, 200)

      const unauthorized = yield* HttpApiClient.make(QuiesceApi).pipe(
        Effect.flatMap((client) => client.agents.list()),
        Effect.flip
      )
      assert.strictEqual(unauthorized._tag, "Unauthorized")

      const health = yield* raw("GET", "/v1/health")
      assert.strictEqual(health.status, 200)
      assert.deepInclude(health.body, { status: "ok", version: packageVersion })
      assert.include(JSON.stringify(health.body), "uptimeSeconds")

      const metrics = yield* raw("GET", "/metrics")
      assert.deepStrictEqual([metrics.status, metrics.contentType, metrics.body], [200, metricsContentType, metricsText])
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("an invalid body is a 400 problem naming the field path", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const wrongType = yield* raw("POST", "/v1/agents", { token, body: JSON.stringify({ provider: 42, cwd: "" }) })
      assert.strictEqual(wrongType.status, 400)
      assert.strictEqual(wrongType.contentType, "application/problem+json")
      assert.deepInclude(wrongType.body, {
        type: "urn:quiesce:error:InvalidRequest",
        title: "Invalid request",
        status: 400,
        _tag: "InvalidRequest",
        message: "Invalid request: payload.provider: Expected string; payload.cwd: must be an absolute path (the daemon does not know the client's directory)"
      })
      // Every invalid field is named, not just the first.
      const issues = issuesOf(wrongType.body)
      assert.deepStrictEqual(issues.map((issue) => issue.path), [["payload", "provider"], ["payload", "cwd"]])
      assert.strictEqual(issues[0].message, "Expected string")

      const missing = yield* raw("POST", "/v1/agents", { token, body: JSON.stringify({ provider: "codex" }) })
      assert.strictEqual(missing.status, 400)
      assert.deepStrictEqual(issuesOf(missing.body).map((issue) => issue.path), [["payload", "cwd"]])

      // A relative cwd means nothing to the daemon; one that does not exist is named.
      const relative = yield* raw("POST", "/v1/agents", { token, body: JSON.stringify({ provider: "codex", cwd: "src" }) })
      assert.strictEqual(relative.status, 400)
      assert.deepStrictEqual(issuesOf(relative.body).map((issue) => issue.path), [["payload", "cwd"]])
      assert.include(issuesOf(relative.body)[0].message, "absolute")
      const absent = yield* raw("POST", "/v1/agents", {
        token,
        body: JSON.stringify({ provider: "codex", cwd: join(workDir, "no-such-dir") })
      })
      assert.strictEqual(absent.status, 422)
      assert.deepInclude(absent.body, { _tag: "WorkingDirectoryNotFound" })
      assert.include(JSON.stringify(absent.body), "does not exist")

      const agent = yield* raw("POST", "/v1/agents", { token, body: JSON.stringify({ provider: "codex", cwd: workDir }) })
      const agentId = agentIdOf(agent.body)
      const emptyText = yield* raw("POST", `/v1/agents/${agentId}/prompts`, {
        token,
        body: JSON.stringify({ text: "", wait: "yes" })
      })
      assert.strictEqual(emptyText.status, 400)
      assert.deepInclude(issuesOf(emptyText.body).map((issue) => issue.path), ["payload", "text"])

      const notJson = yield* raw("POST", "/v1/agents", { token, body: "{not json" })
      assert.strictEqual(notJson.status, 400)
      assert.strictEqual(provider.creates, 1)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("an unknown agent is a typed 404", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const error = yield* client.agents.get({ params: { id: "nobody" } }).pipe(Effect.flip)
      assert.strictEqual(error._tag, "AgentNotFound")
      const prompted = yield* client.agents.prompt({ params: { id: "nobody" }, payload: { text: "hi" } }).pipe(
        Effect.flip
      )
      assert.strictEqual(prompted._tag, "AgentNotFound")
      const response = yield* raw("GET", "/v1/agents/nobody", { token })
      assert.strictEqual(response.status, 404)
      assert.deepInclude(response.body, { _tag: "AgentNotFound", agentId: "nobody" })

      const unknownProvider = yield* client.agents.create({ payload: { provider: "gemini", cwd: workDir } }).pipe(
        Effect.flip
      )
      assert.strictEqual(unknownProvider._tag, "ProviderNotFound")
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("before the host admits, POSTs answer 503 StillOpening and GETs work; admitted, they are served (H1)", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const admission = yield* Admission
      const refused = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } }).pipe(Effect.flip)
      assert.strictEqual(refused._tag, "StillOpening")
      assert.deepStrictEqual(yield* client.agents.list(), [])
      yield* admission.admit
      const created = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      assert.strictEqual(created.provider, "codex")
    }).pipe(Effect.provide(serve(provider, { admission: "opening" })))
  })

  it.effect("once admission is closed, POSTs answer 503 ShuttingDown and GETs still work", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const admission = yield* Admission
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      assert.strictEqual(yield* admission.state, "open")
      yield* admission.close
      assert.strictEqual(yield* admission.state, "closed")
      yield* admission.admit
      assert.strictEqual(yield* admission.state, "closed", "a closed admission is not opened again")

      const refused = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } }).pipe(Effect.flip)
      assert.strictEqual(refused._tag, "ShuttingDown")
      const prompt = yield* client.agents.prompt({ params: { id: agent.agentId }, payload: { text: "hi" } }).pipe(
        Effect.flip
      )
      assert.strictEqual(prompt._tag, "ShuttingDown")
      const sweep = yield* raw("POST", "/v1/sweep", { token })
      assert.strictEqual(sweep.status, 503)
      assert.deepInclude(sweep.body, { _tag: "ShuttingDown" })
      assert.strictEqual((yield* raw("POST", `/v1/runtimes/${agent.agentId}/collect`, { token })).status, 503)
      // Still authenticated first.
      assert.strictEqual((yield* raw("POST", "/v1/sweep")).status, 401)

      assert.strictEqual((yield* client.agents.list()).length, 1)
      assert.strictEqual((yield* client.runtimes.list({ query: {} })).length, 1)
      assert.strictEqual(provider.deliveries.length, 0)
      assert.strictEqual(provider.creates, 1)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("serves the OpenAPI document from the same definition", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const response = yield* raw("GET", "/v1/openapi.json")
      assert.strictEqual(response.status, 200)
      const paths = pathsOf(response.body)
      for (const path of ["/v1/agents", "/v1/agents/{id}", "/v1/agents/{id}/prompts", "/v1/runtimes", "/v1/sweep"]) {
        assert.include(paths, path)
      }
      // The close documents its force and its refusal.
      const close = Schema.decodeUnknownSync(CloseOperation)(response.body).paths["/v1/agents/{id}/close"].post
      assert.deepInclude(close.parameters.map(({ in: where, name, required }) => ({ name, in: where, required })), {
        name: "force",
        in: "query",
        required: false
      })
      assert.include(Object.keys(close.responses), "409")
      assert.include(close.description, "force=true")
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("a waiting prompt holds only its own request", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const agent = yield* client.agents.create({ payload: { provider: "codex", cwd: workDir } })
      const release = yield* Deferred.make<void>()
      provider.turnGate = Deferred.await(release)
      provider.turnEnd = () => Effect.succeed({ reply: "late" })
      const waiting = yield* client.agents.prompt({ params: { id: agent.agentId }, payload: { text: "w", wait: true } })
        .pipe(Effect.forkChild)
      // Other requests are served while it waits.
      const shown = yield* client.agents.get({ params: { id: agent.agentId } })
      assert.isTrue(shown.resident)
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual((yield* Fiber.join(waiting)).output, "late")
    }).pipe(Effect.provide(serve(provider)))
  })
})

describe("ApiServer while the daemon retires", () => {
  it.effect("new work gets 503 DaemonRetiring with Retry-After: 1 while an attempt decides; 60 once a commit failed", () => {
    const provider = new MemoryProvider("codex")
    const probing = Deferred.makeUnsafe<void>()
    const answer = Deferred.makeUnsafe<StopAnswer>()
    provider.probe = () => Deferred.succeed(probing, undefined).pipe(Effect.andThen(Deferred.await(answer)))
    return Effect.gen(function*() {
      const registry = yield* AgentRegistry
      const lifecycle = yield* DaemonLifecycle
      const agent = yield* registry.create({ provider: "codex", cwd: workDir })
      const attempt = yield* Effect.forkChild(lifecycle.retireNow)
      yield* Deferred.await(probing)
      const create = yield* raw("POST", "/v1/agents", { token, body: JSON.stringify({ provider: "codex", cwd: workDir }) })
      const prompt = yield* raw("POST", `/v1/agents/${agent.agentId}/prompts`, { token, body: JSON.stringify({ text: "x" }) })
      for (const refused of [create, prompt]) {
        assert.strictEqual(refused.status, 503)
        assert.strictEqual(refused.retryAfter, "1")
        assert.deepInclude(refused.body, { _tag: "DaemonRetiring", retryAfterSeconds: 1 })
      }
      // Reads keep working.
      assert.strictEqual((yield* raw("GET", "/v1/daemon", { token })).status, 200)
      // The provider permits; the close then fails after the commit: the daemon holds still.
      provider.closeFailure = "the provider would not close"
      yield* Deferred.succeed(answer, stopPermitted)
      assert.strictEqual((yield* Effect.flip(Fiber.join(attempt)))._tag, "RetirementFailed")
      const stuck = yield* raw("POST", `/v1/agents/${agent.agentId}/prompts`, { token, body: JSON.stringify({ text: "x" }) })
      assert.strictEqual(stuck.status, 503)
      assert.strictEqual(stuck.retryAfter, "60")
      assert.deepInclude(stuck.body, { _tag: "DaemonRetiring", retryAfterSeconds: 60 })
    }).pipe(Effect.provide(serve(provider)))
  })
})

describe("ApiServer on hostile input", () => {
  it.effect("an empty token authenticates nobody, not even a request without a token", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      assert.strictEqual((yield* raw("GET", "/v1/agents")).status, 401)
      assert.strictEqual((yield* raw("GET", "/v1/agents", { token: "" })).status, 401)
      assert.strictEqual((yield* raw("POST", "/v1/sweep")).status, 401)
      assert.strictEqual((yield* plainRequest({ method: "GET", path: "/v1/agents", headers: { authorization: "Bearer" } })).status, 401)
      assert.strictEqual((yield* raw("GET", "/v1/health")).status, 200)
    }).pipe(Effect.provide(serve(provider, { token: "" })))
  })

  it.effect("a body over the limit is a typed 413, and nothing is created", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const oversized = JSON.stringify({ provider: "codex", cwd: workDir, labels: { big: "x".repeat(4096) } })
      const declared = yield* raw("POST", "/v1/agents", { token, body: oversized })
      assert.strictEqual(declared.status, 413)
      assert.deepStrictEqual(declared.body, tooLarge(1024))

      // No Content-Length: the reader stops at the limit.
      const chunked = yield* plainRequest({ path: "/v1/agents", headers: authorized, chunks: [oversized.slice(0, 1000), oversized.slice(1000)] })
      assert.isUndefined(chunked.requestContentLength, "sent chunked")
      assert.strictEqual(chunked.status, 413)
      assert.deepStrictEqual(chunked.body, tooLarge(1024))

      // Size comes first: an oversized body without a token is refused for its size.
      assert.strictEqual((yield* raw("POST", "/v1/agents", { body: oversized })).status, 413)
      // So does a prompt's.
      const prompt = yield* raw("POST", "/v1/agents/agent-1/prompts", { token, body: JSON.stringify({ text: "y".repeat(2000) }) })
      assert.deepStrictEqual([prompt.status, prompt.body], [413, tooLarge(1024)])

      assert.strictEqual(provider.creates, 0)
      const client = yield* apiClient
      assert.deepStrictEqual(yield* client.agents.list(), [], "nothing was created")

      // Just under the limit is read and served.
      const fits = JSON.stringify({ provider: "codex", cwd: workDir, labels: { big: "x".repeat(900) } })
      assert.isBelow(fits.length, 1024)
      const created = yield* raw("POST", "/v1/agents", { token, body: fits })
      assert.strictEqual(created.status, 201)
      const chunkedFits = yield* plainRequest({ path: "/v1/agents", headers: authorized, chunks: [fits.slice(0, 500), fits.slice(500)] })
      assert.strictEqual(chunkedFits.status, 201)
      assert.strictEqual(provider.creates, 2)

      const health = yield* raw("GET", "/v1/health")
      assert.strictEqual(health.status, 200)
      assert.deepInclude(health.body, { status: "ok", version: packageVersion })
      assert.strictEqual((yield* raw("GET", "/metrics")).body, metricsText)
    }).pipe(Effect.provide(serve(provider, { maxRequestBytes: 1024 })))
  })

  it.live("a Content-Length over the limit is refused before any of the body is read", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      // Ten bytes of a declared 10 MiB, and the request is never ended: only a server that does not
      // wait for the body can answer.
      const refused = yield* plainRequest({
        path: "/v1/agents",
        headers: { ...authorized, "content-length": String(10 * 1024 * 1024) },
        chunks: ['{"provider'],
        end: false
      }).pipe(Effect.timeout("5 seconds"))
      assert.strictEqual(refused.status, 413)
      assert.deepStrictEqual(refused.body, tooLarge(1_048_576))
      assert.strictEqual(provider.creates, 0)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("the default limit is 1 MiB, and the typed client gets RequestTooLarge", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const client = yield* apiClient
      const error = yield* client.agents.create({
        payload: { provider: "codex", cwd: workDir, labels: { big: "x".repeat(1024 * 1024) } }
      }).pipe(Effect.flip)
      assert.strictEqual(error._tag, "RequestTooLarge")
      assert.deepInclude(error, { message: "Request body exceeds 1048576 bytes", limitBytes: 1_048_576 })
      const fits = yield* client.agents.create({
        payload: { provider: "codex", cwd: workDir, labels: { big: "x".repeat(1024 * 1024 - 200) } }
      })
      assert.strictEqual(fits.provider, "codex")
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("every operation in the OpenAPI document may answer 413 RequestTooLarge", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const document = (yield* raw("GET", "/v1/openapi.json")).body
      const operations = operationsOf(document)
      assert.isAbove(operations.length, 10)
      for (const { method, path, responses } of operations) {
        assert.include(responses, "413", `${method} ${path}`)
      }
    }).pipe(Effect.provide(serve(provider)))
  })
})

const tooLarge = (limitBytes: number) => ({
  type: "urn:quiesce:error:RequestTooLarge",
  title: "Request too large",
  status: 413,
  detail: `Request body exceeds ${limitBytes} bytes`,
  _tag: "RequestTooLarge" as const,
  message: `Request body exceeds ${limitBytes} bytes`,
  limitBytes
})

const authorized = { authorization: `Bearer ${token}`, "content-type": "application/json" }

interface PlainResponse {
  readonly status: number
  readonly body: unknown
  /** The Content-Length the request was sent with, if any. */
  readonly requestContentLength: string | undefined
}

/**
 * One request over node:http to the test server, for what fetch does not do: a body sent in
 * chunks without Content-Length, a declared length that is never sent. Resolves on the response.
 */
const plainRequest = (options: {
  readonly method?: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly chunks?: ReadonlyArray<string>
  readonly end?: boolean
}) =>
  Effect.gen(function*() {
    const address = (yield* HttpServer.HttpServer).address
    const port = NetAddress.isUnixPathAddress(address) ? 0 : address.port
    return yield* Effect.callback<PlainResponse>((resume) => {
      const request = http.request({ host: "127.0.0.1", port, method: options.method ?? "POST", path: options.path, headers: options.headers })
      request.on("response", (response) => {
        let text = ""
        response.on("data", (chunk) => (text += String(chunk)))
        response.on("end", () => {
          let body: unknown = text
          try {
            body = JSON.parse(text)
          } catch {
            // not JSON
          }
          const declared = request.getHeader("content-length")
          resume(Effect.succeed({
            status: response.statusCode ?? 0,
            body,
            requestContentLength: declared === undefined ? undefined : String(declared)
          }))
        })
      })
      request.on("error", (error) => resume(Effect.die(error)))
      for (const chunk of options.chunks ?? []) request.write(chunk)
      if (options.end !== false) request.end()
      return Effect.sync(() => request.destroy())
    })
  })

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

const issuesOf = (body: unknown): ReadonlyArray<{ readonly path: unknown; readonly message: unknown }> => {
  if (!isRecord(body) || !Array.isArray(body.errors)) return []
  return body.errors.filter(isRecord).map((issue) => ({ path: issue.path, message: issue.message }))
}

const agentIdOf = (body: unknown): string => isRecord(body) && typeof body.agentId === "string" ? body.agentId : ""

/** The close operation of an OpenAPI document, as far as a test reads it. */
const CloseOperation = Schema.Struct({
  paths: Schema.Struct({
    "/v1/agents/{id}/close": Schema.Struct({
      post: Schema.Struct({
        description: Schema.String,
        parameters: Schema.Array(Schema.Struct({ name: Schema.String, in: Schema.String, required: Schema.Boolean })),
        responses: Schema.Record(Schema.String, Schema.Unknown)
      })
    })
  })
})

const pathsOf = (body: unknown): ReadonlyArray<string> =>
  isRecord(body) && isRecord(body.paths) ? Object.keys(body.paths) : []

const operationsOf = (document: unknown) => {
  if (!isRecord(document) || !isRecord(document.paths)) return []
  return Object.entries(document.paths).flatMap(([path, item]) =>
    isRecord(item)
      ? Object.entries(item).flatMap(([method, operation]) =>
        isRecord(operation) && isRecord(operation.responses)
          ? [{ method, path, responses: Object.keys(operation.responses) }]
          : []
      )
      : []
  )
}

describe("ApiServer's web pages and their login", () => {
  /** The server's own origin, as a browser on its page would send it. */
  const ownOrigin = Effect.map(HttpServer.HttpServer, (server) =>
    server.address._tag === "UnixPathAddress" ? "" : `http://127.0.0.1:${server.address.port}`)

  const linkPath = (body: unknown) => Schema.decodeUnknownSync(Schema.Struct({ path: Schema.String }))(body).path
  const tagOf = (body: unknown) => Schema.decodeUnknownSync(Schema.Struct({ _tag: Schema.String }))(body)._tag

  /** Signs in with a fresh login link: the code, and the session's cookie and key as headers. */
  const signIn = Effect.fnUntraced(function*() {
    const link = yield* raw("POST", "/v1/login-links", { token })
    assert.strictEqual(link.status, 201)
    const path = linkPath(link.body)
    assert.match(path, /^\/login#[A-Za-z0-9_-]{43}$/)
    const code = path.slice("/login#".length)
    const origin = yield* ownOrigin
    const started = yield* raw("POST", "/v1/session", { body: JSON.stringify({ code }), headers: { origin } })
    assert.strictEqual(started.status, 201)
    const cookie = String(started.setCookie)
    const name = `quiesce_session_${new URL(origin).port}`
    assert.match(cookie, new RegExp(`^${name}=[A-Za-z0-9_-]{43}; Max-Age=43200; Path=/; HttpOnly; SameSite=Strict$`))
    const key = Schema.decodeUnknownSync(Schema.Struct({ key: Schema.String }))(started.body).key
    assert.match(key, /^[A-Za-z0-9_-]{43}$/)
    const value = cookie.slice(name.length + 1, cookie.indexOf(";"))
    return { code, cookie: `${name}=${value}`, session: { cookie: `${name}=${value}`, "quiesce-session-key": key } }
  })

  it.effect("without a session: the login page (401) and no data; with one, the page and the API", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const bare = yield* raw("GET", "/")
      assert.strictEqual(bare.status, 401)
      assert.include(String(bare.body), "quiesce open")
      assert.include(String(bare.headers["content-security-policy"]), "default-src 'none'")
      assert.strictEqual(bare.headers["referrer-policy"], "no-referrer")
      assert.strictEqual((yield* raw("GET", "/v1/agents")).status, 401)
      // A login link needs the token.
      assert.strictEqual((yield* raw("POST", "/v1/login-links")).status, 401)

      const { cookie, session } = yield* signIn()
      const page = yield* raw("GET", "/", { headers: { cookie } })
      assert.strictEqual(page.status, 200)
      assert.include(String(page.body), "/assets/daemon.js")
      assert.notInclude(String(page.body), token)
      assert.strictEqual((yield* raw("GET", "/v1/agents", { headers: session })).status, 200)
      // The cookie alone (every port of the host is sent it) reads nothing; nor the key alone.
      assert.strictEqual((yield* raw("GET", "/v1/agents", { headers: { cookie } })).status, 401)
      assert.strictEqual((yield* raw("GET", "/v1/agents", { headers: { "quiesce-session-key": session["quiesce-session-key"] } })).status, 401)
      assert.strictEqual((yield* raw("GET", "/", { headers: { cookie: `${cookie}x` } })).status, 401)
      // A session cannot hand out logins: only the token can.
      assert.strictEqual((yield* raw("POST", "/v1/login-links", { headers: { ...session, origin: yield* ownOrigin } })).status, 401)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("a login code works once and for five minutes; a session lasts twelve hours", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const origin = { origin: yield* ownOrigin }
      const { code, session } = yield* signIn()
      const again = yield* raw("POST", "/v1/session", { body: JSON.stringify({ code }), headers: origin })
      assert.strictEqual(again.status, 401)
      assert.strictEqual(tagOf(again.body), "LoginCodeInvalid")
      assert.isUndefined(again.setCookie)

      const link = yield* raw("POST", "/v1/login-links", { token })
      const late = linkPath(link.body).slice("/login#".length)
      yield* TestClock.adjust("5 minutes")
      assert.strictEqual((yield* raw("POST", "/v1/session", { body: JSON.stringify({ code: late }), headers: origin })).status, 401)

      yield* TestClock.adjust("11 hours")
      assert.strictEqual((yield* raw("GET", "/v1/agents", { headers: session })).status, 200)
      yield* TestClock.adjust("55 minutes")
      assert.strictEqual((yield* raw("GET", "/v1/agents", { headers: session })).status, 401)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("a change asked with the session must come from the server's own origin; the bearer token needs none", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const { session } = yield* signIn()
      const origin = yield* ownOrigin
      const body = JSON.stringify({ provider: "codex", cwd: workDir })
      const foreignHeaders: ReadonlyArray<Record<string, string>> = [
        { ...session, origin: "http://127.0.0.1:1" },
        { ...session, origin: "null" },
        session,
        { ...session, "sec-fetch-site": "same-site" }
      ]
      for (const headers of foreignHeaders) {
        const refused = yield* raw("POST", "/v1/agents", { body, headers })
        assert.strictEqual(refused.status, 403, JSON.stringify(headers))
        assert.strictEqual(tagOf(refused.body), "CrossOriginRefused")
      }
      assert.deepStrictEqual((yield* raw("GET", "/v1/agents", { headers: session })).body, [])
      assert.strictEqual((yield* raw("POST", "/v1/agents", { body, headers: { ...session, origin } })).status, 201)
      assert.strictEqual((yield* raw("POST", "/v1/agents", { body, headers: { ...session, "sec-fetch-site": "same-origin" } })).status, 201)
      assert.strictEqual((yield* raw("POST", "/v1/agents", { body, token, headers: { origin: "http://elsewhere" } })).status, 201)
      // A login from another origin is refused too, and uses up nothing.
      const link = yield* raw("POST", "/v1/login-links", { token })
      const code = linkPath(link.body).slice("/login#".length)
      const foreign = yield* raw("POST", "/v1/session", { body: JSON.stringify({ code }), headers: { origin: "http://127.0.0.1:1" } })
      assert.strictEqual(foreign.status, 403)
      assert.strictEqual((yield* raw("POST", "/v1/session", { body: JSON.stringify({ code }), headers: { origin } })).status, 201)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("signing out ends the session and clears its cookie", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const { session } = yield* signIn()
      const origin = yield* ownOrigin
      const ended = yield* raw("DELETE", "/v1/session", { headers: { ...session, origin } })
      assert.strictEqual(ended.status, 204)
      assert.match(String(ended.setCookie), /^quiesce_session_\d+=; Max-Age=0;/)
      assert.strictEqual((yield* raw("GET", "/v1/agents", { headers: session })).status, 401)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.effect("serves only the package's page files, each with its type", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const script = yield* raw("GET", "/assets/daemon.js")
      assert.strictEqual(script.status, 200)
      assert.strictEqual(script.contentType, "text/javascript; charset=utf-8")
      assert.strictEqual((yield* raw("GET", "/assets/style.css")).contentType, "text/css; charset=utf-8")
      assert.strictEqual((yield* raw("GET", "/login")).status, 200)
      for (const path of ["/assets/tsconfig.json", "/assets/..%2Fpackage.json", "/assets/daemon.html", "/assets/"]) {
        // As every path nothing serves: 401 before authentication, then 404 RouteNotFound.
        assert.strictEqual((yield* raw("GET", path)).status, 401, path)
        const missing = yield* raw("GET", path, { token })
        assert.deepStrictEqual([missing.status, missing.contentType], [404, "application/problem+json"], path)
        assert.deepInclude(missing.body, { _tag: "RouteNotFound" }, path)
      }
    }).pipe(Effect.provide(serve(provider)))
  })
})
