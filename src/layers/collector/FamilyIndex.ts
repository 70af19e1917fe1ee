import type { RuntimeCandidate } from "../../domain/candidate.ts"

/**
 * Families of one captured snapshot (C5): a runtime plus its managed descendants, found through
 * the parent label transitively. Built once per sweep in linear time; every query below is
 * linear in what it returns, so a sweep never scans the snapshot once per runtime (X4).
 */
export interface FamilyIndex {
  readonly size: number
  /** The runtime at `position` first, then its descendants depth first. */
  readonly members: (position: number) => ReadonlyArray<number>
  /** How many live ancestors the runtime has; roots of families are at depth 0. */
  readonly depth: (position: number) => number
  /** The runtime's live parent's position, or -1. */
  readonly parentOf: (position: number) => number
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
      const p = positionOf.get(parentId)!
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

  const members = (position: number): ReadonlyArray<number> => {
    if (children[position] === undefined) return [position]
    generation++
    const out: Array<number> = []
    const stack = [position]
    while (stack.length > 0) {
      const at = stack.pop()!
      if (seen[at] === generation) continue
      seen[at] = generation
      out.push(at)
      const kids = children[at]
      if (kids !== undefined) for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]!)
    }
    return out
  }

  let depths: Int32Array | undefined
  const depth = (position: number): number => {
    if (depths === undefined) {
      depths = new Int32Array(size).fill(-1)
      for (let i = 0; i < size; i++) {
        if (depths[i] !== -1) continue
        // Walk up to a known depth (or a root, or a cycle), then fill the path back down.
        generation++
        const path: Array<number> = []
        let at = i
        while (at !== -1 && depths[at] === -1 && seen[at] !== generation) {
          seen[at] = generation
          path.push(at)
          at = parent[at]!
        }
        let d = at === -1 || depths[at] === -1 ? -1 : depths[at]!
        for (let k = path.length - 1; k >= 0; k--) depths[path[k]!] = ++d
      }
    }
    return depths[position]!
  }

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

  return { size, members, depth, parentOf: (position) => parent[position]!, propagate }
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
