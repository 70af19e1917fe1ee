import { Context } from "effect"

/**
 * Whether this daemon is where an agent lives now. A lone daemon hosts every agent (the
 * default). A cluster's runner hosts the agents of the shards it holds (X6): the registry
 * resumes or creates an agent only there, whichever path asks (a prompt, a finish notification,
 * a delivered message), so one agent never has two runtimes.
 */
export interface AgentPlacementService {
  readonly hostsHere: (agentId: string) => boolean
}

/** The agent placement service; unless a cluster provides its own, every agent is hosted here. */
export const AgentPlacement = Context.Reference<AgentPlacementService>("quiesce/cluster/AgentPlacement", {
  defaultValue: () => ({ hostsHere: () => true })
})
