import { describe, expect, it } from "@effect/vitest"
import { QuiesceApi } from "../../../src/api/QuiesceApi.ts"
import { apiRoutes } from "../../../src/layers/http/requestProblems.ts"
import { routedThroughHub, spanNameOf } from "../../../src/layers/http/spanNames.ts"

describe("server span names", () => {
  const daemon = spanNameOf(apiRoutes(QuiesceApi))
  const hub = spanNameOf(routedThroughHub(apiRoutes(QuiesceApi)))

  it("name a request by its method and the route that serves it, whatever its ids and query", () => {
    expect(daemon("POST", "/v1/agents/agent-1/prompts")).toBe("POST /v1/agents/:id/prompts")
    expect(daemon("GET", "/v1/agents/agent-2/turns?limit=5")).toBe("GET /v1/agents/:id/turns")
    expect(daemon("GET", "/v1/agents")).toBe("GET /v1/agents")
    expect(daemon("HEAD", "/v1/agents")).toBe("HEAD /v1/agents")
  })

  it("keep the method alone for a path or a method no route serves", () => {
    expect(daemon("GET", "/v1/agents/a/b/c/d")).toBe("GET")
    expect(daemon("PATCH", "/v1/agents")).toBe("PATCH")
    expect(daemon("GET", "/%E0%A4%A")).toBe("GET")
  })

  it("name a request the hub routes after the daemon's route under its home", () => {
    expect(hub("POST", "/v1/homes/work/agents/agent-1/prompts")).toBe("POST /v1/homes/:home/agents/:id/prompts")
    expect(hub("GET", "/v1/homes/work/agents")).toBe("GET /v1/homes/:home/agents")
    expect(hub("GET", "/v1/agents")).toBe("GET")
  })
})
