/** Memory resident against released: counted once in all, under its provider, under each of its own labels; homes summed. */
import { describe, expect, it } from "vitest"
import { internalAgentLabel, parentAgentIdLabel } from "../../src/domain/agent.ts"
import { memoryTotals, sumMemoryTotals } from "../../src/domain/memoryTotals.ts"

const none = { residentBytes: 0, residentRuntimes: 0, unmeasuredResident: 0, releasedBytes: 0, releasedAgents: 0, unmeasuredReleased: 0 }

describe("memory totals", () => {
  it("sums resident and released apart, an unmeasured agent counted but never as zero bytes", () => {
    const totals = memoryTotals([
      { provider: "codex", labels: { team: "web" }, resident: true, bytes: 100 },
      { provider: "codex", labels: { team: "api" }, resident: true, bytes: null },
      { provider: "claude", labels: { team: "web", tier: "1" }, resident: false, bytes: 40 },
      { provider: "claude", labels: {}, resident: false, bytes: null }
    ])
    expect(totals).toMatchObject({
      residentBytes: 100,
      residentRuntimes: 2,
      unmeasuredResident: 1,
      releasedBytes: 40,
      releasedAgents: 2,
      unmeasuredReleased: 1
    })
    expect(totals.byProvider).toEqual([
      { provider: "claude", ...none, releasedBytes: 40, releasedAgents: 2, unmeasuredReleased: 1 },
      { provider: "codex", ...none, residentBytes: 100, residentRuntimes: 2, unmeasuredResident: 1 }
    ])
    expect(totals.byLabel).toEqual([
      { label: "team=api", ...none, residentRuntimes: 1, unmeasuredResident: 1 },
      { label: "team=web", ...none, residentBytes: 100, residentRuntimes: 1, releasedBytes: 40, releasedAgents: 1 },
      { label: "tier=1", ...none, releasedBytes: 40, releasedAgents: 1 }
    ])
  })

  it("leaves the daemon's own labels out of the per-label figures", () => {
    const totals = memoryTotals([
      { provider: "shell", labels: { [parentAgentIdLabel]: "agent-1", [internalAgentLabel]: "true" }, resident: true, bytes: 5 }
    ])
    expect(totals.byLabel).toEqual([])
    expect(totals.residentBytes).toBe(5)
  })

  it("sums homes figure by figure, provider by provider, label by label", () => {
    const home1 = memoryTotals([{ provider: "shell", labels: { team: "web" }, resident: true, bytes: 10 }])
    const home2 = memoryTotals([
      { provider: "shell", labels: { team: "web" }, resident: false, bytes: 7 },
      { provider: "pi", labels: {}, resident: true, bytes: 3 }
    ])
    const both = sumMemoryTotals([home1, home2])
    expect(both).toMatchObject({ residentBytes: 13, residentRuntimes: 2, releasedBytes: 7, releasedAgents: 1 })
    expect(both.byProvider.map((entry) => [entry.provider, entry.residentBytes, entry.releasedBytes])).toEqual([["pi", 3, 0], ["shell", 10, 7]])
    expect(both.byLabel).toEqual([{ label: "team=web", ...none, residentBytes: 10, residentRuntimes: 1, releasedBytes: 7, releasedAgents: 1 }])
    expect(sumMemoryTotals([])).toEqual({ ...none, byProvider: [], byLabel: [] })
  })
})
