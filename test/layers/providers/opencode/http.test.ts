import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { createServer } from "node:http"
import { requestJson } from "../../../../src/layers/providers/opencode/http.ts"
import { recordingTracer } from "../../../support/recordingTracer.ts"

/** A server on 127.0.0.1 answering every request with `{"ok":true}`, closed with the scope. */
const jsonServer = Effect.acquireRelease(
  Effect.callback<ReturnType<typeof createServer>>((resume) => {
    const server = createServer((_, response) => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ ok: true }))
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) => Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))
)

describe("OpenCode's HTTP calls", () => {
  it.live("each is a Provider.request span naming the server and the route", () =>
    Effect.gen(function*() {
      const server = yield* jsonServer
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const { tracer: recording, spans } = recordingTracer()
      const answer = yield* requestJson(
        { baseUrl: `http://127.0.0.1:${port}` },
        { method: "POST", path: "session/ses_1/message", query: { directory: "/w" }, body: {} },
        Schema.Struct({ ok: Schema.Boolean })
      ).pipe(Effect.withTracer(recording))
      assert.isTrue(answer.ok)
      const request = spans.find((span) => span.name === "Provider.request")
      assert.strictEqual(request?.attributes.get("quiesce.peer"), "opencode")
      assert.strictEqual(request?.attributes.get("rpc.system"), "http")
      assert.strictEqual(request?.attributes.get("rpc.method"), "POST /session/ses_1/message")
      assert.strictEqual(request?.kind, "client")
    }).pipe(Effect.scoped))
})
