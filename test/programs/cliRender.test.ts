/**
 * The CLI's times for people: a time that has passed reads "… ago" (or "just now"), never
 * "in 0s"; a time to come reads "in …".
 */
import { describe, expect, it } from "vitest"
import { parentAgentIdLabel } from "../../src/domain/agent.ts"
import { memoryTotals } from "../../src/domain/memoryTotals.ts"
import {
  ago,
  blockerList,
  memoryFiguresText,
  memoryTotalsTable,
  refusedSince,
  relative,
  releaseIn
} from "../../src/programs/cli/render.ts"

const now = Date.parse("2026-01-01T12:00:00.000Z")
const at = (offsetMs: number) => new Date(now + offsetMs).toISOString()

describe("relative times", () => {
  it("reads a past time as ago, the present as just now, a future time as in", () => {
    expect(relative(at(-5_000), now)).toBe("5s ago")
    expect(relative(at(-10 * 60_000), now)).toBe("10m ago")
    expect(relative(at(-3 * 3_600_000), now)).toBe("3h ago")
    expect(relative(at(0), now)).toBe("just now")
    // Less than half a second either way rounds to the present: never "in 0s" nor "0s ago".
    expect(relative(at(-400), now)).toBe("just now")
    expect(relative(at(400), now)).toBe("just now")
    expect(relative(at(5_000), now)).toBe("in 5s")
    expect(relative(at(10 * 60_000), now)).toBe("in 10m")
    expect(relative(at(3 * 3_600_000), now)).toBe("in 3h")
    expect(relative(at(-4 * 86_400_000), now)).toBe("4d ago")
  })

  it("reads a time that has passed (idle since, last try) as ago, even a little ahead of this clock", () => {
    expect(ago(at(-90_000), now)).toBe("90s ago")
    expect(ago(at(0), now)).toBe("just now")
    expect(ago(at(-1), now)).toBe("just now")
    expect(ago(at(2_000), now)).toBe("just now")
    for (const offset of [0, -1, -499, -500, -501, 1, 2_000]) expect(ago(at(offset), now)).not.toMatch(/^in /)
  })

  it("says when a runtime could be released: now once due, else how soon", () => {
    expect(releaseIn(null, now)).toBe("-")
    expect(releaseIn(at(-1_000), now)).toBe("now")
    expect(releaseIn(at(0), now)).toBe("now")
    expect(releaseIn(at(60_000), now)).toBe("in 60s")
  })
})

describe("vetoes and memory for people", () => {
  it("names a veto with its agent, reason and since when; other blockers by category and agent", () => {
    expect(blockerList([], now)).toBe("none")
    expect(blockerList([
      { category: "veto", agentId: "a1", detail: "background job 1 `sleep 300`", since: at(-3 * 3_600_000) },
      { category: "queued-delivery", agentId: "a2", detail: "not shown" },
      { category: "probe-failure", agentId: "a3", detail: "timed out" }
    ], now)).toBe("veto (a1: background job 1 `sleep 300`, since 3h ago), queued-delivery (a2), probe-failure (a3: timed out)")
    expect(refusedSince({ outcome: "vetoed", since: at(-3 * 3_600_000) }, now)).toBe("vetoed since 3h ago")
    expect(refusedSince({ outcome: "timed-out", since: at(-5_000) }, now)).toBe("timed-out since 5s ago")
    expect(refusedSince({ outcome: "vetoed" }, now)).toBe("")
  })

  it("says resident and released memory, counting the unmeasured apart", () => {
    const totals = memoryTotals([
      { provider: "claude", labels: { team: "web", [parentAgentIdLabel]: "p" }, resident: true, bytes: 300 * 1024 * 1024 },
      { provider: "claude", labels: {}, resident: true, bytes: null },
      { provider: "shell", labels: { team: "web" }, resident: false, bytes: 1024 * 1024 * 1024 }
    ])
    expect(memoryFiguresText(totals)).toEqual({
      resident: "300.0 MiB in 2 runtimes (1 unmeasured)",
      released: "1.0 GiB by 1 agent"
    })
    expect(memoryTotalsTable(totals, "this home")).toEqual([
      ["MEMORY", "RESIDENT", "RELEASED"],
      ["this home", "300.0 MiB in 2 runtimes (1 unmeasured)", "1.0 GiB by 1 agent"],
      ["provider claude", "300.0 MiB in 2 runtimes (1 unmeasured)", "0 B by 0 agents"],
      ["provider shell", "0 B in 0 runtimes", "1.0 GiB by 1 agent"],
      ["label team=web", "300.0 MiB in 1 runtime", "1.0 GiB by 1 agent"]
    ])
  })
})
