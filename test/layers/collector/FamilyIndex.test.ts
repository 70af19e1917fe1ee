import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { noBlockers } from "../../../src/domain/blocker.ts"
import type { RuntimeCandidate } from "../../../src/domain/candidate.ts"
import { indexFamilies, makeFamilyIndexCache } from "../../../src/layers/collector/FamilyIndex.ts"

const candidate = (agentId: string, parentAgentId?: string): RuntimeCandidate => ({
  identity: {},
  agentId,
  parentAgentId,
  provider: "test",
  sessionId: agentId,
  lastActivityAt: 0,
  blockers: Effect.succeed(noBlockers),
  closeIfEligible: () => Effect.succeed(false)
})

describe("FamilyIndex", () => {
  const snapshot = [
    candidate("root"),
    candidate("child-a", "root"),
    candidate("grandchild", "child-a"),
    candidate("child-b", "root"),
    candidate("orphan", "released-parent"),
    candidate("other")
  ]
  const ids = (positions: ReadonlyArray<number>) => positions.map((p) => snapshot[p]!.agentId)

  it("lists a runtime and its descendants, transitively, root first (C5)", () => {
    const index = indexFamilies(snapshot)
    assert.deepStrictEqual(ids(index.members(0)), ["root", "child-a", "grandchild", "child-b"])
    assert.deepStrictEqual(ids(index.members(1)), ["child-a", "grandchild"])
    assert.deepStrictEqual(ids(index.members(4)), ["orphan"], "a parent without a live runtime is not family")
  })

  it("gives depths from the nearest live root", () => {
    const index = indexFamilies(snapshot)
    assert.deepStrictEqual(snapshot.map((_, i) => index.depth(i)), [0, 1, 2, 1, 0, 0])
  })

  it("propagates a marked member to every ancestor, preferring the runtime itself", () => {
    const index = indexFamilies(snapshot)
    const witness = index.propagate((i) => i === 2 || i === 1)
    assert.deepStrictEqual(Array.from(witness), [1, 1, 2, -1, -1, -1])
  })

  it("survives a parent-label cycle", () => {
    const cyclic = [candidate("a", "b"), candidate("b", "a")]
    const index = indexFamilies(cyclic)
    assert.deepStrictEqual(index.members(0).map((p) => cyclic[p]!.agentId), ["a", "b"])
    assert.deepStrictEqual(Array.from(index.propagate((i) => i === 0)), [0, 0])
    assert.isAtLeast(index.depth(0), 0)
  })

  it("a cycle is one family at depth 0, closed in snapshot order, before everything below it", () => {
    // c → a → b → c, with d below b and e below d; "self" names itself and "lost" a missing parent.
    const graph = [
      candidate("d", "b"),
      candidate("b", "a"),
      candidate("self", "self"),
      candidate("c", "b"),
      candidate("a", "c"),
      candidate("e", "d"),
      candidate("lost", "missing")
    ]
    const at = (agentId: string) => graph.findIndex((c) => c.agentId === agentId)
    const index = indexFamilies(graph)
    const name = (p: number) => (p === -1 ? "-" : graph[p]!.agentId)
    for (const member of ["a", "b", "c"]) {
      assert.sameMembers(index.members(at(member)).map(name), ["a", "b", "c", "d", "e"], `${member}'s family`)
    }
    assert.deepStrictEqual(graph.map((_, p) => index.depth(p)), [1, 0, 0, 0, 0, 2, 0])
    // b (1) first, then c (3), then a (4); d waits for the cycle's last member, e for d.
    assert.deepStrictEqual(graph.map((_, p) => name(index.closesAfter(p))), ["a", "-", "-", "b", "c", "d", "-"])
    assert.deepStrictEqual(index.members(at("self")).map(name), ["self"])
    assert.deepStrictEqual(index.members(at("b"), (p) => p === at("c")).map(name).sort(), ["b", "d", "e"])
    assert.deepStrictEqual(index.members(at("c"), (p) => p === at("b")).map(name).sort(), ["a", "c"])
  })

  it("the sweep cache reuses an index only for the same runtimes in the same order", () => {
    const cache = makeFamilyIndexCache()
    const first = cache(snapshot)
    assert.strictEqual(cache([...snapshot]), first)
    const changed = [...snapshot.slice(0, 5), candidate("other")]
    assert.notStrictEqual(cache(changed), first)
  })
})
