/**
 * A model endpoint on 127.0.0.1 that scripts real turns of the agent CLIs with no network and no
 * key. Each wire dialect (OpenAI chat completions, OpenAI responses, Anthropic messages) is its
 * own module; this one routes requests to them and records what was asked.
 */
import { Effect, type Scope } from "effect"
import * as http from "node:http"
import type { ModelPolicy, ModelRequest } from "./policy.ts"

/** What a dialect module exports: it answers one POST whose JSON body has been read. */
export interface Dialect {
  /** The request paths it serves, without any `/v1` prefix, e.g. "/chat/completions". */
  readonly paths: ReadonlyArray<string>
  readonly handle: (
    body: unknown,
    response: http.ServerResponse,
    policy: ModelPolicy,
    record: (request: ModelRequest) => void
  ) => void
}

export interface FakeModel {
  /** e.g. `http://127.0.0.1:41234` (no `/v1`). */
  readonly origin: string
  /** Every model request answered, in order. */
  readonly requests: ReadonlyArray<ModelRequest>
  /** Requests to paths no dialect serves, as `METHOD /path`; they are answered 404. */
  readonly unrouted: ReadonlyArray<string>
}

/** Serves the model for the scope's lifetime; the listener is closed with the scope. */
export const fakeModelServer = (
  policy: ModelPolicy,
  dialects: ReadonlyArray<Dialect>
): Effect.Effect<FakeModel, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<{ readonly server: http.Server; readonly model: FakeModel }>((resume) => {
      const requests: Array<ModelRequest> = []
      const unrouted: Array<string> = []
      const server = http.createServer((req, res) => {
        const path = (req.url ?? "/").split("?")[0]!.replace(/^\/v1(?=\/)/, "")
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          if (req.method === "GET" && path === "/models") {
            res.writeHead(200, { "content-type": "application/json" })
            res.end(JSON.stringify({ object: "list", data: [{ id: "fake-model", object: "model", created: 0, owned_by: "quiesce" }] }))
            return
          }
          const dialect = req.method === "POST" ? dialects.find((d) => d.paths.includes(path)) : undefined
          if (dialect === undefined) {
            unrouted.push(`${req.method} ${req.url}`)
            res.writeHead(404, { "content-type": "application/json" })
            res.end(JSON.stringify({ error: { type: "not_found", message: `no route ${req.method} ${req.url}` } }))
            return
          }
          let body: unknown
          try {
            body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
          } catch {
            res.writeHead(400, { "content-type": "application/json" })
            res.end(JSON.stringify({ error: { type: "invalid_request_error", message: "body is not JSON" } }))
            return
          }
          dialect.handle(body, res, policy, (request) => requests.push(request))
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({ server, model: { origin: `http://127.0.0.1:${port}`, requests, unrouted } }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ model }) => model))

/** Writes one server-sent event; `event` is omitted for dialects that send data lines only. */
export const writeEvent = (response: http.ServerResponse, data: unknown, event?: string): void => {
  response.write(`${event === undefined ? "" : `event: ${event}\n`}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`)
}

export const startEventStream = (response: http.ServerResponse): void => {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
}

/** Field access on JSON of unknown shape, without casts. */
export const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? Reflect.get(value, key) : undefined

export const text = (value: unknown): string => (typeof value === "string" ? value : "")

export const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])
