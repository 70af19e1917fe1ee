/**
 * Walks a server's published OpenAPI document and sends every operation malformed input: no
 * token, a wrong method, unknown paths, bad path ids (`%ff`, over-long), bodies that are not
 * JSON, not objects, in another media type, missing fields, unknown fields, `__proto__`, wrong
 * types, and bad query values. Every answer that is not a 2xx must be the API's one problem shape,
 * and none may be a 5xx. Requests go over node:http, which sends a path exactly as written.
 */
import * as http from "node:http"

export interface Answer {
  readonly status: number
  readonly contentType: string | undefined
  readonly allow: string | undefined
  readonly body: unknown
}

export interface Target {
  readonly port: number
  readonly token: string
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** One request to 127.0.0.1; `token` null sends none. Bounded: a hang fails the test. */
export const send = (
  target: Target,
  request: { readonly method: string; readonly path: string; readonly token?: string | null; readonly body?: string; readonly contentType?: string }
) =>
  new Promise<Answer>((resolve, reject) => {
    const headers: Record<string, string> = {}
    const token = request.token === undefined ? target.token : request.token
    if (token !== null) headers["authorization"] = `Bearer ${token}`
    if (request.body !== undefined) {
      headers["content-type"] = request.contentType ?? "application/json"
      headers["content-length"] = String(Buffer.byteLength(request.body))
    }
    const outgoing = http.request({ host: "127.0.0.1", port: target.port, method: request.method, path: request.path, headers, timeout: 10_000 })
    outgoing.on("timeout", () => outgoing.destroy(new Error(`${request.method} ${request.path}: no answer in 10 s`)))
    outgoing.on("response", (response) => {
      let text = ""
      response.on("data", (chunk) => (text += String(chunk)))
      response.on("end", () =>
        resolve({
          status: response.statusCode ?? 0,
          contentType: response.headers["content-type"],
          allow: response.headers["allow"],
          body: parse(text)
        }))
      response.on("error", reject)
    })
    outgoing.on("error", reject)
    outgoing.end(request.body)
  })

/** A JSON object (not an array, not null). */
export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** What is wrong with an answer, against the one problem shape; empty when nothing is. */
export const problemShapeViolations = (answer: Answer): ReadonlyArray<string> => {
  if (answer.status >= 200 && answer.status < 300) return []
  const violations: Array<string> = []
  if (answer.status >= 500) violations.push(`a ${answer.status}`)
  if (answer.contentType !== "application/problem+json") violations.push(`content type ${answer.contentType}`)
  const body = answer.body
  if (!isRecord(body)) return [...violations, `body ${JSON.stringify(body)}`]
  for (const member of ["type", "title", "detail", "_tag", "message"]) {
    if (typeof body[member] !== "string") violations.push(`no string ${member}`)
  }
  if (body["status"] !== answer.status) violations.push(`status member ${String(body["status"])}`)
  if (typeof body["_tag"] === "string" && body["type"] !== `urn:quiesce:error:${body["_tag"]}`) {
    violations.push(`type ${String(body["type"])} for _tag ${body["_tag"]}`)
  }
  return violations
}

interface Operation {
  readonly method: string
  readonly path: string
  readonly secured: boolean
  readonly pathParams: ReadonlyArray<string>
  readonly queryParams: ReadonlyArray<string>
  /** The JSON body's schema, when the operation takes one. */
  readonly body: Record<string, unknown> | undefined
}

const methods = ["get", "put", "post", "delete", "patch", "head", "options"] as const

/** The operations of an OpenAPI document. */
export const operationsOf = (document: unknown): ReadonlyArray<Operation> => {
  if (!isRecord(document) || !isRecord(document["paths"])) return []
  return Object.entries(document["paths"]).flatMap(([path, item]) =>
    methods.flatMap((method) => {
      const operation = isRecord(item) ? item[method] : undefined
      if (!isRecord(operation)) return []
      const parameters = Array.isArray(operation["parameters"]) ? operation["parameters"].filter(isRecord) : []
      const named = (where: string) =>
        parameters.flatMap((parameter) => parameter["in"] === where && typeof parameter["name"] === "string" ? [parameter["name"]] : [])
      const content = isRecord(operation["requestBody"]) && isRecord(operation["requestBody"]["content"])
        ? operation["requestBody"]["content"]["application/json"]
        : undefined
      const schema = isRecord(content) && isRecord(content["schema"]) ? content["schema"] : undefined
      return [{
        method: method.toUpperCase(),
        path,
        secured: Array.isArray(operation["security"]) && operation["security"].length > 0,
        pathParams: named("path"),
        queryParams: named("query"),
        body: schema
      }]
    })
  )
}

/** `/v1/agents/{id}` with every parameter `value` (given as it goes on the wire). */
const fill = (path: string, value: string) => path.replace(/\{[^}]+\}/g, value)

/** A value of another type than the property's schema says. */
const wrongTypeFor = (schema: unknown): unknown => {
  const type = isRecord(schema) ? schema["type"] : undefined
  return type === "string" ? 42 : type === "array" ? { not: "an array" } : "not-the-right-type"
}

export interface Expectation {
  readonly what: string
  readonly method: string
  readonly path: string
  readonly answer: Answer
  /** The status the request must get, when one is certain. */
  readonly status?: number
  /** A member of `errors` whose path the answer must name (`["payload", "extra"]`). */
  readonly names?: ReadonlyArray<string>
}

/** What is wrong with one answer: its shape, its status, the path it must name. */
const violationsOf = (expectation: Expectation): ReadonlyArray<string> => {
  const { answer } = expectation
  const violations = [...problemShapeViolations(answer)]
  if (expectation.status !== undefined && answer.status !== expectation.status) {
    violations.push(`status ${answer.status}, not ${expectation.status} (${JSON.stringify(answer.body)})`)
  }
  if (expectation.names !== undefined) {
    const errors = isRecord(answer.body) && Array.isArray(answer.body["errors"]) ? answer.body["errors"] : []
    const named = errors.some((issue) => isRecord(issue) && JSON.stringify(issue["path"]) === JSON.stringify(expectation.names))
    if (!named) violations.push(`errors do not name ${JSON.stringify(expectation.names)}`)
  }
  return violations
}

/**
 * Sends every hostile variant of every operation of the document and returns each violation, as
 * `METHOD path (what): violation` (empty when the server keeps its contract), and how many
 * requests were sent. `id` is a path parameter value that names nothing.
 */
export const walk = async (target: Target, document: unknown, id = "agent-none") => {
  const expectations: Array<Expectation> = []
  const check = async (
    what: string,
    request: Parameters<typeof send>[1],
    expected: { readonly status?: number; readonly names?: ReadonlyArray<string> } = {}
  ) => expectations.push({ what, method: request.method, path: request.path, answer: await send(target, request), ...expected })

  const operations = operationsOf(document)
  const byPath = new Map<string, Array<string>>()
  for (const operation of operations) byPath.set(operation.path, [...(byPath.get(operation.path) ?? []), operation.method])

  for (const operation of operations) {
    const { method } = operation
    const path = fill(operation.path, id)
    if (operation.secured) {
      await check("no token", { method, path, token: null }, { status: 401 })
      await check("wrong token", { method, path, token: "not-the-token" }, { status: 401 })
    }
    const taken = byPath.get(operation.path) ?? []
    const wrongMethod = ["PATCH", "PUT", "DELETE", "POST"].find((each) => !taken.includes(each))
    if (wrongMethod !== undefined) await check(`wrong method ${wrongMethod}`, { method: wrongMethod, path }, { status: 405 })

    // Requests that reach no handler: nothing about them is valid.
    if (operation.pathParams.length > 0) {
      await check("id with an invalid UTF-8 escape", { method, path: fill(operation.path, "agent-%ff") }, { status: 400 })
      await check("id over the router's limit", { method, path: fill(operation.path, "a".repeat(300)) }, { status: 404 })
      await check("id with a slash", { method, path: fill(operation.path, "agent%2Fx") })
    }
    for (const name of operation.queryParams) {
      await check(`bad ${name}`, { method, path: `${path}?${name}=bogus` }, { status: 400, names: ["query", name] })
      await check(`${name} with an invalid escape`, { method, path: `${path}?${name}=%ff` }, { status: 400 })
    }
    const body = operation.body
    if (body !== undefined) {
      const properties = isRecord(body["properties"]) ? body["properties"] : {}
      const required = Array.isArray(body["required"]) ? body["required"].filter((key) => typeof key === "string") : []
      await check("empty object", { method, path, body: "{}" }, { status: 400, ...(required[0] === undefined ? {} : { names: ["payload", required[0]] }) })
      await check("unknown field", { method, path, body: JSON.stringify({ unexpected: 1 }) }, { status: 400, names: ["payload", "unexpected"] })
      await check("__proto__", { method, path, body: "{\"__proto__\":{\"polluted\":true}}" }, { status: 400, names: ["payload", "__proto__"] })
      for (const [name, schema] of Object.entries(properties)) {
        await check(`wrong type for ${name}`, { method, path, body: JSON.stringify({ [name]: wrongTypeFor(schema) }) }, { status: 400, names: ["payload", name] })
      }
      await check("not JSON", { method, path, body: "{not json" }, { status: 400 })
      await check("an array", { method, path, body: "[]" }, { status: 400 })
      await check("null", { method, path, body: "null" }, { status: 400 })
      await check("text/plain", { method, path, body: "{}", contentType: "text/plain" }, { status: 415 })
    }
  }
  for (const path of ["/v1/nope", "/v1/agents/x/y/z", "/nope", "/v1/agents/%ff/x"]) {
    await check("unknown path without a token", { method: "GET", path, token: null }, { status: 401 })
  }
  await check("unknown path", { method: "GET", path: "/v1/nope" }, { status: 404 })
  await check("unknown path, another method", { method: "DELETE", path: "/nope/deeper" }, { status: 404 })
  await check("path not valid UTF-8", { method: "GET", path: "/v1/agents/%ff/x" }, { status: 400 })

  return {
    sent: expectations.length,
    operations: operations.length,
    violations: expectations.flatMap((expectation) =>
      violationsOf(expectation).map((violation) => `${expectation.method} ${expectation.path} (${expectation.what}): ${violation}`)
    )
  }
}
