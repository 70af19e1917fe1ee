/**
 * The hub's classification of routed requests comes from the daemon API's `StartsDaemon`
 * annotations: every endpoint decides it, and the mutations are exactly those the hub listed as
 * regular expressions before the annotations (create, prompt, interrupt, permission answer, delete).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Option } from "effect"
import { HttpApi } from "effect/http-api"
import { StartsDaemon } from "../../../src/api/annotations.ts"
import { QuiesceApi } from "../../../src/api/QuiesceApi.ts"
import { startingRoutes, startsDaemon } from "../../../src/layers/hub/requests.ts"

/** The hub's list before the annotations, as it was written. */
const previousMutationRoutes = [
  /^\/v1\/agents$/,
  /^\/v1\/agents\/[^/]+\/prompts$/,
  /^\/v1\/agents\/[^/]+\/interrupt$/,
  /^\/v1\/agents\/[^/]+\/permissions\/[^/]+$/
]
const previousAgentPath = /^\/v1\/agents\/[^/]+$/
const previouslyStartsDaemon = (request: { readonly method: string; readonly path: string }) =>
  (request.method === "POST" && previousMutationRoutes.some((pattern) => pattern.test(request.path))) ||
  (request.method === "DELETE" && previousAgentPath.test(request.path))

const endpoints = () => {
  const all: Array<{ readonly method: string; readonly path: string; readonly decided: Option.Option<boolean> }> = []
  HttpApi.reflect(QuiesceApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) =>
      all.push({ method: endpoint.method, path: endpoint.path, decided: Context.getOption(endpoint.annotations, StartsDaemon) })
  })
  return all
}

/** A concrete path of an endpoint's pattern. */
const concrete = (path: string, value: string) => path.replace(/:[A-Za-z]+/g, value)

describe("which requests may start a retired home's daemon, from the endpoints' annotations", () => {
  it("every endpoint of the daemon's API decides it", () => {
    const undecided = endpoints().filter((endpoint) => Option.isNone(endpoint.decided))
    assert.deepStrictEqual(undecided.map((endpoint) => `${endpoint.method} ${endpoint.path}`), [])
  })

  it("the annotated mutations are the ones the hub listed before", () => {
    assert.deepStrictEqual(
      startingRoutes.map((route) => `${route.method} ${route.path}`).sort(),
      [
        "DELETE /v1/agents/:id",
        "POST /v1/agents",
        "POST /v1/agents/:id/interrupt",
        "POST /v1/agents/:id/permissions/:permissionId",
        "POST /v1/agents/:id/prompts"
      ]
    )
  })

  it("classifies every request as the previous regular expressions did", () => {
    const methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    const paths = [
      ...endpoints().flatMap((endpoint) =>
        ["a", "a%2Fb", "x.y", ""].flatMap((value) => [concrete(endpoint.path, value), `${concrete(endpoint.path, value)}/`])
      ),
      "/v1",
      "/v1/",
      "/v1/agents//prompts",
      "/v1/agents/a/b/prompts",
      "/v1/agents/a/permissions/",
      "/v1/agents/a/permissions/p/q",
      "/V1/agents",
      "/v1/agentsx",
      "/v1/nothing",
      "//v1/agents"
    ]
    for (const method of methods) {
      for (const path of paths) {
        assert.strictEqual(startsDaemon({ method, path }), previouslyStartsDaemon({ method, path }), `${method} ${path}`)
      }
    }
  })
})
