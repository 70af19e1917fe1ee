import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { MemoryProvider } from "../../src/testing/MemoryProvider.ts"
import { ProviderRegistry } from "../../src/services/ProviderRegistry.ts"
import { memoryDaemon } from "../support/memoryDaemon.ts"

describe("ProviderRegistry (H1: registration is sealed before the host opens)", () => {
  it.effect("a provider added after the seal is refused, and what is served does not change", () =>
    Effect.gen(function*() {
      const registry = yield* ProviderRegistry
      yield* registry.seal
      const late = new MemoryProvider("late")
      const refused = yield* Effect.flip(Layer.build(late.layer).pipe(Effect.provideService(ProviderRegistry, registry)))
      assert.strictEqual(refused._tag, "ProviderRegistrationRefused")
      assert.include(refused.message, "after the registry was sealed")
      assert.deepStrictEqual(yield* registry.providers, ["codex"])
    }).pipe(Effect.scoped, Effect.provide(ProviderRegistry.sealed.pipe(
      Layer.provideMerge(new MemoryProvider("codex").layer),
      Layer.provideMerge(ProviderRegistry.layer)
    ))))

  it.effect("two providers under one id are refused instead of the second replacing the first", () =>
    Effect.gen(function*() {
      const refused = yield* Effect.flip(Layer.build(
        Layer.mergeAll(new MemoryProvider("codex").layer, new MemoryProvider("codex").layer).pipe(Layer.provideMerge(ProviderRegistry.layer))
      ))
      assert.strictEqual(refused._tag, "ProviderRegistrationRefused")
      assert.include(refused.message, "registered twice")
    }).pipe(Effect.scoped))

  it.effect("a daemon's services seal the registry once its providers are composed", () =>
    Effect.gen(function*() {
      const registry = yield* ProviderRegistry
      const refused = yield* Effect.flip(Layer.build(new MemoryProvider("late").layer).pipe(Effect.provideService(ProviderRegistry, registry)))
      assert.strictEqual(refused._tag, "ProviderRegistrationRefused")
    }).pipe(Effect.scoped, Effect.provide(memoryDaemon())))
})
