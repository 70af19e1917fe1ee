import { assert, describe, it } from "@effect/vitest"
import { describeBlockers, describeIdleTimeout } from "../../src/domain/retirement.ts"

describe("a refused retirement in one line", () => {
  it("names each blocker with whose it is, and a provider's veto or a probe's failure with its reason", () => {
    assert.strictEqual(
      describeBlockers([
        { category: "veto", agentId: "agent-2", detail: "background job 1 `sleep 20`" },
        { category: "foreground-turn", agentId: "agent-1", detail: "turn-9" },
        { category: "probe-failure", agentId: "agent-3", detail: "no answer within 10 s" },
        { category: "foreground-turn", agentId: "agent-1", detail: "turn-9" },
        { category: "store-failing" }
      ]),
      "foreground-turn (agent-1), probe-failure (agent-3: no answer within 10 s), store-failing, veto (agent-2: background job 1 `sleep 20`)"
    )
  })
})

describe("an idle timeout in words", () => {
  it("says where it came from, and plainly none when nothing set one (never a raw source such as omitted)", () => {
    assert.strictEqual(describeIdleTimeout({ value: null, millis: null, source: "omitted" }), "none")
    assert.strictEqual(describeIdleTimeout({ value: "0s", millis: null, source: "flag" }), "none (0s, set by --daemon-idle-timeout)")
    assert.strictEqual(describeIdleTimeout({ value: "1h", millis: 3_600_000, source: "config" }), "1h (from config.json)")
    assert.strictEqual(describeIdleTimeout({ value: "1h0m0s", millis: 3_600_000, source: "hub" }), "1h0m0s (the hub's default)")
  })
})
