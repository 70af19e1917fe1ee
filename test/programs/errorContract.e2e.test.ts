/**
 * The daemon and the hub keep the API's error contract, as a user runs them: real `quiesce daemon`
 * and `quiesce hub` processes on loopback. Every operation of each one's published OpenAPI
 * document, sent malformed input (and, for the hub, the forwarded requests it refuses itself),
 * answers every non-2xx with the one problem shape and never a 5xx. The daemon's API in-process,
 * with the checks of its document, is test/layers/http/errorContract.test.ts.
 */
import { afterEach, describe, expect, it } from "vitest"
import { join } from "node:path"
import { problemShapeViolations, send, walk } from "../support/errorContract.ts"
import { cleanUpDaemons, freePort, groupAlive, newHome, ready, startDaemon, until } from "../support/daemonProcess.ts"
import { cleanUpHubs, newHubRoot, startHub, writeHubConfig } from "../support/hubProcess.ts"

afterEach(cleanUpHubs)
afterEach(cleanUpDaemons)

describe("the daemon's error contract", () => {
  it("every operation of its OpenAPI document, sent malformed input, answers the one problem shape, no 5xx, and creates nothing", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const target = { port: daemon.port, token: daemon.token() }
    const document = (await send(target, { method: "GET", path: "/v1/openapi.json", token: null })).body
    const result = await walk(target, document)
    expect(result.operations).toBeGreaterThan(20)
    expect(result.violations).toEqual([])
    // No malformed request made an agent.
    expect((await send(target, { method: "GET", path: "/v1/agents" })).body).toEqual([])
    // Stopped, the daemon leaves no process behind.
    const pid = daemon.process.pid ?? 0
    process.kill(-pid, "SIGTERM")
    await until(() => !groupAlive(pid), "the daemon's process group is gone", 8_000)
  })
})

describe("the hub's error contract", () => {
  it("every operation of its OpenAPI document and the forwarding it refuses answer the one problem shape, no 5xx", async () => {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    // A home whose daemon never starts: nothing here is forwarded to it.
    writeHubConfig(hubHome, [{ name: "work", dir: join(root, "work") }])
    const hub = await startHub(hubHome)
    const target = { port: hub.port, token: hub.token }

    const document = (await send(target, { method: "GET", path: "/v1/openapi.json", token: null })).body
    const result = await walk(target, document, "no-such-home")
    expect(result.operations).toBeGreaterThan(3)
    expect(result.violations).toEqual([])

    const forwarded = [
      { path: "/v1/homes/%ff/agents", status: 400, tag: "InvalidRequest" },
      { path: "/v1/homes/work/login-links", status: 404, tag: "RouteNotFound" },
      { path: "/v1/homes/nobody/agents", status: 404, tag: "HomeNotManaged" },
      { path: "/v1/homes/work/agents", token: null, status: 401, tag: "Unauthorized" }
    ]
    for (const { path, status, tag, token } of forwarded) {
      const answer = await send(target, { method: "POST", path, body: "{}", ...(token === null ? { token } : {}) })
      expect(problemShapeViolations(answer), path).toEqual([])
      expect([answer.status, answer.body], path).toMatchObject([status, { _tag: tag }])
    }
  })
})
