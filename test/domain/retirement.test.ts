import { assert, describe, it } from "@effect/vitest"
import { describeBlockers } from "../../src/domain/retirement.ts"

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
