import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { readFileSync } from "node:fs"
import { configJsonSchema, decodeConfigJson } from "../../src/domain/config.ts"

describe("configuration file", () => {
  it.effect("fills every default from an empty file", () =>
    Effect.gen(function*() {
      const config = yield* decodeConfigJson("{}")
      assert.isTrue(config.agents.idleRuntimeCleanup)
      assert.strictEqual(Duration.toMillis(config.agents.idlePeriod), 3_600_000)
      assert.strictEqual(Duration.toMillis(config.agents.sweepInterval), 60_000)
      assert.strictEqual(Duration.toMillis(config.agents.probeTimeout), 10_000)
      assert.strictEqual(config.agents.probeConcurrency, 16)
      assert.deepStrictEqual(config.daemon, { port: 7377, host: "127.0.0.1" })
    }))

  it.effect("reads Go-style durations", () =>
    Effect.gen(function*() {
      const config = yield* decodeConfigJson(`{"agents":{"idlePeriod":"1h30m","sweepInterval":"30s"}}`)
      assert.strictEqual(Duration.toMillis(config.agents.idlePeriod), 5_400_000)
      assert.strictEqual(Duration.toMillis(config.agents.sweepInterval), 30_000)
    }))

  for (
    const [text, path, words] of [
      [`{"agents":{"idlePeriod":"-1h"}}`, `["agents"]["idlePeriod"]`, "must not be negative"],
      [`{"agents":{"idlePeriod":"soon"}}`, `["agents"]["idlePeriod"]`, "Go-style duration"],
      [`{"agents":{"idlePerod":"1h"}}`, `["agents"]["idlePerod"]`, "excess property"],
      [`{"daemon":{"port":"x"}}`, `["daemon"]["port"]`, "Expected number"],
      [`{"daemon":{"port":70000}}`, `["daemon"]["port"]`, "65535"],
      [`{"agents":{"probeConcurrency":0}}`, `["agents"]["probeConcurrency"]`, "greater than 0"],
      [`{"agents":{"idlePeriod":"0s"}}`, `["agents"]["idlePeriod"]`, "greater than zero"],
      [`{"agents":{"sweepInterval":"0s"}}`, `["agents"]["sweepInterval"]`, "greater than zero"]
    ] as const
  ) {
    it.effect(`rejects ${text} naming the path`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(decodeConfigJson(text))
        assert.include(error.message, path)
        assert.include(error.message, words)
      }))
  }
})

describe("schemas/config.schema.json", () => {
  it("is what the configuration Schema generates (npm run schema rewrites it)", () => {
    const committed: unknown = JSON.parse(readFileSync(new URL("../../schemas/config.schema.json", import.meta.url), "utf8"))
    assert.deepStrictEqual(committed, configJsonSchema())
  })
})
