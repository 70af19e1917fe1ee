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
      assert.deepStrictEqual(config.daemon, { port: 7377, host: "127.0.0.1", maxRequestBytes: 1_048_576 })
      assert.deepStrictEqual(config.providers, { shell: { kind: "shell" } }, "only the reference provider")
    }))

  it.effect("reads a cluster section, with its defaults, and refuses what a runner could not serve", () =>
    Effect.gen(function*() {
      const runner = { storage: { kind: "postgres", url: "postgres://quiesce@db:5432/q" }, runner: { host: "10.0.0.5", port: 7400 } }
      const config = yield* decodeConfigJson(JSON.stringify({ cluster: runner }))
      assert.strictEqual(config.cluster?.group, "default")
      assert.deepStrictEqual(config.cluster?.groups, ["default"])
      assert.strictEqual(config.cluster?.shardsPerGroup, 300)
      const pinned = yield* decodeConfigJson(JSON.stringify({ cluster: { ...runner, group: "east", groups: ["east", "west"] } }))
      assert.strictEqual(pinned.cluster?.group, "east")
      for (const [bad, says] of [
        [{ ...runner, group: "north", groups: ["east", "west"] }, "must be one of cluster.groups"],
        [{ ...runner, group: "East-1" }, "group"],
        [{ ...runner, storage: { kind: "postgres", url: "mysql://db/q" } }, "url"],
        [{ ...runner, pluginHome: "relative/sessions" }, "pluginHome"],
        [{ ...runner, runner: { host: "10.0.0.5", port: 0 } }, "port"]
      ] as const) {
        const error = yield* Effect.flip(decodeConfigJson(JSON.stringify({ cluster: bad })))
        assert.include(error.message, says)
      }
    }))

  it.effect("reads providers by id: native adapters default their command, ACP and plugins name theirs", () =>
    Effect.gen(function*() {
      const config = yield* decodeConfigJson(JSON.stringify({
        providers: {
          codex: { kind: "codex" },
          slow: { kind: "pi", closeGrace: "5s", requestTimeout: "2m" },
          "work-claude": { kind: "claude", command: "/opt/claude/bin/claude", env: { CLAUDE_CONFIG_DIR: "/srv/claude" } },
          opencode: { kind: "opencode" },
          gemini: { kind: "acp", command: "gemini", args: ["--experimental-acp"] }
        }
      }))
      assert.deepStrictEqual(config.providers["codex"], { kind: "codex", command: "codex", env: {} })
      assert.deepStrictEqual(config.providers["work-claude"], {
        kind: "claude",
        command: "/opt/claude/bin/claude",
        env: { CLAUDE_CONFIG_DIR: "/srv/claude" }
      })
      assert.deepStrictEqual(config.providers["opencode"], {
        kind: "opencode",
        command: "opencode",
        env: {},
        trustMissingInventories: false
      })
      assert.deepStrictEqual(config.providers["gemini"], {
        kind: "acp",
        command: "gemini",
        args: ["--experimental-acp"],
        env: {}
      })
      const slow = config.providers["slow"]
      assert.strictEqual(slow?.kind === "pi" ? Duration.toMillis(slow.closeGrace ?? Duration.zero) : 0, 5_000)
      assert.strictEqual(slow?.kind === "pi" ? Duration.toMillis(slow.requestTimeout ?? Duration.zero) : 0, 120_000)
      assert.notProperty(config.providers, "shell", "given providers replace the default")
    }))

  it.effect("reads Go-style durations", () =>
    Effect.gen(function*() {
      const config = yield* decodeConfigJson(`{"agents":{"idlePeriod":"1h30m","sweepInterval":"30s"}}`)
      assert.strictEqual(Duration.toMillis(config.agents.idlePeriod), 5_400_000)
      assert.strictEqual(Duration.toMillis(config.agents.sweepInterval), 30_000)
    }))

  it.effect("reads a memory budget: sizes in bytes, minIdle 2m and sampleInterval 5s by default, off when absent", () =>
    Effect.gen(function*() {
      const config = yield* decodeConfigJson(
        `{"agents":{"memory":{"high":"6GiB","low":"4GiB","minAvailable":"512MiB"},"maxResident":8}}`
      )
      const memory = config.agents.memory
      assert.strictEqual(memory?.high, 6 * 1024 ** 3)
      assert.strictEqual(memory?.low, 4 * 1024 ** 3)
      assert.strictEqual(memory?.minAvailable, 512 * 1024 ** 2)
      assert.strictEqual(memory === undefined ? 0 : Duration.toMillis(memory.minIdle), 120_000)
      assert.strictEqual(memory === undefined ? 0 : Duration.toMillis(memory.sampleInterval), 5_000)
      assert.strictEqual(config.agents.maxResident, 8)
      const none = yield* decodeConfigJson(`{}`)
      assert.isUndefined(none.agents.memory)
      assert.isUndefined(none.agents.maxResident)
    }))

  for (
    const [text, path, words] of [
      [`{"agents":{"memory":{"high":"6GiB"}}}`, `["agents"]["memory"]`, "go together"],
      [`{"agents":{"memory":{"high":"4GiB","low":"6GiB"}}}`, `["agents"]["memory"]`, "must be below"],
      [`{"agents":{"memory":{"minAvailable":"lots"}}}`, `["agents"]["memory"]["minAvailable"]`, "expected a size"],
      [`{"agents":{"maxResident":0}}`, `["agents"]["maxResident"]`, "greater than 0"],
      [`{"agents":{"idlePeriod":"-1h"}}`, `["agents"]["idlePeriod"]`, "must not be negative"],
      [`{"agents":{"idlePeriod":"soon"}}`, `["agents"]["idlePeriod"]`, "Go-style duration"],
      [`{"agents":{"idlePerod":"1h"}}`, `["agents"]["idlePerod"]`, "excess property"],
      [`{"daemon":{"port":"x"}}`, `["daemon"]["port"]`, "Expected number"],
      [`{"daemon":{"port":70000}}`, `["daemon"]["port"]`, "65535"],
      [`{"daemon":{"maxRequestBytes":0}}`, `["daemon"]["maxRequestBytes"]`, "greater than 0"],
      [`{"daemon":{"maxRequestBytes":1.5}}`, `["daemon"]["maxRequestBytes"]`, "integer"],
      [`{"agents":{"probeConcurrency":0}}`, `["agents"]["probeConcurrency"]`, "greater than 0"],
      [`{"agents":{"idlePeriod":"0s"}}`, `["agents"]["idlePeriod"]`, "greater than zero"],
      [`{"agents":{"sweepInterval":"0s"}}`, `["agents"]["sweepInterval"]`, "greater than zero"],
      [`{"providers":{"Codex":{"kind":"codex"}}}`, `["providers"]`, `provider id "Codex"`],
      [`{"providers":{"gemini":{"kind":"acp"}}}`, `["providers"]["gemini"]["command"]`, "Missing key"],
      [`{"providers":{"x":{"kind":"cursor"}}}`, `["providers"]["x"]`, `"kind": "codex"`],
      [`{"providers":{"pi":{"kind":"pi","comand":"pi"}}}`, `["providers"]["pi"]["comand"]`, "excess property"],
      [`{"providers":{"pi":{"kind":"pi","command":""}}}`, `["providers"]["pi"]["command"]`, "length"],
      [`{"providers":{"pi":{"kind":"pi","closeGrace":"0s"}}}`, `["providers"]["pi"]["closeGrace"]`, "greater than zero"]
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

describe("config.json for editors", () => {
  it.effect("may name its JSON Schema ($schema)", () =>
    Effect.gen(function*() {
      const config = yield* decodeConfigJson(`{"$schema":"../schemas/config.schema.json"}`)
      assert.strictEqual(config.$schema, "../schemas/config.schema.json")
    }))

  it("the JSON Schema gives every duration the shape of a Go duration", () => {
    const text = JSON.stringify(configJsonSchema())
    const pattern = /"pattern":"([^"\\]*(?:\\.[^"\\]*)*)"/.exec(text)
    assert.isNotNull(pattern)
    const durations = new RegExp(JSON.parse(`"${pattern![1]}"`))
    for (const good of ["1h", "1h30m", "250ms", "0s", "0", "1.5h"]) assert.isTrue(durations.test(good), good)
    for (const bad of ["-5m", "soon", "", "1 h"]) assert.isFalse(durations.test(bad), bad)
  })
})

describe("schemas/config.schema.json", () => {
  it("is what the configuration Schema generates (npm run schema rewrites it)", () => {
    const committed: unknown = JSON.parse(readFileSync(new URL("../../schemas/config.schema.json", import.meta.url), "utf8"))
    assert.deepStrictEqual(committed, configJsonSchema())
  })
})
