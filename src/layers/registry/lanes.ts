/**
 * The agents' lifecycle lanes: every lifecycle mutation of one agent (create, close, release,
 * resume, reload, delete) runs in its lane, one at a time. A lane exists only while an operation
 * holds or awaits it.
 */
import { Effect, Semaphore } from "effect"

interface Lane {
  readonly semaphore: Semaphore.Semaphore
  /** Lifecycle operations holding or awaiting the lane. */
  busy: number
}

/** The lanes of a registry's agents. */
export interface Lanes {
  /** Runs a lifecycle mutation in the agent's lane, one at a time per agent: activity, begun and ended. */
  readonly inLane: <A, E, R>(agentId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Whether a lifecycle operation holds or awaits the agent's lane. */
  readonly busy: (agentId: string) => boolean
  /** The agents whose lane is held or awaited now. */
  readonly held: () => ReadonlyArray<string>
  /** How many lanes are held now. */
  readonly count: () => number
}

/** Lanes that note activity (`noteActivity`) as each operation begins and ends. */
export const makeLanes = (noteActivity: Effect.Effect<void>): Lanes => {
  const lanes = new Map<string, Lane>()

  const laneOf = (agentId: string): Lane => {
    let lane = lanes.get(agentId)
    if (lane === undefined) {
      lane = { semaphore: Semaphore.makeUnsafe(1), busy: 0 }
      lanes.set(agentId, lane)
    }
    return lane
  }

  const inLane = <A, E, R>(agentId: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const lane = laneOf(agentId)
      lane.busy++
      return noteActivity.pipe(
        Effect.andThen(lane.semaphore.withPermits(1)(effect)),
        Effect.ensuring(Effect.andThen(
          Effect.sync(() => {
            // Nobody holds or waits for it: the next operation makes a new one, so the map holds
            // only the lanes in use (it would otherwise grow with every agent ever seen).
            if (--lane.busy === 0 && lanes.get(agentId) === lane) lanes.delete(agentId)
          }),
          noteActivity
        ))
      )
    })

  return {
    inLane,
    busy: (agentId) => (lanes.get(agentId)?.busy ?? 0) > 0,
    held: () => [...lanes].flatMap(([agentId, lane]) => lane.busy > 0 ? [agentId] : []),
    count: () => lanes.size
  }
}
