import { Context, Effect, Layer } from "effect"
import { ProviderNotFound } from "../domain/errors.ts"
import type { AgentClient } from "../domain/provider.ts"

/**
 * Provider id → `AgentClient`. Each provider adds itself with its own layer
 * (`ProviderRegistry.register(client)`), composed over `ProviderRegistry.layer`.
 */
export class ProviderRegistry extends Context.Service<ProviderRegistry, {
  readonly get: (provider: string) => Effect.Effect<AgentClient, ProviderNotFound>
  readonly add: (client: AgentClient) => Effect.Effect<void>
  readonly providers: Effect.Effect<ReadonlyArray<string>>
}>()("quiesce/providers/ProviderRegistry") {
  static readonly layer = Layer.sync(ProviderRegistry, () => {
    const clients = new Map<string, AgentClient>()
    return ProviderRegistry.of({
      get: (provider) => {
        const client = clients.get(provider)
        return client === undefined
          ? Effect.fail(ProviderNotFound.of(provider, [...clients.keys()].sort()))
          : Effect.succeed(client)
      },
      add: (client) => Effect.sync(() => void clients.set(client.provider, client)),
      providers: Effect.sync(() => [...clients.keys()])
    })
  })

  /** A layer that adds one provider's client to the registry. */
  static readonly register = <E, R>(client: Effect.Effect<AgentClient, E, R>) =>
    Layer.effectDiscard(Effect.gen(function*() {
      const registry = yield* ProviderRegistry
      yield* registry.add(yield* client)
    }))
}
