/**
 * Runners whose process is gone lose their shards within seconds, not at lock expiry.
 *
 * Effect Cluster drops a runner from the shard assignments once its heartbeat is older than
 * `shardLockExpiration` (35 s by default), or once its runner-health singleton finds it dead
 * (every minute, and not at all while the singleton itself lived on the dead runner). Here
 * every runner, every `interval`, tries to connect to each other healthy runner's socket. A
 * connection that is refused (nobody listens on that port: the process is gone) marks the
 * runner unhealthy in the runner storage, and every runner moves its shards at its next
 * assignment refresh.
 *
 * Only a refused connection counts. A runner that does not answer (a machine down, a network
 * cut, a frozen process) may still be working; it keeps its shards until its locks expire.
 * Marking a runner unhealthy never gives an agent two hosts: a shard still moves only through
 * its lock, which a live runner holds until it has handed the shard off itself.
 */
import { connect } from "node:net"
import { type Duration, Effect, Equal, Layer, Schedule } from "effect"
import { type RunnerAddress, RunnerStorage } from "effect/cluster"

/** What a connection attempt to a runner's socket found. */
export type SocketProbe = "answers" | "refused" | "unknown"

/** Tries to connect to `address`; `unknown` when it neither connects nor is refused within `timeout` ms. */
export const probeSocket = (address: RunnerAddress.RunnerAddress, timeout = 1000): Effect.Effect<SocketProbe> =>
  Effect.callback<SocketProbe>((resume) => {
    const socket = connect({ host: address.host, port: address.port, timeout })
    const settle = (outcome: SocketProbe) => {
      socket.destroy()
      resume(Effect.succeed(outcome))
    }
    socket.once("connect", () => settle("answers"))
    socket.once("timeout", () => settle("unknown"))
    socket.once("error", (error: NodeJS.ErrnoException) => settle(error.code === "ECONNREFUSED" ? "refused" : "unknown"))
    return Effect.sync(() => socket.destroy())
  })

/** Every `interval`, marks the runners whose socket refuses connections unhealthy, so their shards move. */
export const layer = (self: RunnerAddress.RunnerAddress, interval: Duration.Input) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const storage = yield* RunnerStorage.RunnerStorage
    const check = Effect.gen(function*() {
      const others = (yield* storage.getRunners).filter(([runner, healthy]) => healthy && !Equal.equals(runner.address, self))
      yield* Effect.forEach(others, ([runner]) =>
        Effect.gen(function*() {
          if ((yield* probeSocket(runner.address)) !== "refused") return
          yield* storage.setRunnerHealth(runner.address, false)
          yield* Effect.logWarning("A runner of the cluster is gone (its socket refuses connections): its shards move to the others").pipe(
            Effect.annotateLogs({ runner: `${runner.address.host}:${runner.address.port}` })
          )
        }), { concurrency: "unbounded", discard: true })
    }).pipe(Effect.catch((error) =>
      Effect.logWarning("Checking the cluster's runners failed").pipe(Effect.annotateLogs({ error: error.message }))
    ))
    yield* check.pipe(Effect.schedule(Schedule.spaced(interval)), Effect.forkScoped)
  }))
