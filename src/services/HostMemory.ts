import { Context, type Effect, type Option } from "effect"

/**
 * The host's available memory, for a memory budget's `minAvailable` floor. `None` when it cannot
 * be read: a floor is then never crossed on a guess.
 */
export class HostMemory extends Context.Service<HostMemory, {
  /** Bytes available now: `MemAvailable`, and inside a cgroup v2 with a limit its headroom, whichever is smaller. */
  readonly available: Effect.Effect<Option.Option<number>>
}>()("quiesce/host/HostMemory") {}
