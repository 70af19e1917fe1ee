/**
 * The Codex app-server safety decision (P3) as a pure function: local state vetoes first, then the
 * loaded-thread and background-terminal listings; a partial listing or an unlisted thread retains.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import {
  decodeBackgroundTerminalsList,
  decodeJsonRpcLine,
  decodeThreadLoadedList,
  isError,
  isNotification,
  isRequest
} from "../../../../src/layers/providers/codex/rpcTypes.ts"
import { canStop, idleLocalState, type LocalState, localBusy, verdict } from "../../../../src/layers/providers/codex/safety.ts"

const none = { data: [], nextCursor: null }
const terminal = { processId: "p1", command: "sleep 100", itemId: "i1", osPid: 42 }

describe("codex safety: canStop (P3)", () => {
  it("permits an idle connection with loaded threads that have no terminals", () => {
    assert.isTrue(canStop({ data: ["t1", "t2"], nextCursor: null }, [
      { threadId: "t1", terminals: none },
      { threadId: "t2", terminals: none }
    ], idleLocalState))
    assert.isTrue(canStop(none, [], idleLocalState))
  })

  it("any local work vetoes, whatever the server says", () => {
    const cases: ReadonlyArray<Partial<LocalState>> = [
      { requestsInFlight: 1 },
      { serverRequestsPending: 1 },
      { turnStarting: true },
      { turnActive: true },
      { permissionsPending: 1 },
      { subagentsPending: 2 }
    ]
    for (const change of cases) {
      const local = { ...idleLocalState, ...change }
      assert.isTrue(localBusy(local), JSON.stringify(change))
      assert.isFalse(canStop(none, [], local), JSON.stringify(change))
    }
    assert.isFalse(localBusy(idleLocalState))
  })

  it("a terminal, a terminal page cursor or a loaded-list cursor vetoes", () => {
    assert.isFalse(canStop({ data: ["t1"], nextCursor: null }, [
      { threadId: "t1", terminals: { data: [terminal], nextCursor: null } }
    ], idleLocalState))
    assert.isFalse(canStop({ data: ["t1"], nextCursor: null }, [
      { threadId: "t1", terminals: { data: [], nextCursor: "more" } }
    ], idleLocalState))
    assert.isFalse(canStop({ data: [], nextCursor: "more" }, [], idleLocalState))
  })

  it("each veto says why", () => {
    const reason = (...args: Parameters<typeof verdict>) => {
      const answer = verdict(...args)
      return answer.permit ? "permit" : answer.reason
    }
    const loaded = { data: ["t1"], nextCursor: null }
    assert.strictEqual(reason(loaded, [{ threadId: "t1", terminals: none }], idleLocalState), "permit")
    assert.strictEqual(
      reason(loaded, [{ threadId: "t1", terminals: { data: [terminal], nextCursor: null } }], idleLocalState),
      "thread t1 has a background terminal: sleep 100"
    )
    assert.strictEqual(
      reason(loaded, [{ threadId: "t1", terminals: { data: [], nextCursor: "more" } }], idleLocalState),
      "thread t1's terminal listing has a further page"
    )
    assert.strictEqual(reason({ data: [], nextCursor: "more" }, [], idleLocalState), "the loaded-thread listing has a further page")
    assert.strictEqual(reason(loaded, [], idleLocalState), "thread t1 was not listed")
    assert.strictEqual(reason(loaded, [], { ...idleLocalState, turnActive: true }), "a turn is running")
    assert.strictEqual(reason(loaded, [], { ...idleLocalState, permissionsPending: 1, serverRequestsPending: 1 }), "1 approval(s) await an answer")
  })

  it("a veto names the turn, the approvals, the subagents and the terminals it knows of", () => {
    const reason = (...args: Parameters<typeof verdict>) => {
      const answer = verdict(...args)
      return answer.permit ? "permit" : answer.reason
    }
    const local = (change: Partial<LocalState>) => reason(none, [], { ...idleLocalState, ...change })
    assert.strictEqual(local({ turnStarting: true, turnActive: true, turnId: "turn-3" }), "turn turn-3 is starting")
    assert.strictEqual(local({ turnActive: true, turnId: "turn-3" }), "turn turn-3 is running")
    assert.strictEqual(
      local({ permissionsPending: 1, serverRequestsPending: 1, permissionIds: ["perm-2"] }),
      "permission perm-2 is pending"
    )
    assert.strictEqual(
      local({ permissionsPending: 5, serverRequestsPending: 5, permissionIds: ["a", "b", "c", "d", "e"] }),
      "permissions a, b, c and 2 more are pending"
    )
    assert.strictEqual(local({ subagentsPending: 2, subagentIds: ["agent-1", "agent-2"] }), "subagents agent-1, agent-2 have not finished")
    const loaded = { data: ["t1"], nextCursor: null }
    const two = { data: [terminal, { ...terminal, processId: "p2", command: "npm run dev" }], nextCursor: null }
    assert.strictEqual(
      reason(loaded, [{ threadId: "t1", terminals: two }], idleLocalState),
      "thread t1 has a background terminal: sleep 100 and 1 more"
    )
    const long = { data: [{ ...terminal, command: `${"x".repeat(200)}\nsecond line` }], nextCursor: null }
    assert.strictEqual(
      reason(loaded, [{ threadId: "t1", terminals: long }], idleLocalState),
      `thread t1 has a background terminal: ${"x".repeat(120)}…`
    )
  })

  it("a loaded thread that was not listed vetoes", () => {
    assert.isFalse(canStop({ data: ["t1", "t2"], nextCursor: null }, [{ threadId: "t1", terminals: none }], idleLocalState))
  })
})

describe("codex rpc types", () => {
  it.effect("decodes list results strictly: a missing or mistyped field fails", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* decodeThreadLoadedList({ data: ["t"], nextCursor: null, extra: 1 }), {
        data: ["t"],
        nextCursor: null
      })
      const terminals = yield* decodeBackgroundTerminalsList({ data: [{ ...terminal, cpuPercent: 1, rssKb: null }], nextCursor: null })
      assert.strictEqual(terminals.data.length, 1)
      for (const bad of [{ data: ["t"] }, { data: "t", nextCursor: null }, { data: [1], nextCursor: null }, null, "x"]) {
        assert.isTrue(Exit.isFailure(yield* Effect.exit(decodeThreadLoadedList(bad))), JSON.stringify(bad))
      }
      for (const bad of [{ data: [{ processId: 1 }], nextCursor: null }, { data: [] }, { nextCursor: null }]) {
        assert.isTrue(Exit.isFailure(yield* Effect.exit(decodeBackgroundTerminalsList(bad))), JSON.stringify(bad))
      }
    }))

  it.effect("classifies JSON-RPC lines", () =>
    Effect.gen(function*() {
      const request = yield* decodeJsonRpcLine(`{"id":3,"method":"item/fileChange/requestApproval","params":{}}`)
      assert.isTrue(isRequest(request))
      const notification = yield* decodeJsonRpcLine(`{"method":"turn/completed","params":{}}`)
      assert.isTrue(isNotification(notification))
      const error = yield* decodeJsonRpcLine(`{"id":1,"error":{"code":-32600,"message":"Invalid request: unknown variant"}}`)
      assert.isTrue(isError(error))
      const response = yield* decodeJsonRpcLine(`{"jsonrpc":"2.0","id":"a","result":{"data":[]}}`)
      assert.isFalse(isError(response) || isRequest(response) || isNotification(response))
      assert.isTrue(Exit.isFailure(yield* Effect.exit(decodeJsonRpcLine("not json"))))
      assert.isTrue(Exit.isFailure(yield* Effect.exit(decodeJsonRpcLine(`{"id":{}}`))))
    }))
})
