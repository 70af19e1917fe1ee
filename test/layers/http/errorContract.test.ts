/**
 * The API keeps its own error contract: every operation of the daemon's published OpenAPI
 * document, sent malformed input, answers every non-2xx with the one problem shape
 * (docs/daemon.md) and never a 5xx; and the document declares that shape for every error.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Layer, Logger } from "effect"
import { HttpServer } from "effect/http"
import { NetAddress } from "effect/net"
import * as TestApiServer from "../../../src/testing/TestApiServer.ts"
import { MemoryProvider } from "../../../src/testing/MemoryProvider.ts"
import { memoryDaemon } from "../../support/memoryDaemon.ts"
import { isRecord, send, type Target, walk } from "../../support/errorContract.ts"

const token = "test-token"

const serve = (provider: MemoryProvider, renderMetrics: Effect.Effect<string> = Effect.succeed("")) =>
  TestApiServer.layer({ token, renderMetrics }).pipe(Layer.provideMerge(memoryDaemon({ provider })))

const target = Effect.map(HttpServer.HttpServer, (server): Target => ({
  port: NetAddress.isUnixPathAddress(server.address) ? 0 : server.address.port,
  token
}))

/** Every error response of every operation: its status and the schema of its problem body (resolved). */
const errorBodiesOf = (document: unknown) => {
  if (!isRecord(document) || !isRecord(document["paths"]) || !isRecord(document["components"])) return []
  const schemas = isRecord(document["components"]["schemas"]) ? document["components"]["schemas"] : {}
  const resolve = (schema: unknown): ReadonlyArray<unknown> => {
    if (!isRecord(schema)) return [schema]
    if (typeof schema["$ref"] === "string") return resolve(schemas[schema["$ref"].replace("#/components/schemas/", "")])
    if (Array.isArray(schema["anyOf"])) return schema["anyOf"].flatMap(resolve)
    return [schema]
  }
  return Object.entries(document["paths"]).flatMap(([path, item]) =>
    Object.entries(isRecord(item) ? item : {}).flatMap(([method, operation]) => {
      const responses = isRecord(operation) && isRecord(operation["responses"]) ? operation["responses"] : {}
      return Object.entries(responses).flatMap(([status, response]) => {
        if (Number(status) < 400) return []
        const content = isRecord(response) && isRecord(response["content"]) ? response["content"] : {}
        const problem = isRecord(content["application/problem+json"]) ? content["application/problem+json"]["schema"] : undefined
        return [{ operation: `${method.toUpperCase()} ${path} ${status}`, contentTypes: Object.keys(content), bodies: resolve(problem) }]
      })
    })
  )
}

describe("the daemon API's error contract", () => {
  it.live("every operation of its OpenAPI document, sent malformed input, answers the one problem shape and no 5xx", () =>
    Effect.gen(function*() {
      const server = yield* target
      const document = (yield* Effect.promise(() => send(server, { method: "GET", path: "/v1/openapi.json", token: null }))).body
      const result = yield* Effect.promise(() => walk(server, document))
      assert.isAbove(result.operations, 20)
      assert.isAbove(result.sent, 150)
      assert.deepStrictEqual(result.violations, [])
    }).pipe(Effect.provide(serve(new MemoryProvider("codex")))))

  it.live("a wrong method is 405 naming the methods the path takes; an unknown path 404; both only once authenticated", () =>
    Effect.gen(function*() {
      const server = yield* target
      const wrong = yield* Effect.promise(() => send(server, { method: "PATCH", path: "/v1/agents" }))
      assert.strictEqual(wrong.status, 405)
      assert.strictEqual(wrong.allow, "GET, HEAD, POST")
      assert.deepStrictEqual(wrong.body, {
        type: "urn:quiesce:error:MethodNotAllowed",
        title: "Method not allowed",
        status: 405,
        detail: "/v1/agents takes GET, HEAD, POST, not PATCH",
        _tag: "MethodNotAllowed",
        message: "/v1/agents takes GET, HEAD, POST, not PATCH",
        method: "PATCH",
        path: "/v1/agents",
        allow: ["GET", "HEAD", "POST"]
      })
      const unknown = yield* Effect.promise(() => send(server, { method: "GET", path: "/v1/nope?x=1" }))
      assert.deepStrictEqual([unknown.status, unknown.body], [404, {
        type: "urn:quiesce:error:RouteNotFound",
        title: "Route not found",
        status: 404,
        detail: "No route GET /v1/nope",
        _tag: "RouteNotFound",
        message: "No route GET /v1/nope",
        method: "GET",
        path: "/v1/nope"
      }])
      // Who has no token learns nothing of the routes.
      for (const request of [{ method: "PATCH", path: "/v1/agents" }, { method: "GET", path: "/v1/nope" }, { method: "GET", path: "/v1/agents/agent-%ff" }]) {
        const refused = yield* Effect.promise(() => send(server, { ...request, token: null }))
        assert.deepInclude(refused, { status: 401, contentType: "application/problem+json" }, request.path)
        assert.deepInclude(refused.body, { _tag: "Unauthorized" }, request.path)
      }
      // Unknown query parameters are ignored (a body's unknown members are not).
      assert.strictEqual((yield* Effect.promise(() => send(server, { method: "GET", path: "/v1/runtimes?scope=runner&other=1" }))).status, 200)
      const badEscape = yield* Effect.promise(() => send(server, { method: "GET", path: "/v1/agents/agent-%ff" }))
      assert.strictEqual(badEscape.status, 400)
      assert.deepInclude(badEscape.body, {
        _tag: "InvalidRequest",
        errors: [{ path: ["path"], message: "Expected valid percent-encoded UTF-8" }]
      })
    }).pipe(Effect.provide(serve(new MemoryProvider("codex")))))

  it.live("a body's unknown members, __proto__ among them, are refused with a typed 400 naming each; nothing is created", () => {
    const provider = new MemoryProvider("codex")
    return Effect.gen(function*() {
      const server = yield* target
      const answer = yield* Effect.promise(() =>
        send(server, { method: "POST", path: "/v1/agents", body: `{"provider":"codex","cwd":"/","__proto__":{"x":1},"extra":2}` })
      )
      assert.strictEqual(answer.status, 400)
      assert.deepStrictEqual(answer.body, {
        type: "urn:quiesce:error:InvalidRequest",
        title: "Invalid request",
        status: 400,
        detail: "Invalid request: payload.__proto__: Expected no excess property; payload.extra: Expected no excess property",
        _tag: "InvalidRequest",
        message: "Invalid request: payload.__proto__: Expected no excess property; payload.extra: Expected no excess property",
        errors: [
          { path: ["payload", "__proto__"], message: "Expected no excess property" },
          { path: ["payload", "extra"], message: "Expected no excess property" }
        ]
      })
      assert.strictEqual(provider.creates, 0)
    }).pipe(Effect.provide(serve(provider)))
  })

  it.live("the OpenAPI document declares every error of every operation as the problem shape, refusing unknown body members", () =>
    Effect.gen(function*() {
      const server = yield* target
      const document = (yield* Effect.promise(() => send(server, { method: "GET", path: "/v1/openapi.json", token: null }))).body
      const errors = errorBodiesOf(document)
      assert.isAbove(errors.length, 100)
      const wrong = errors.flatMap(({ bodies, contentTypes, operation }) => {
        if (contentTypes.join() !== "application/problem+json") return [`${operation}: ${contentTypes.join()}`]
        return bodies.flatMap((body) => {
          const required = isRecord(body) && Array.isArray(body["required"]) ? body["required"] : []
          const type = isRecord(body) && isRecord(body["properties"]) && isRecord(body["properties"]["type"]) ? body["properties"]["type"] : {}
          const missing = ["type", "title", "status", "detail", "_tag", "message"].filter((member) => !required.includes(member))
          return [
            ...(missing.length === 0 ? [] : [`${operation}: ${missing.join(", ")} not required`]),
            ...(type["pattern"] === "^urn:quiesce:error:[A-Za-z]+$" ? [] : [`${operation}: type ${JSON.stringify(type)}`])
          ]
        })
      })
      assert.deepStrictEqual(wrong, [])
      // Every 400 is the typed InvalidRequest, never the framework's `about:blank` problem.
      assert.notInclude(JSON.stringify(document), "about:blank")
      const create = isRecord(document) && isRecord(document["paths"]) && isRecord(document["paths"]["/v1/agents"])
        ? document["paths"]["/v1/agents"]["post"]
        : undefined
      assert.include(JSON.stringify(create), `"additionalProperties":false`)
      const info = isRecord(document) && isRecord(document["info"]) ? document["info"] : {}
      assert.include(String(info["description"]), "400 InvalidRequest")
    }).pipe(Effect.provide(serve(new MemoryProvider("codex")))))

  it.live("a defect is logged and answered 500 InternalError in the problem shape", () => {
    const logged: Array<string> = []
    // Captures the server's log (and keeps the test quiet).
    const capture = Logger.layer([Logger.make(({ cause, message }) => {
      logged.push(`${String(message)} ${Cause.pretty(cause)}`)
    })])
    return Effect.gen(function*() {
      const server = yield* target
      const answer = yield* Effect.promise(() => send(server, { method: "GET", path: "/metrics", token: null }))
      assert.strictEqual(answer.status, 500)
      assert.strictEqual(answer.contentType, "application/problem+json")
      assert.deepStrictEqual(answer.body, {
        type: "urn:quiesce:error:InternalError",
        title: "Internal error",
        status: 500,
        detail: "The server failed to answer (a bug; it is logged)",
        _tag: "InternalError",
        message: "The server failed to answer (a bug; it is logged)"
      })
      assert.isTrue(logged.some((line) => line.includes("metrics exploded")), logged.join("\n"))
    }).pipe(Effect.provide(serve(new MemoryProvider("codex"), Effect.die(new Error("metrics exploded"))).pipe(Layer.provide(capture))))
  })
})
