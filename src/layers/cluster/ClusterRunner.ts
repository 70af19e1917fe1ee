/**
 * One runner of a Quiesce cluster (X6): Effect Cluster's sharding over a PostgreSQL database
 * (its message and runner storage, beside the shared stores), this runner serving its shards on
 * `host:port` over the socket transport, and the Agent entity served by this runner's own
 * registry and collector.
 *
 * Every runner hosts the agents of the shards it holds; a message for any agent, sent from any
 * runner, reaches the runner that holds the agent's shard. Runners take shards through locks in
 * the database; a runner that stops releases its shards (its entities hand their runtimes off
 * first), and one that dies loses them once its locks expire (`shardLockExpiration`).
 */
import { NodeClusterSocket } from "@effect/platform-node"
import { type Duration, Layer, Option } from "effect"
import { RunnerAddress } from "effect/cluster"
import type { SqlClient } from "effect/sql"
import type { AgentRegistry } from "../../services/AgentRegistry.ts"
import type { RuntimeCollector } from "../../services/RuntimeCollector.ts"
import * as AgentEntity from "./AgentEntity.ts"

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
}

/**
 * Sharding over the `SqlClient` given (the cluster's PostgreSQL database) with the Agent entity
 * registered, served by the `AgentRegistry` and `RuntimeCollector` given.
 */
export const layer = (options: ClusterRunnerOptions) =>
  AgentEntity.layer.pipe(
    Layer.provideMerge(NodeClusterSocket.layer({
      storage: "sql",
      shardingConfig: {
        runnerAddress: Option.some(RunnerAddress.make(options.host, options.port)),
        ...(options.shardsPerGroup === undefined ? {} : { shardsPerGroup: options.shardsPerGroup }),
        ...(options.shardLockExpiration === undefined ? {} : { shardLockExpiration: options.shardLockExpiration }),
        ...(options.shardLockRefreshInterval === undefined ? {} : { shardLockRefreshInterval: options.shardLockRefreshInterval }),
        ...(options.entityMaxIdleTime === undefined ? {} : { entityMaxIdleTime: options.entityMaxIdleTime })
      }
    }))
  )

/** What a runner needs from its host: the cluster's database and its own registry and collector. */
export type ClusterRunnerRequirements = SqlClient.SqlClient | AgentRegistry | RuntimeCollector
