import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { readFileSync } from "node:fs"
import { decodeHubConfigJson, hubConfigJsonSchema } from "../../src/domain/hub.ts"
import { hubDefault } from "../../src/layers/hub/hubFiles.ts"
import { prepare, startsDaemon } from "../../src/layers/hub/requests.ts"

describe("hub.json", () => {
  it.effect("an empty file: no homes, the default timeout; omitted and \"0s\" stay distinct", () =>
    Effect.gen(function*() {
      const empty = yield* decodeHubConfigJson("{}")
      assert.deepStrictEqual(empty.homes, [])
      assert.deepStrictEqual(hubDefault(empty), { value: "1h", source: "default" })
      const disabled = yield* decodeHubConfigJson(`{"daemonIdleTimeout":"0s"}`)
      assert.strictEqual(Duration.toMillis(disabled.daemonIdleTimeout!), 0)
      assert.deepStrictEqual(hubDefault(disabled), { value: "0s", source: "hub.json" })
      assert.deepStrictEqual(hubDefault(yield* decodeHubConfigJson(`{"daemonIdleTimeout":"90m"}`)), {
        value: "1h30m0s",
        source: "hub.json"
      })
    }))

  it.effect("refuses what it cannot use, naming the path", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, string]> = [
        [`{"daemonIdleTimeout":"-5m"}`, `["daemonIdleTimeout"]`],
        [`{"daemonIdleTimeout":"soon"}`, `["daemonIdleTimeout"]`],
        [`{"homes":[{"name":"a","dir":"relative"}]}`, "absolute"],
        [`{"homes":[{"name":"no spaces","dir":"/x"}]}`, `["name"]`],
        [`{"homes":[{"name":"a","dir":"/x"},{"name":"a","dir":"/y"}]}`, "used twice"],
        [`{"homes":[],"port":1}`, `["port"]`],
        [`{"homes":[{"name":"a","dir":"/x","extra":1}]}`, `["extra"]`]
      ]
      for (const [text, words] of cases) {
        const error = yield* Effect.flip(decodeHubConfigJson(text))
        assert.include(error.message, words, text)
      }
    }))

  it("schemas/hub.schema.json is what the Schema generates (npm run schema rewrites it)", () => {
    const committed: unknown = JSON.parse(readFileSync(new URL("../../schemas/hub.schema.json", import.meta.url), "utf8"))
    assert.deepStrictEqual(committed, hubConfigJsonSchema())
  })
})

describe("a prompt through the hub", () => {
  const request = (body: unknown) => ({
    method: "POST",
    path: "/v1/agents/a/prompts",
    search: "",
    contentType: "application/json",
    body: new TextEncoder().encode(JSON.stringify(body))
  })

  it("without a client message id gets one, which the hub reports; with one keeps it", () => {
    const injected = prepare(request({ text: "hi", wait: true }))
    assert.isTrue(injected.prompt?.injected)
    assert.isTrue(injected.prompt?.waits)
    assert.match(injected.prompt?.clientMessageId ?? "", /^hub-[0-9a-f]{24}$/)
    assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(injected.request.body)), {
      text: "hi",
      wait: true,
      clientMessageId: injected.prompt?.clientMessageId
    })
    const kept = prepare(request({ text: "hi", clientMessageId: "mine" }))
    assert.deepStrictEqual(kept.prompt, { clientMessageId: "mine", injected: false, waits: false })
    // What the daemon refuses anyway passes as it is.
    assert.isUndefined(prepare(request({ text: "hi", clientMessageId: 7 })).prompt)
    assert.isUndefined(prepare({ ...request({}), body: new TextEncoder().encode("not json") }).prompt)
  })
})

describe("which requests may start a retired home's daemon", () => {
  it("mutations (deleting an agent too) do; reads, retire now, collection, sweeps and closes never do", () => {
    for (const path of ["/v1/agents", "/v1/agents/a/prompts", "/v1/agents/a/interrupt", "/v1/agents/a/permissions/p"]) {
      assert.isTrue(startsDaemon({ method: "POST", path }), path)
    }
    for (const path of ["/v1/agents", "/v1/agents/a", "/v1/daemon", "/v1/runtimes", "/v1/agents/a/turns/t"]) {
      assert.isFalse(startsDaemon({ method: "GET", path }), path)
    }
    for (const path of ["/v1/daemon/retire", "/v1/sweep", "/v1/runtimes/a/collect", "/v1/agents/a/close", "/v1/agents/", "/v1/nothing"]) {
      assert.isFalse(startsDaemon({ method: "POST", path }), path)
    }
    assert.isFalse(startsDaemon({ method: "OPTIONS", path: "/v1/agents" }))
    assert.isTrue(startsDaemon({ method: "DELETE", path: "/v1/agents/a" }))
    assert.isFalse(startsDaemon({ method: "DELETE", path: "/v1/agents" }))
    assert.isFalse(startsDaemon({ method: "DELETE", path: "/v1/agents/a/turns/t" }))
  })
})
