/**
 * The operations on one agent (`AgentOperations`) as this daemon's own registry carries them out
 * (a lone daemon), and a forwarder to operations chosen later (a cluster's runner, once it has
 * joined its cluster: `AgentOperationsLive.clusterLayer` in `quiesce/cluster`).
 */
import { Effect, Layer } from "effect"
import { AgentOperations } from "../../services/AgentOperations.ts"
import { type AgentActions, AgentRegistry } from "../../services/AgentRegistry.ts"

const local = Effect.gen(function*() {
  const registry: AgentActions = yield* AgentRegistry
  return AgentOperations.of({
    create: registry.create,
    prompt: registry.prompt,
    interrupt: registry.interrupt,
    respondToPermission: registry.respondToPermission,
    get: registry.get,
    turn: registry.turn,
    turns: registry.turns,
    awaitFinish: registry.awaitFinish
  })
})

/** Every operation on this daemon's registry. */
export const layer: Layer.Layer<AgentOperations, never, AgentRegistry> = Layer.effect(AgentOperations, local)

/**
 * The operations `target()` returns once it returns them, and this daemon's registry's until
 * then, except `awaitFinish`, which waits for them (checked every 100 ms). A cluster's runner
 * builds its message delivery and finish subscriptions before it joins the cluster; through this
 * they reach, once it has joined, the runner that hosts each agent.
 */
export const layerVia = (
  target: () => AgentOperations["Service"] | undefined
): Layer.Layer<AgentOperations, never, AgentRegistry> =>
  Layer.effect(
    AgentOperations,
    Effect.gen(function*() {
      const registry = yield* local
      const current = () => target() ?? registry
      // Until the runner has joined, no registry here hosts an agent, so a watch of this registry
      // would hear of no finish: it waits to be carried to the target's runner.
      const joined: Effect.Effect<AgentOperations["Service"]> = Effect.suspend(() => {
        const operations = target()
        return operations === undefined ? Effect.andThen(Effect.sleep("100 millis"), joined) : Effect.succeed(operations)
      })
      return AgentOperations.of({
        create: (input) => Effect.suspend(() => current().create(input)),
        prompt: (agentId, text, options) => Effect.suspend(() => current().prompt(agentId, text, options)),
        interrupt: (agentId) => Effect.suspend(() => current().interrupt(agentId)),
        respondToPermission: (agentId, permissionId, allow) =>
          Effect.suspend(() => current().respondToPermission(agentId, permissionId, allow)),
        get: (agentId) => Effect.suspend(() => current().get(agentId)),
        turn: (agentId, turnId) => Effect.suspend(() => current().turn(agentId, turnId)),
        turns: (agentId, limit) => Effect.suspend(() => current().turns(agentId, limit)),
        awaitFinish: (agentId, options) => Effect.flatMap(joined, (operations) => operations.awaitFinish(agentId, options))
      })
    })
  )

