import { Context, Effect, Layer } from "effect"
import { ProviderNotFound, ProviderRegistrationRefused } from "../domain/errors.ts"
import type { AgentClient } from "../domain/provider.ts"

/**
 * Provider id → `AgentClient`. Each provider adds itself with its own layer
 * (`ProviderRegistry.register(client)`), composed over `ProviderRegistry.layer`. A host seals
 * the registry once it has composed its providers (H1): from then on, and for an id already
 * taken, `add` fails with `ProviderRegistrationRefused` instead of changing what it serves.
 */
export class ProviderRegistry extends Context.Service<ProviderRegistry, {
  readonly get: (provider: string) => Effect.Effect<AgentClient, ProviderNotFound>
  readonly add: (client: AgentClient) => Effect.Effect<void, ProviderRegistrationRefused>
  readonly providers: Effect.Effect<ReadonlyArray<string>>
  /** No provider is added from now on. */
  readonly seal: Effect.Effect<void>
}>()("quiesce/providers/ProviderRegistry") {
  static readonly layer = Layer.sync(ProviderRegistry, () => {
    const clients = new Map<string, AgentClient>()
    let sealed = false
    return ProviderRegistry.of({
      get: (provider) => {
        const client = clients.get(provider)
        return client === undefined
          ? Effect.fail(ProviderNotFound.of(provider, [...clients.keys()].sort()))
          : Effect.succeed(client)
      },
      add: (client) =>
        Effect.suspend(() => {
          if (sealed) {
            return Effect.fail(new ProviderRegistrationRefused({
              provider: client.provider,
              message: `Provider ${client.provider} registered after the registry was sealed: providers are composed before the host opens`
            }))
          }
          if (clients.has(client.provider)) {
            return Effect.fail(new ProviderRegistrationRefused({
              provider: client.provider,
              message: `Provider ${client.provider} is registered twice: each id names one provider`
            }))
          }
          clients.set(client.provider, client)
          return Effect.void
        }),
      providers: Effect.sync(() => [...clients.keys()]),
      seal: Effect.sync(() => {
        sealed = true
      })
    })
  })

  /** Seals the registry once the layers before it have registered their providers. */
  static readonly sealed = Layer.effectDiscard(Effect.gen(function*() {
    yield* (yield* ProviderRegistry).seal
  }))

  /** A layer that adds one provider's client to the registry. */
  static readonly register = <E, R>(client: Effect.Effect<AgentClient, E, R>) =>
    Layer.effectDiscard(Effect.gen(function*() {
      const registry = yield* ProviderRegistry
      yield* registry.add(yield* client)
    }))
}
