/**
 * JSON over HTTP to one `opencode serve` process, validated: the probe and the provider both use it.
 *
 * The server answers every route it does not know with `200 text/html` (its web UI), so an HTML
 * answer is never mistaken for data: the content type and the body are checked before the schema.
 */
import { Effect, Schema } from "effect"
import * as http from "node:http"
import { providerRequestSpan, providerRequestSpanName } from "../../../domain/spans.ts"

/** Where the server listens, and the headers every request carries (e.g. `Authorization`). */
export interface Endpoint {
  /** e.g. `http://127.0.0.1:4096`. */
  readonly baseUrl: string
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Keep-alive connections to this server alone; without it every request opens its own. */
  readonly connections?: http.Agent | undefined
}

export type Query = Readonly<Record<string, string>>

/** Why an answer could not be used. `html` is what routes the release does not serve answer. */
export class BadAnswer extends Schema.TaggedError<BadAnswer>()("BadAnswer", {
  kind: Schema.Literals(["transport", "status", "not-found", "html", "content-type", "json", "schema"]),
  message: Schema.String
}) {}

/**
 * The `Authorization` header for a server started with `OPENCODE_SERVER_PASSWORD`: HTTP basic
 * auth, user `opencode` (1.18.33: `OPENCODE_SERVER_USERNAME`, default "opencode").
 */
export const basicAuth = (username: string, password: string): Readonly<Record<string, string>> => ({
  authorization: `Basic ${Buffer.from(`${username}:${password}`).toString("base64")}`
})

const mimeOf = (value: string | null): string => value?.split(";")[0]?.trim().toLowerCase() ?? ""

const isJsonContentType = (value: string | null): boolean => {
  const mime = mimeOf(value)
  return mime === "application/json" || (mime.startsWith("application/") && mime.endsWith("+json"))
}

/** A failure's message, with its underlying cause when it has one. */
export const describeCause = (cause: unknown): string => {
  const inner = cause instanceof Error ? cause.cause : undefined
  return inner === undefined ? String(cause) : `${String(cause)} (${inner instanceof Error ? inner.message : String(inner)})`
}

export const makeUrl = (baseUrl: string, path: string, query: Query): string => {
  const url = new URL(path, baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`)
  for (const [key, value] of Object.entries(query)) url.searchParams.set(key, value)
  return url.toString()
}

const describe = (method: string, path: string, query: Query): string =>
  `${method} /${path}${Object.keys(query).length === 0 ? "" : `?${new URLSearchParams(query).toString()}`}`

interface Request {
  readonly method: "GET" | "POST" | "DELETE"
  readonly path: string
  readonly query?: Query | undefined
  readonly body?: unknown
}

/**
 * Opens one request, on the server's own connection pool when it has one, else on a fresh
 * connection. Never a shared pool: a released runtime's server dies with keep-alive connections
 * open, and the next server often listens on the same port (1.18.33 tries 4096 first), so a socket
 * pooled across servers would be reset.
 */
export const openRequest = (
  endpoint: Endpoint,
  request: Request & { readonly accept: string },
  onResponse: (response: http.IncomingMessage) => void,
  onError: (cause: unknown) => void
): http.ClientRequest => {
  const body = request.body === undefined ? undefined : JSON.stringify(request.body)
  const req = http.request(makeUrl(endpoint.baseUrl, request.path, request.query ?? {}), {
    method: request.method,
    agent: endpoint.connections ?? false,
    headers: {
      accept: request.accept,
      ...(body === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(body) }),
      ...endpoint.headers
    }
  }, onResponse)
  req.on("error", onError)
  req.end(body)
  return req
}

interface Answer {
  readonly status: number
  readonly contentType: string | null
  readonly text: string
  readonly where: string
}

/** One request; the answer's status and text, with HTML rejected whatever its status. */
const send = (endpoint: Endpoint, request: Request): Effect.Effect<Answer, BadAnswer> =>
  Effect.callback<Answer, BadAnswer>((resume) => {
    const where = describe(request.method, request.path, request.query ?? {})
    const transport = (cause: unknown) =>
      resume(Effect.fail(new BadAnswer({ kind: "transport", message: `${where}: ${describeCause(cause)}` })))
    const req = openRequest(endpoint, { ...request, accept: "application/json" }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("error", transport)
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        const header = response.headers["content-type"]
        const contentType = header === undefined ? null : header
        if (mimeOf(contentType) === "text/html" || /^\s*</.test(text)) {
          resume(Effect.fail(new BadAnswer({ kind: "html", message: `${where}: answered HTML (route not served)` })))
        } else {
          resume(Effect.succeed({ status: response.statusCode ?? 0, contentType, text, where }))
        }
      })
    }, transport)
    return Effect.sync(() => req.destroy())
  }).pipe(Effect.withSpan(providerRequestSpanName, providerRequestSpan("opencode", "http", `${request.method} /${request.path}`)))

/** A request whose `200` answer is JSON decoded with `schema`. */
export const requestJson = <S extends Schema.Top & { readonly DecodingServices: never }>(
  endpoint: Endpoint,
  request: Request,
  schema: S
): Effect.Effect<S["Type"], BadAnswer> =>
  Effect.gen(function*() {
    const { contentType, status, text, where } = yield* send(endpoint, request)
    if (status !== 200) {
      return yield* new BadAnswer({
        kind: status === 404 ? "not-found" : "status",
        message: `${where}: status ${status}: ${text.slice(0, 200)}`
      })
    }
    if (!isJsonContentType(contentType)) {
      return yield* new BadAnswer({
        kind: "content-type",
        message: `${where}: content type ${contentType ?? "(none)"}, expected JSON`
      })
    }
    const json = yield* Effect.try({
      try: (): unknown => JSON.parse(text),
      catch: (cause) => new BadAnswer({ kind: "json", message: `${where}: malformed JSON: ${String(cause)}` })
    })
    return yield* Schema.decodeUnknownEffect(schema)(json).pipe(
      Effect.mapError((issue) => new BadAnswer({ kind: "schema", message: `${where}: ${String(issue)}` }))
    )
  })

/** A request answered `204 No Content` (e.g. `prompt_async`). */
export const requestNoContent = (endpoint: Endpoint, request: Request): Effect.Effect<void, BadAnswer> =>
  Effect.gen(function*() {
    const { status, text, where } = yield* send(endpoint, request)
    if (status !== 204) {
      return yield* new BadAnswer({
        kind: status === 404 ? "not-found" : "status",
        message: `${where}: status ${status}, expected 204: ${text.slice(0, 200)}`
      })
    }
  })

/** `GET path?query`, decoded. */
export const getJson = <S extends Schema.Top & { readonly DecodingServices: never }>(
  endpoint: Endpoint,
  path: string,
  query: Query,
  schema: S
): Effect.Effect<S["Type"], BadAnswer> => requestJson(endpoint, { method: "GET", path, query }, schema)
