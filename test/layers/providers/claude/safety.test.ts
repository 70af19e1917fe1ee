/**
 * The Claude Code safety decision (P2) as a pure function: the roster, completion reports that
 * can still wake the agent, version support, and the adapter's own work.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  type BackgroundWork,
  decide,
  freshWork,
  idleLocal,
  type LocalState,
  type Observation,
  observe,
  parseVersion
} from "../../../../src/layers/providers/claude/safety.ts"

const replay = (observations: ReadonlyArray<Observation>, from: BackgroundWork = freshWork) =>
  observations.reduce(observe, from)

const tag = (local: LocalState, work: BackgroundWork) => decide(local, work)._tag

describe("claude safety decision (P2)", () => {
  it("a known version with an empty roster permits; a fresh process starts empty", () => {
    assert.strictEqual(tag(idleLocal, replay([{ _tag: "Version", version: "2.1.292" }])), "Permit")
    assert.strictEqual(tag(idleLocal, replay([{ _tag: "TurnStarted", version: "2.1.332" }, { _tag: "TurnEnded" }])), "Permit")
  })

  it("live tasks veto; an emptied roster still vetoes until every report arrived and a later turn consumed it", () => {
    let work = replay([
      { _tag: "TurnStarted", version: "2.1.332" },
      { _tag: "Roster", taskIds: ["shell", "monitor", "agent"] },
      { _tag: "TurnEnded" }
    ])
    assert.strictEqual(decide(idleLocal, work)._tag, "Veto")
    work = observe(work, { _tag: "Roster", taskIds: [] })
    assert.include(JSON.stringify(decide(idleLocal, work)), "the completion report of background tasks shell, monitor, agent has not arrived")
    work = replay([{ _tag: "TaskReported", taskId: "shell" }, { _tag: "TaskReported", taskId: "monitor" }], work)
    assert.strictEqual(decide(idleLocal, work)._tag, "Veto")
    work = observe(work, { _tag: "TaskReported", taskId: "agent" })
    // Every report arrived, but none has been delivered to the model yet: it can wake the agent.
    assert.include(JSON.stringify(decide(idleLocal, work)), "is not yet delivered to the agent")
    // The end of a turn that started before the reports does not consume them.
    work = observe(work, { _tag: "TurnEnded" })
    assert.strictEqual(decide(idleLocal, work)._tag, "Veto")
    work = replay([{ _tag: "TurnStarted", version: undefined }, { _tag: "TurnEnded" }], work)
    assert.strictEqual(decide(idleLocal, work)._tag, "Permit")
  })

  it("a task seen only through task_started awaits its report", () => {
    const work = replay([{ _tag: "Version", version: "2.1.332" }, { _tag: "TaskStarted", taskId: "t1" }])
    assert.strictEqual(decide(idleLocal, work)._tag, "Veto")
  })

  it("an old version counts only once it has sent a roster; an unknown or unparseable one is unknown", () => {
    const old = replay([{ _tag: "TurnStarted", version: "2.1.220" }, { _tag: "TurnEnded" }])
    assert.include(JSON.stringify(decide(idleLocal, old)), "predates 2.1.292")
    assert.strictEqual(decide(idleLocal, old)._tag, "Unknown")
    assert.strictEqual(tag(idleLocal, observe(old, { _tag: "Roster", taskIds: [] })), "Permit")
    assert.strictEqual(tag(idleLocal, freshWork), "Unknown")
    assert.strictEqual(tag(idleLocal, replay([{ _tag: "Version", version: "next" }])), "Unknown")
    assert.strictEqual(tag(idleLocal, replay([{ _tag: "Version", version: "3.0.0" }])), "Permit")
    assert.strictEqual(tag(idleLocal, replay([{ _tag: "Version", version: "2.2.0" }])), "Permit")
    assert.strictEqual(tag(idleLocal, replay([{ _tag: "Version", version: "2.1.291" }])), "Unknown")
  })

  it("the adapter's own work vetoes before anything else", () => {
    const known = replay([{ _tag: "Version", version: "2.1.332" }])
    const busy: ReadonlyArray<Partial<LocalState>> = [
      { turnInFlight: true },
      { autonomousTurn: true },
      { unstartedMessages: 1 },
      { permissionsPending: 1 },
      { processing: 2 },
      { sessionState: "running" },
      { sessionState: "requires_action" }
    ]
    for (const change of busy) {
      assert.strictEqual(tag({ ...idleLocal, ...change }, known), "Veto", JSON.stringify(change))
      // Even an unknown roster is a veto, not a failure, while the adapter knows of work.
      assert.strictEqual(tag({ ...idleLocal, ...change }, freshWork), "Veto", JSON.stringify(change))
    }
    assert.strictEqual(tag({ ...idleLocal, sessionState: "idle" }, known), "Permit")
  })

  it("a veto names the turn, the permissions and the tasks with what the CLI said they are", () => {
    const reason = (local: LocalState, work: BackgroundWork) => {
      const decision = decide(local, work)
      return decision._tag === "Permit" ? "permit" : decision.reason
    }
    const known = replay([{ _tag: "Version", version: "2.1.332" }])
    assert.strictEqual(reason({ ...idleLocal, turnInFlight: true, turnId: "turn-3" }, known), "turn turn-3 is in flight")
    assert.strictEqual(reason({ ...idleLocal, turnInFlight: true }, known), "a turn is in flight")
    assert.strictEqual(
      reason({ ...idleLocal, permissionsPending: 1, permissionIds: ["perm-2"] }, known),
      "permission perm-2 is pending"
    )
    assert.strictEqual(
      reason({ ...idleLocal, permissionsPending: 2, permissionIds: ["perm-1", "perm-2"] }, known),
      "permissions perm-1, perm-2 are pending"
    )
    let work = replay([
      { _tag: "Roster", taskIds: ["bash-3"], descriptions: new Map([["bash-3", "sleep 600"]]) },
      { _tag: "TaskStarted", taskId: "bash-4", description: "npm run dev\nand more" },
      { _tag: "TaskStarted", taskId: "agent-1", description: "agent-1" }
    ], known)
    assert.strictEqual(reason(idleLocal, work), "background task bash-3 `sleep 600` is running")
    work = observe(work, { _tag: "Roster", taskIds: [] })
    assert.strictEqual(
      reason(idleLocal, work),
      "the completion report of background tasks bash-3 `sleep 600`, bash-4 `npm run dev`, agent-1 has not arrived"
    )
    work = replay([
      { _tag: "TaskReported", taskId: "bash-3" },
      { _tag: "TaskReported", taskId: "bash-4" },
      { _tag: "TaskReported", taskId: "agent-1" }
    ], work)
    assert.strictEqual(
      reason(idleLocal, work),
      "the completion report of background tasks bash-3 `sleep 600`, bash-4 `npm run dev`, agent-1 is not yet delivered to the agent"
    )
    // Once every report is consumed the descriptions are dropped with the tasks.
    work = replay([{ _tag: "TurnStarted", version: undefined }, { _tag: "TurnEnded" }], work)
    assert.strictEqual(reason(idleLocal, work), "permit")
    assert.strictEqual(work.descriptions.size, 0)
  })

  it("parses versions as the CLI prints them", () => {
    assert.deepStrictEqual(parseVersion("2.1.332"), [2, 1, 332])
    assert.deepStrictEqual(parseVersion("2.1.332 (Claude Code)"), [2, 1, 332])
    assert.isUndefined(parseVersion("v2"))
  })
})
