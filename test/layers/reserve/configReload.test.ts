import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { decodeConfig, type QuiesceConfig } from "../../../src/domain/config.ts"
import { makeConfigReload, restartChanges } from "../../../src/layers/reserve/configReload.ts"
import { WarmReserve, type WarmReserveService } from "../../../src/services/WarmReserve.ts"

const config = (raw: unknown): Effect.Effect<QuiesceConfig> => Effect.orDie(decodeConfig(raw))

const tempFile = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-reload-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir) => join(dir, "config.json")))

/** A reserve that records each resize. */
const recordingReserve = (resized: Array<[string, number]>): WarmReserveService => ({
  ...WarmReserve.defaultValue(),
  resize: (provider, target) =>
    Effect.sync(() => {
      resized.push([provider, target])
      return { provider, target, ready: [], starting: 0, lastFailure: null, retryAt: null }
    })
})

describe("config reload", () => {
  it.effect("names what takes a restart, ignoring warm reserves and the order of keys", () =>
    Effect.gen(function*() {
      const running = yield* config({
        daemon: { port: 7400 },
        providers: { codex: { kind: "codex", env: { A: "1", B: "2" }, warmReserve: 1 }, shell: { kind: "shell" } }
      })
      const reordered = yield* config({
        daemon: { port: 7400 },
        providers: { shell: { kind: "shell", warmReserve: 3 }, codex: { kind: "codex", warmReserve: 0, env: { B: "2", A: "1" } } }
      })
      assert.deepStrictEqual(restartChanges(running, reordered), [])
      const changed = yield* config({
        daemon: { port: 7401 },
        agents: { idlePeriod: "5m" },
        providers: { codex: { kind: "codex", command: "/opt/codex", env: { A: "1", B: "2" } }, pi: { kind: "pi" } }
      })
      assert.deepStrictEqual(restartChanges(running, changed), [
        "agents.idlePeriod",
        "daemon.port",
        "providers.codex",
        "providers.pi",
        "providers.shell"
      ])
    }))

  it.effect("sets each served provider's reserve: the file's, 0 when unset or removed; a changed kind waits for the restart", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* tempFile
      const started = yield* config({
        providers: {
          shell: { kind: "shell", warmReserve: 1 },
          codex: { kind: "codex", warmReserve: 2 },
          worker: { kind: "plugin", command: "/bin/worker", warmReserve: 1 },
          gone: { kind: "plugin", command: "/bin/gone", warmReserve: 1 },
          claude: { kind: "claude" }
        }
      })
      writeFileSync(file, JSON.stringify({
        providers: {
          shell: { kind: "shell", warmReserve: 4 },
          codex: { kind: "codex" },
          worker: { kind: "acp", command: "/bin/worker", warmReserve: 3 },
          claude: { kind: "claude" }
        }
      }))
      const resized: Array<[string, number]> = []
      const reload = yield* makeConfigReload(file, {}, started).pipe(Effect.provideService(WarmReserve, recordingReserve(resized)))
      const reloaded = yield* reload
      assert.deepStrictEqual(resized, [["shell", 4], ["codex", 0], ["gone", 0]])
      assert.deepStrictEqual(reloaded.applied, [
        { provider: "shell", warmReserve: 4 },
        { provider: "codex", warmReserve: 0 },
        { provider: "gone", warmReserve: 0 }
      ])
      assert.deepStrictEqual(reloaded.needsRestart, ["providers.gone", "providers.worker"])

      writeFileSync(file, "{ not json")
      const refused = yield* Effect.flip(reload)
      assert.strictEqual(refused._tag, "ConfigReloadFailed")
      assert.include(refused.message, file)
      assert.strictEqual(resized.length, 3)
    })))
})
