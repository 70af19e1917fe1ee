import type { RuntimeCandidate } from "../../domain/candidate.ts"

interface Retention {
  /** When the idle period (re)started because of a retention. */
  since: number
  /** True from a retention until a sweep next finds the family clear. */
  ongoing: boolean
}

/**
 * Idle clocks (C1, C7). A runtime is idle since its last activity or since its family was last
 * seen retained, whichever is later. A retention is known to last until a sweep observes the
 * family clear again, so the fresh idle period starts at that observation. Keyed by runtime
 * identity, so a resumed runtime starts with a clean clock and released ones are forgotten.
 */
export class IdleClocks {
  readonly #retentions = new WeakMap<object, Retention>()

  retain(candidate: RuntimeCandidate, at: number): void {
    const retention = this.#retentions.get(candidate.identity)
    if (retention === undefined) this.#retentions.set(candidate.identity, { since: at, ongoing: true })
    else {
      retention.since = at
      retention.ongoing = true
    }
  }

  /** Records that the family was seen clear at `at`; returns the runtime's idle-since time. */
  observeClear(candidate: RuntimeCandidate, at: number): number {
    const retention = this.#retentions.get(candidate.identity)
    if (retention === undefined) return candidate.lastActivityAt
    if (retention.ongoing) {
      retention.since = at
      retention.ongoing = false
    }
    return Math.max(candidate.lastActivityAt, retention.since)
  }

  /** Whether the last sweep saw the family retained and none has seen it clear since. */
  isRetained(candidate: RuntimeCandidate): boolean {
    return this.#retentions.get(candidate.identity)?.ongoing ?? false
  }

  idleSince(candidate: RuntimeCandidate): number {
    const retention = this.#retentions.get(candidate.identity)
    return retention === undefined ? candidate.lastActivityAt : Math.max(candidate.lastActivityAt, retention.since)
  }
}
