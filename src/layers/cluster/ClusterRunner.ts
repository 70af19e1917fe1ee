/**
 * One runner of a Quiesce cluster (X6): Effect Cluster's sharding over a PostgreSQL database
 * (its message and runner storage, beside the shared stores), this runner serving its shards on
 * `host:port` over the socket transport, and the Agent entity served by this runner's own
 * registry and collector.
 *
 * Every runner hosts the agents of the shards it holds; a message for any agent, sent from any
 * runner, reaches the runner that holds the agent's shard. Runners take shards through locks in
 * the database; a runner that stops releases its shards (its entities hand their runtimes off
 * first); one whose process died loses them within seconds (`goneRunners.ts`), and one that
 * stopped answering once its locks expire (`shardLockExpiration`).
 */
import { NodeClusterSocket, NodeCrypto } from "@effect/platform-node"
import { type Duration, Effect, Layer, Option, Schedule } from "effect"
import { EntityId, RunnerAddress, Sharding, ShardingConfig, SqlMessageStorage, SqlRunnerStorage } from "effect/cluster"
import { type AgentHosting, AgentRegistry } from "../../services/AgentRegistry.ts"
import { TurnJournal } from "../../services/TurnJournal.ts"
import * as AgentEntity from "./AgentEntity.ts"
import * as GoneRunners from "./goneRunners.ts"
import { defaultShardGroup, shardGroupOf } from "./shardGroups.ts"

/** How one runner joins the cluster: its address, the sharding settings every runner shares, and its shard group. */
export interface ClusterRunnerOptions {
  /** Where the other runners reach this one. */
  readonly host: string
  readonly port: number
  /** Shards per shard group (Effect Cluster's default is 300); every runner must say the same. */
  readonly shardsPerGroup?: number | undefined
  /** How long a dead runner's shards stay locked before another runner takes them (default 35 s). */
  readonly shardLockExpiration?: Duration.Input | undefined
  /** How often a runner renews its shard locks (default 10 s); well below the expiration. */
  readonly shardLockRefreshInterval?: Duration.Input | undefined
  /** How long an agent's entity stays without messages and without a resident runtime (default 1 min). */
  readonly entityMaxIdleTime?: Duration.Input | undefined
  /** How often turns left for this runner's agents are looked for (default 10 s). */
  readonly takeOverInterval?: Duration.Input | undefined
  /** The shard group whose agents this runner hosts, and where the agents created through it go (default `default`). */
  readonly shardGroup?: string | undefined
  /** Every shard group of the cluster; the same on every runner (default: `default` only). */
  readonly shardGroups?: ReadonlyArray<string> | undefined
  /** How often this runner checks that the other runners' sockets still accept connections (default 2 s). */
  readonly runnerCheckInterval?: Duration.Input | undefined
}

/** Whether this runner holds the shard of the agent now. */
export const hostsAgent = (sharding: Sharding.Sharding["Service"], agentId: string): boolean =>
  sharding.hasShardId(sharding.getShardId(EntityId.make(agentId), shardGroupOf(agentId)))

/**
 * Every `interval`, the unfinished turns of the agents whose shards this runner holds are taken
 * over (`AgentRegistry.adopt`): a prompt left `accepted` for this runner (it reached a runner
 * that did not host its agent, or waited during a hand-off) runs without waiting for the agent's
 * next message. Turns this runner carries already are left as they are.
 */
export const takeOverLeftTurns = (interval: Duration.Input = "10 seconds") =>
  Layer.effectDiscard(Effect.gen(function*() {
    const journal = yield* TurnJournal
    const registry: AgentHosting = yield* AgentRegistry
    const sharding = yield* Sharding.Sharding
    const sweep = Effect.gen(function*() {
      const agents = new Set((yield* journal.unfinished).map((record) => record.agentId))
      for (const agentId of agents) {
        if (hostsAgent(sharding, agentId)) yield* registry.adopt(agentId)
      }
    }).pipe(Effect.catch((error) =>
      Effect.logWarning("Taking over the turns left for this runner's agents failed").pipe(Effect.annotateLogs({ error: error.message }))
    ))
    yield* sweep.pipe(Effect.schedule(Schedule.spaced(interval)), Effect.forkScoped)
  }))

/**
 * Sharding over the `SqlClient` given (the cluster's PostgreSQL database) with the Agent entity
 * registered, served by the `AgentRegistry` and `RuntimeCollector` given.
 */
export const layer = (options: ClusterRunnerOptions) => {
  const address = RunnerAddress.make(options.host, options.port)
  const shardingConfig: Partial<ShardingConfig.ShardingConfig["Service"]> = {
    runnerAddress: Option.some(address),
    availableShardGroups: options.shardGroups ?? [defaultShardGroup],
    assignedShardGroups: [options.shardGroup ?? defaultShardGroup],
    ...(options.shardsPerGroup === undefined ? {} : { shardsPerGroup: options.shardsPerGroup }),
    ...(options.shardLockExpiration === undefined ? {} : { shardLockExpiration: options.shardLockExpiration }),
    ...(options.shardLockRefreshInterval === undefined ? {} : { shardLockRefreshInterval: options.shardLockRefreshInterval }),
    ...(options.entityMaxIdleTime === undefined ? {} : { entityMaxIdleTime: options.entityMaxIdleTime })
  }
  // The cluster's own storage on the SqlClient given, built here (not inside the socket layer)
  // so that the gone-runner check can mark runners in the runner storage.
  const storage = Layer.mergeAll(
    SqlMessageStorage.layer.pipe(Layer.provide(NodeCrypto.layerDigest)),
    Layer.orDie(SqlRunnerStorage.layer)
  ).pipe(Layer.provide(ShardingConfig.layerFromEnv(shardingConfig)))
  return Layer.mergeAll(
    AgentEntity.layer,
    takeOverLeftTurns(options.takeOverInterval),
    GoneRunners.layer(address, options.runnerCheckInterval ?? "2 seconds")
  ).pipe(
    Layer.provideMerge(NodeClusterSocket.layer({ storage: "byo", shardingConfig })),
    Layer.provideMerge(storage)
  )
}
