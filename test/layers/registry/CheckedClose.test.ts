/**
 * The checked close (`POST /v1/agents/{id}/close`, `quiesce agents close`): what it ends is read
 * in the agent's lane right before the close, not only from the explanation it asked for first.
 * Work admitted between the two refuses an unforced close and is named, and logged, by a forced one.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type StopAnswer, stopPermitted, stopVetoed } from "../../../src/domain/provider.ts"
import { makeCheckedClose, makeCheckedEndings } from "../../../src/layers/registry/checkedClose.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { RuntimeCollector } from "../../../src/services/RuntimeCollector.ts"
import { type LogEntry, recordingLogs } from "../../support/logs.ts"
import { harness } from "./harness.ts"

/**
 * A checked close over the harness whose explanation, once given, is followed by a prompt that
 * starts a turn: the work arrives after the close has looked and before it takes the lane.
 */
const closeWithLateTurn = Effect.fnUntraced(function*(answer: StopAnswer) {
  const h = yield* harness()
  h.provider.probe = () => Effect.succeed(answer)
  const agent = yield* h.create()
  h.provider.turnGate = Effect.never
  const collector = RuntimeCollector.of({
    ...h.collector,
    explain: (agentId, options) =>
      h.collector.explain(agentId, options).pipe(
        Effect.tap(() => h.registry.prompt(agentId, "arrives after the explanation").pipe(Effect.orDie))
      )
  })
  const close = yield* makeCheckedClose.pipe(
    Effect.provideService(AgentRegistry, h.registry),
    Effect.provideService(RuntimeCollector, collector)
  )
  return { h, agentId: agent.agentId, close }
})

describe("the checked close reads what it ends in the agent's lane", () => {
  it.effect("unforced: a turn admitted after the explanation refuses it, naming the turn", () =>
    Effect.gen(function*() {
      const { agentId, close, h } = yield* closeWithLateTurn(stopPermitted)
      const refused = yield* Effect.flip(close(agentId, { force: false }))
      assert.strictEqual(refused._tag, "RuntimeCloseRefused")
      assert.deepStrictEqual(refused._tag === "RuntimeCloseRefused" ? refused.blockers : [], [{ agentId, kind: "foreground-turn" }])
      assert.isTrue((yield* h.registry.get(agentId)).resident)
    }))

  it.effect("forced, the provider permitting: the turn it ended is named and logged", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const { agentId, close, h } = yield* closeWithLateTurn(stopPermitted)
      const closed = yield* close(agentId, { force: true })
      assert.deepStrictEqual(closed, { agentId, ended: { blockers: [{ agentId, kind: "foreground-turn" }], veto: null } })
      assert.isFalse((yield* h.registry.get(agentId)).resident)
      assert.include(entries.map((entry) => entry.message), `Closed agent ${agentId} by force, ending: foreground-turn`)
    }).pipe(recordingLogs(entries))
  })

  it.effect("forced, the provider vetoing: the turn it ended is named beside the veto", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const { agentId, close } = yield* closeWithLateTurn(stopVetoed("background job 1 `sleep 301`"))
      const closed = yield* close(agentId, { force: true })
      assert.deepStrictEqual(closed.ended, {
        blockers: [{ agentId, kind: "foreground-turn" }],
        veto: { agentId, outcome: "vetoed", message: "background job 1 `sleep 301`" }
      })
      assert.include(
        entries.map((entry) => entry.message),
        `Closed agent ${agentId} by force, ending: foreground-turn; vetoed by its provider: background job 1 \`sleep 301\``
      )
    }).pipe(recordingLogs(entries))
  })
})

/** A checked delete over the harness, its provider answering the stop probe with `answer`. */
const deleteWith = Effect.fnUntraced(function*(answer: StopAnswer) {
  const h = yield* harness()
  h.provider.probe = () => Effect.succeed(answer)
  const agent = yield* h.create()
  const endings = yield* makeCheckedEndings.pipe(
    Effect.provideService(AgentRegistry, h.registry),
    Effect.provideService(RuntimeCollector, h.collector)
  )
  return { h, agentId: agent.agentId, remove: endings.delete }
})

describe("the checked delete asks first, as the close does", () => {
  it.effect("unforced, the provider vetoing: refused naming the veto, the agent and its runtime kept", () =>
    Effect.gen(function*() {
      const { agentId, h, remove } = yield* deleteWith(stopVetoed("background job 1 `sleep 301`"))
      const refused = yield* Effect.flip(remove(agentId, { force: false }))
      assert.strictEqual(refused._tag, "AgentDeleteRefused")
      if (refused._tag !== "AgentDeleteRefused") return
      assert.deepStrictEqual(refused.veto, { agentId, outcome: "vetoed", message: "background job 1 `sleep 301`" })
      assert.include(refused.message, `Deleting ${agentId} would end work: vetoed by its provider: background job 1 \`sleep 301\``)
      assert.isTrue((yield* h.registry.get(agentId)).resident)
    }))

  it.effect("forced, the provider vetoing: deleted, what it ended named and logged", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const { agentId, h, remove } = yield* deleteWith(stopVetoed("background job 1 `sleep 301`"))
      const deleted = yield* remove(agentId, { force: true })
      assert.deepStrictEqual(deleted, {
        agentId,
        ended: { blockers: [], veto: { agentId, outcome: "vetoed", message: "background job 1 `sleep 301`" } }
      })
      assert.strictEqual((yield* Effect.flip(h.registry.get(agentId)))._tag, "AgentNotFound")
      assert.include(
        entries.map((entry) => entry.message),
        `Deleted agent ${agentId} by force, ending: vetoed by its provider: background job 1 \`sleep 301\``
      )
    }).pipe(recordingLogs(entries))
  })

  it.effect("the provider permitting: deleted without force, nothing ended, nothing logged as forced", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const { agentId, h, remove } = yield* deleteWith(stopPermitted)
      assert.deepStrictEqual(yield* remove(agentId, { force: false }), { agentId, ended: { blockers: [], veto: null } })
      assert.strictEqual((yield* Effect.flip(h.registry.get(agentId)))._tag, "AgentNotFound")
      assert.notInclude(entries.map((entry) => entry.message).join("\n"), "by force")
    }).pipe(recordingLogs(entries))
  })

  it.effect("a subagent started after the explanation: read in the lane, it refuses the unforced delete; a forced one names and logs it", () => {
    const entries: Array<LogEntry> = []
    return Effect.gen(function*() {
      const h = yield* harness()
      const agent = yield* h.create()
      const agentId = agent.agentId
      const collector = RuntimeCollector.of({
        ...h.collector,
        explain: (id, options) =>
          h.collector.explain(id, options).pipe(Effect.tap(() => Effect.sync(() => h.provider.emit(id, { _tag: "SubagentStarted", id: "s1" }))))
      })
      const endings = yield* makeCheckedEndings.pipe(
        Effect.provideService(AgentRegistry, h.registry),
        Effect.provideService(RuntimeCollector, collector)
      )
      const refused = yield* Effect.flip(endings.delete(agentId, { force: false }))
      assert.strictEqual(refused._tag, "AgentDeleteRefused")
      assert.deepStrictEqual(refused._tag === "AgentDeleteRefused" ? refused.blockers : [], [{ agentId, kind: "running-subagents" }])
      assert.isTrue((yield* h.registry.get(agentId)).resident)

      const deleted = yield* endings.delete(agentId, { force: true })
      assert.deepStrictEqual(deleted.ended.blockers, [{ agentId, kind: "running-subagents" }])
      assert.strictEqual((yield* Effect.flip(h.registry.get(agentId)))._tag, "AgentNotFound")
      assert.include(entries.map((entry) => entry.message), `Deleted agent ${agentId} by force, ending: running-subagents`)
    }).pipe(recordingLogs(entries))
  })

  it.effect("a turn admitted after the explanation refuses it forced or not (AgentBusy: delete forgets turns), the agent kept", () =>
    Effect.gen(function*() {
      const { agentId, h } = yield* closeWithLateTurn(stopPermitted)
      const collector = RuntimeCollector.of({
        ...h.collector,
        explain: (id, options) =>
          h.collector.explain(id, options).pipe(Effect.tap(() => h.registry.prompt(id, "arrives after the explanation").pipe(Effect.orDie)))
      })
      const endings = yield* makeCheckedEndings.pipe(
        Effect.provideService(AgentRegistry, h.registry),
        Effect.provideService(RuntimeCollector, collector)
      )
      const refused = yield* Effect.flip(endings.delete(agentId, { force: false }))
      assert.strictEqual(refused._tag, "AgentBusy")
      const forced = yield* Effect.flip(endings.delete(agentId, { force: true }))
      assert.strictEqual(forced._tag, "AgentBusy")
      assert.isTrue((yield* h.registry.get(agentId)).resident)
    }))
})
