/**
 * Scale-out on Effect Cluster: daemons as runners of one cluster over PostgreSQL, each agent an
 * `Agent` entity hosted by one runner. This entry loads the optional peer dependency
 * `@effect/sql-pg`; install it to use it.
 *
 * @module
 */
export * from "../services/AgentClose.ts"
export * from "../services/AgentOperations.ts"
export * from "../services/AgentPlacement.ts"
export * as AgentEntity from "../layers/cluster/AgentEntity.ts"
export * as AgentOperationsLive from "../layers/cluster/agentOperations.ts"
export * as ClusterRunner from "../layers/cluster/ClusterRunner.ts"
export * as PostgresDatabase from "../layers/store/PostgresDatabase.ts"
export * as ShardGroups from "../layers/cluster/shardGroups.ts"
