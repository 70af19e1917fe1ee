/**
 * The OpenCode session's state on its own, fed decoded events directly (no server): how events
 * route to the turn, permissions, subagents and completion notices, and what a resync settles.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { ProviderFailed } from "../../../../src/domain/errors.ts"
import type { SessionEvent } from "../../../../src/domain/provider.ts"
import type { EventEnvelope } from "../../../../src/layers/providers/opencode/apiTypes.ts"
import { readServerEvent, type ServerEvent } from "../../../../src/layers/providers/opencode/serverEvents.ts"
import { makeSessionState } from "../../../../src/layers/providers/opencode/sessionState.ts"

const root = "ses_root"

const harness = (reply = "the reply", noticeTimeout = 60_000) => {
  const events: Array<SessionEvent> = []
  const state = makeSessionState({
    provider: "opencode",
    sessionId: root,
    noticeTimeout,
    onEvent: (event) => void events.push(event),
    reply: Effect.succeed(reply)
  })
  const feed = (...envelopes: ReadonlyArray<EventEnvelope>) =>
    Effect.forEach(envelopes, (envelope) => {
      const event: ServerEvent | undefined = readServerEvent(envelope)
      return event === undefined ? Effect.void : state.apply(event)
    }, { discard: true })
  return { events, state, feed }
}

const status = (sessionID: string, type: "busy" | "idle" | "retry"): EventEnvelope => ({
  type: "session.status",
  properties: { sessionID, status: { type } }
})
const created = (id: string, parentID: string): EventEnvelope => ({
  type: "session.created",
  properties: { sessionID: id, info: { id, directory: "/w", parentID } }
})
const tags = (events: ReadonlyArray<SessionEvent>) => events.filter((event) => event._tag !== "Activity")

describe("opencode session state", () => {
  it.effect("a turn ends at the first idle after busy, with the reply; an earlier idle is left over", () =>
    Effect.gen(function*() {
      const { events, feed, state } = harness()
      const done = yield* state.startTurn("turn-1", Effect.void)
      assert.strictEqual(state.adapterWork(), "turn turn-1 is running")
      const waiting = yield* Effect.forkChild(done)
      yield* feed(status(root, "idle"))
      assert.isUndefined(waiting.pollUnsafe(), "an idle before busy does not end the turn")
      yield* feed(status(root, "busy"), { type: "session.idle", properties: { sessionID: root } })
      assert.deepStrictEqual(yield* Fiber.join(waiting), { reply: "the reply" })
      assert.deepStrictEqual(tags(events), [{ _tag: "Reply", text: "the reply" }])
      assert.isUndefined(state.adapterWork())
    }))

  it.effect("a second turn is refused; a turn whose prompt fails is forgotten", () =>
    Effect.gen(function*() {
      const { state } = harness()
      yield* state.startTurn("turn-1", Effect.void)
      const second = yield* Effect.exit(state.startTurn("turn-2", Effect.void))
      assert.isTrue(Exit.isFailure(second))
      state.failTurn(new ProviderFailed({ provider: "opencode", operation: "close", message: "closed" }))
      const failedPrompt = yield* Effect.exit(
        state.startTurn("turn-3", Effect.fail(new ProviderFailed({ provider: "opencode", operation: "prompt", message: "no" })))
      )
      assert.isTrue(Exit.isFailure(failedPrompt))
      assert.isUndefined(state.adapterWork(), "the failed prompt left no turn behind")
    }))

  it.effect("a session error fails the turn; an abort does not", () =>
    Effect.gen(function*() {
      const { feed, state } = harness()
      const aborted = yield* state.startTurn("turn-1", Effect.void)
      yield* feed(
        { type: "session.error", properties: { sessionID: root, error: { name: "MessageAbortedError" } } },
        status(root, "busy"),
        status(root, "idle")
      )
      assert.deepStrictEqual(yield* aborted, { reply: "the reply" })
      const failing = yield* state.startTurn("turn-2", Effect.void)
      yield* feed(
        { type: "session.error", properties: { sessionID: root, error: { name: "APIError", data: { message: "down" } } } },
        status(root, "busy"),
        status(root, "idle")
      )
      const exit = yield* Effect.exit(failing)
      assert.isTrue(Exit.isFailure(exit))
    }))

  it.effect("permissions of the tree are surfaced and resolved once; other sessions' are not", () =>
    Effect.gen(function*() {
      const { events, feed, state } = harness()
      yield* feed(
        created("ses_child", root),
        { type: "permission.asked", properties: { id: "per_1", sessionID: "ses_child", permission: "bash" } },
        { type: "permission.asked", properties: { id: "per_1", sessionID: "ses_child", permission: "bash" } },
        { type: "permission.asked", properties: { id: "per_x", sessionID: "ses_other", permission: "bash" } }
      )
      assert.strictEqual(state.adapterWork(), "permission per_1 is pending")
      yield* feed({ type: "permission.replied", properties: { sessionID: "ses_child", requestID: "per_1" } })
      state.resolvePermission("per_1")
      assert.deepStrictEqual(tags(events), [
        { _tag: "SubagentStarted", id: "ses_child" },
        { _tag: "PermissionRequested", id: "per_1" },
        { _tag: "PermissionResolved", id: "per_1" }
      ])
      assert.isUndefined(state.adapterWork())
    }))

  it.effect("a child going idle owes its parent a completion notice until the parent runs busy then idle", () =>
    Effect.gen(function*() {
      const { events, feed, state } = harness()
      yield* feed(created("ses_child", root), status("ses_child", "busy"), status("ses_child", "idle"))
      assert.deepStrictEqual(state.pendingNotice(), {
        overdue: false,
        reason: `session ${root} has not yet run the completion notice of ses_child`
      })
      assert.deepStrictEqual(tags(events).at(-1), { _tag: "SubagentFinished", id: "ses_child" })
      yield* feed(status(root, "busy"), status(root, "idle"))
      assert.isUndefined(state.pendingNotice())
    }))

  it.effect("a resync ends a turn whose idle was missed and keeps busy sessions of the tree", () =>
    Effect.gen(function*() {
      const { feed, state } = harness()
      const done = yield* state.startTurn("turn-1", Effect.void)
      yield* feed(status(root, "busy"))
      yield* state.resync({})
      assert.deepStrictEqual(yield* done, { reply: "the reply" })
    }))

  it.effect("events of sessions outside the tree are not activity", () =>
    Effect.gen(function*() {
      const { events, feed } = harness()
      yield* feed(
        { type: "message.updated", properties: { sessionID: "ses_other" } },
        { type: "message.updated", properties: { sessionID: root } },
        { type: "server.connected", properties: {} }
      )
      assert.deepStrictEqual(events, [{ _tag: "Activity" }])
    }))
})
