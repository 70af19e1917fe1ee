import type { RuntimeCandidate } from "../../domain/candidate.ts"

/**
 * Families of one captured snapshot (C5): a runtime plus its managed descendants, found through
 * the parent label transitively. Built once per sweep in linear time; every query below is
 * linear in what it returns, so a sweep never scans the snapshot once per runtime (X4).
 *
 * Total on any parent labels a host supplies. A parent without a live runtime in the snapshot,
 * and a runtime naming itself, leave the runtime a root. Labels that form a cycle (a → b → a)
 * make every member of the cycle a descendant of every other: each member's family is the whole
 * cycle plus everything below it. Each runtime has at most one parent, so a cycle has no
 * ancestors outside itself: its members are at depth 0.
 */
export interface FamilyIndex {
  readonly size: number
  /**
   * The runtime at `position` first, then its descendants depth first. With `skip`, a skipped
   * runtime is left out, and so is whatever is below the runtime only through it.
   */
  readonly members: (position: number, skip?: (position: number) => boolean) => ReadonlyArray<number>
  /** Steps from the runtime up to a root or to a cycle; roots and cycle members are at depth 0. */
  readonly depth: (position: number) => number
  /**
   * The runtime whose close must be settled before this one's, or -1: a close waits for every
   * runtime whose family holds it, and those form a chain through this link. For a runtime below
   * a root it is the parent; below a cycle, the cycle's last member; in a cycle, the member before
   * it (cycle members are taken in snapshot order). Following it always ends, at a lower
   * (depth, position).
   */
  readonly closesAfter: (position: number) => number
  /**
   * For each position, a family member at which `marked` holds (the runtime itself first), or
   * -1 when no member is marked. One upward walk per marked runtime, stopping at the first
   * ancestor already known, so the whole pass is linear.
   */
  readonly propagate: (marked: (position: number) => boolean) => Int32Array
}

export const indexFamilies = (snapshot: ReadonlyArray<RuntimeCandidate>): FamilyIndex => {
  const size = snapshot.length
  const parent = new Int32Array(size).fill(-1)
  // Filled, so V8 keeps a packed array instead of a slow dictionary for large sizes.
  const children: Array<Array<number> | undefined> = new Array(size).fill(undefined)

  // Only agents named as a parent need a position; most runtimes are leaves, so the table holds
  // just the parents (-1 until their position is found).
  let positionOf: Map<string, number> | undefined
  for (let i = 0; i < size; i++) {
    const parentId = snapshot[i]!.parentAgentId
    if (parentId !== undefined) (positionOf ??= new Map()).set(parentId, -1)
  }
  if (positionOf !== undefined) {
    for (let i = 0; i < size; i++) {
      const agentId = snapshot[i]!.agentId
      if (positionOf.get(agentId) === -1) positionOf.set(agentId, i)
    }
    for (let i = 0; i < size; i++) {
      const parentId = snapshot[i]!.parentAgentId
      if (parentId === undefined) continue
      const p = positionOf.get(parentId) ?? -1
      if (p === -1 || p === i) continue
      parent[i] = p
      const siblings = children[p]
      if (siblings === undefined) children[p] = [i]
      else siblings.push(i)
    }
  }

  // A generation stamp per walk guards against parent-label cycles without a set per call.
  const seen = new Uint32Array(size)
  let generation = 0

  const members = (position: number, skip?: (position: number) => boolean): ReadonlyArray<number> => {
    if (children[position] === undefined && skip === undefined) return [position]
    generation++
    const out: Array<number> = []
    const stack = [position]
    while (stack.length > 0) {
      const at = stack.pop()!
      if (seen[at] === generation || (skip !== undefined && skip(at))) continue
      seen[at] = generation
      out.push(at)
      const kids = children[at]
      if (kids !== undefined) for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]!)
    }
    return out
  }

  // Depths and close links, for every runtime at once on first use: one upward walk per runtime
  // that stops at the first runtime already placed, or at a runtime of its own walk (a cycle).
  let placed: { readonly depths: Int32Array; readonly after: Int32Array } | undefined
  const place = () => {
    const depthOf = new Int32Array(size).fill(-1)
    const link = new Int32Array(size).fill(-1)
    // Where a runtime stands in the current walk, to cut a cycle out of it.
    const onWalk = new Int32Array(size).fill(-1)
    // For a cycle member: the cycle's last member in snapshot order; -1 for everyone else.
    const cycleLast = new Int32Array(size).fill(-1)
    const walk: Array<number> = []
    for (let i = 0; i < size; i++) {
      if (depthOf[i] !== -1) continue
      walk.length = 0
      let at = i
      while (at !== -1 && depthOf[at] === -1 && onWalk[at] === -1) {
        onWalk[at] = walk.length
        walk.push(at)
        at = parent[at]!
      }
      let end = walk.length
      if (at !== -1 && onWalk[at] !== -1) {
        // The walk closed on itself: walk[onWalk[at]..] is a cycle, linked in snapshot order.
        const cycle = walk.slice(onWalk[at]).sort((x, y) => x - y)
        const last = cycle[cycle.length - 1]!
        for (let k = 0; k < cycle.length; k++) {
          depthOf[cycle[k]!] = 0
          link[cycle[k]!] = k === 0 ? -1 : cycle[k - 1]!
          cycleLast[cycle[k]!] = last
        }
        end = onWalk[at]!
      }
      // Below the placed runtime (or root, or cycle) the walk stopped at, back down.
      for (let k = end - 1; k >= 0; k--) {
        const node = walk[k]!
        const up = parent[node]!
        depthOf[node] = up === -1 ? 0 : depthOf[up]! + 1
        link[node] = up === -1 ? -1 : cycleLast[up] !== -1 ? cycleLast[up]! : up
      }
      for (const node of walk) onWalk[node] = -1
    }
    return { depths: depthOf, after: link }
  }
  const depth = (position: number): number => (placed ??= place()).depths[position]!
  const closesAfter = (position: number): number => (placed ??= place()).after[position]!

  const propagate = (marked: (position: number) => boolean): Int32Array => {
    const witness = new Int32Array(size).fill(-1)
    for (let i = 0; i < size; i++) {
      if (!marked(i)) continue
      witness[i] = i
      let at = parent[i]!
      while (at !== -1 && witness[at] === -1) {
        witness[at] = i
        at = parent[at]!
      }
    }
    return witness
  }

  return { size, members, depth, closesAfter, propagate }
}

/**
 * Reuses the last index while the snapshot holds the same runtimes in the same order, which is
 * the common case between two sweeps a minute apart. Identity fixes agent id and parent label,
 * so comparing identities is enough, and it is one pass with no hashing.
 */
export const makeFamilyIndexCache = () => {
  let identities: Array<object> = []
  let cached: FamilyIndex | undefined
  return (snapshot: ReadonlyArray<RuntimeCandidate>): FamilyIndex => {
    if (cached !== undefined && identities.length === snapshot.length) {
      let same = true
      for (let i = 0; i < snapshot.length && same; i++) same = identities[i] === snapshot[i]!.identity
      if (same) return cached
    }
    identities = snapshot.map((candidate) => candidate.identity)
    cached = indexFamilies(snapshot)
    return cached
  }
}
