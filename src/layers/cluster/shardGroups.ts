/**
 * Pinning agents to runners (X6). Every agent belongs to a shard group, and only the runners
 * assigned to that group host it: the ones that can reach its working directory and its
 * provider's session files (one machine, or machines that share them). The group is part of the
 * agent's id, so every runner finds it from the id alone: `agent-<hex>` is in `default`,
 * `agent-<group>-<hex>` in `<group>`.
 */
import { randomId } from "../../platform/ids.ts"

/** The shard group of agents whose id names none (`agent-<hex>`), and of runners given none. */
export const defaultShardGroup = "default"

/** What a group name may be: it is written into agent ids, between dashes. */
export const shardGroupPattern = /^[a-z][a-z0-9]{0,31}$/

const grouped = /^agent-([a-z][a-z0-9]{0,31})-[0-9a-f]+$/

/** The shard group of an agent, from its id. */
export const shardGroupOf = (agentId: string): string => grouped.exec(agentId)?.[1] ?? defaultShardGroup

/** A new agent id in `group`. */
export const agentIdIn = (group: string) => randomId(group === defaultShardGroup ? "agent" : `agent-${group}`)
