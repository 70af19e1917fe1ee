import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer } from "effect"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as HomeLive from "../../../src/layers/host/Home.ts"
import { Home, HomeUnavailable } from "../../../src/services/Home.ts"
import { ConfigInvalid, loadConfig } from "../../../src/layers/host/loadConfig.ts"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "quiesce-home-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

describe("Home (H2)", () => {
  it.effect("one daemon owns a home: a second one is refused, naming the holder", () =>
    Effect.gen(function*() {
      const root = join(yield* tempDir, "home")
      yield* Effect.scoped(Effect.gen(function*() {
        const first = Context.get(yield* Layer.build(HomeLive.layer(root)), Home)
        const error = yield* Effect.flip(Effect.scoped(Layer.build(HomeLive.layer(root))))
        assert.strictEqual(error._tag, "HomeUnavailable")
        assert.include(error.message, `pid ${process.pid}`)
        assert.strictEqual(first.root, root)
      }))
      assert.isFalse(existsSync(join(root, "daemon.lock")), "released with its scope")
      yield* Effect.scoped(Layer.build(HomeLive.layer(root)))
    }))

  it.effect("a lock left by a dead daemon is taken over", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      writeFileSync(join(root, "daemon.lock"), JSON.stringify({ pid: 2 ** 22 + 12345, startedAt: 0 }))
      const home = Context.get(yield* Layer.build(HomeLive.layer(root)), Home)
      assert.include(readFileSync(join(root, "daemon.lock"), "utf8"), `"pid":${process.pid}`)
      assert.strictEqual(home.root, root)
    }))

  it.effect("a lock naming a live pid with another start time is stale (the pid was reused)", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      writeFileSync(join(root, "daemon.lock"), JSON.stringify({ pid: 1, startedAt: 0, startTime: 1 }))
      yield* Layer.build(HomeLive.layer(root))
      assert.include(readFileSync(join(root, "daemon.lock"), "utf8"), `"pid":${process.pid}`)
    }))

  it.effect("a lock naming a live process is kept, and no private files are left behind", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      writeFileSync(join(root, "daemon.lock"), JSON.stringify({ pid: 1, startedAt: 0 }))
      const error = yield* Effect.flip(Effect.scoped(Layer.build(HomeLive.layer(root))))
      assert.include(error.message, "pid 1")
      assert.deepStrictEqual(readdirSync(root).sort(), ["daemon.lock"])
    }))

  it.effect("the API token is created once, readable only by its owner", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const openedToken = (c: Context.Context<Home>) => {
        const home = Context.get(c, Home)
        return Effect.as(home.opened, home.token)
      }
      const first = yield* Effect.scoped(Effect.flatMap(Layer.build(HomeLive.layer(root)), openedToken))
      const second = yield* Effect.scoped(Effect.flatMap(Layer.build(HomeLive.layer(root)), openedToken))
      assert.match(first, /^[0-9a-f]{64}$/)
      assert.strictEqual(second, first)
      assert.strictEqual(statSync(join(root, "token")).mode & 0o777, 0o600)
    }))
})

const modeOf = (file: string) => statSync(file).mode & 0o777

describe("Home: a start that does not finish opening (H1)", () => {
  it.effect("takes back the token, the database and plugins/ it made, and keeps what was there", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      yield* Effect.scoped(Effect.gen(function*() {
        const home = Context.get(yield* Layer.build(HomeLive.layer(root)), Home)
        writeFileSync(home.databaseFile, "")
        writeFileSync(`${home.databaseFile}-wal`, "")
        assert.isTrue(existsSync(home.tokenFile))
      }))
      assert.deepStrictEqual(readdirSync(root), [], "nothing made by the failed start is left")

      writeFileSync(join(root, "token"), "kept-token\n")
      writeFileSync(join(root, "quiesce.sqlite"), "")
      yield* Effect.scoped(Effect.gen(function*() {
        const home = Context.get(yield* Layer.build(HomeLive.layer(root)), Home)
        // Beside a database that was there, its journal may hold another connection's pages.
        writeFileSync(`${home.databaseFile}-wal`, "")
      }))
      assert.deepStrictEqual(readdirSync(root).sort(), ["quiesce.sqlite", "quiesce.sqlite-wal", "token"], "what was there is kept")
      assert.strictEqual(readFileSync(join(root, "token"), "utf8"), "kept-token\n")
    }))

  it.effect("keeps everything once opened", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      yield* Effect.scoped(Effect.gen(function*() {
        const home = Context.get(yield* Layer.build(HomeLive.layer(root)), Home)
        writeFileSync(home.databaseFile, "")
        yield* home.opened
      }))
      assert.deepStrictEqual(readdirSync(root).sort(), ["plugins", "quiesce.sqlite", "token"])
    }))

  it.effect("leaves a plugin's own state alone", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      yield* Effect.scoped(Effect.gen(function*() {
        const home = Context.get(yield* Layer.build(HomeLive.layer(root)), Home)
        mkdirSync(join(home.pluginHome, "shell"))
      }))
      assert.deepStrictEqual(readdirSync(root), ["plugins"])
    }))
})

describe("Home on hostile input", () => {
  for (
    const [kind, content, words] of [
      ["an empty", "", "is empty"],
      ["a whitespace-only", "  \n\t\n", "is empty"],
      ["a two-line", "abc\ndef\n", "does not hold a usable token"]
    ] as const
  ) {
    it.effect(`${kind} token file stops the start, naming the file and the way out`, () =>
      Effect.gen(function*() {
        const root = yield* tempDir
        const tokenFile = join(root, "token")
        writeFileSync(tokenFile, content, { mode: 0o600 })
        const error = yield* Effect.flip(Effect.scoped(Layer.build(HomeLive.layer(root))))
        assert.instanceOf(error, HomeUnavailable)
        assert.include(error.message, `The API token file ${tokenFile} ${words}`)
        assert.include(error.message, "Delete it to have a new one made at the next start")
        assert.strictEqual(readFileSync(tokenFile, "utf8"), content, "left as it was")
        assert.isFalse(existsSync(join(root, "daemon.lock")), "the lock is released")
      }))
  }

  it.effect("an unreadable token file stops the start, naming the file", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const tokenFile = join(root, "token")
      mkdirSync(tokenFile)
      const error = yield* Effect.flip(Effect.scoped(Layer.build(HomeLive.layer(root))))
      assert.include(error.message, `Cannot read the API token file ${tokenFile}`)
      assert.include(error.message, "delete it to have a new one made")
    }))

  it.effect("tokenProblem accepts what the daemon makes and nothing a bearer header cannot carry", () =>
    Effect.sync(() => {
      assert.isUndefined(HomeLive.tokenProblem("0123abcdef"))
      assert.isUndefined(HomeLive.tokenProblem("a-b_c.d~e+f/g=="))
      for (const bad of ["", " ", "a b", "a\nb", "tök"]) assert.isString(HomeLive.tokenProblem(bad), JSON.stringify(bad))
    }))

  it.effect("a home the daemon creates is 0700, and so is its plugins/ folder", () =>
    Effect.gen(function*() {
      const root = join(yield* tempDir, "new", "home")
      const home = Context.get(yield* Layer.build(HomeLive.layer(root)), Home)
      assert.strictEqual(modeOf(root), 0o700)
      assert.strictEqual(modeOf(join(root, "..")), 0o700)
      assert.strictEqual(modeOf(home.pluginHome), 0o700)
      assert.strictEqual(modeOf(home.tokenFile), 0o600)
    }))

  it.effect("a user's own home keeps its mode; the daemon's looser plugins/ and old database are tightened", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      chmodSync(root, 0o755)
      mkdirSync(join(root, "plugins"))
      chmodSync(join(root, "plugins"), 0o755)
      for (const file of ["quiesce.sqlite", "quiesce.sqlite-wal"]) {
        writeFileSync(join(root, file), "")
        chmodSync(join(root, file), 0o644)
      }
      yield* Layer.build(HomeLive.layer(root))
      assert.strictEqual(modeOf(root), 0o755, "the user's choice")
      assert.strictEqual(modeOf(join(root, "plugins")), 0o700)
      assert.strictEqual(modeOf(join(root, "quiesce.sqlite")), 0o600)
      assert.strictEqual(modeOf(join(root, "quiesce.sqlite-wal")), 0o600)
      assert.isFalse(existsSync(join(root, "quiesce.sqlite-shm")), "nothing is created that was not there")
    }))
})

describe("loadConfig", () => {
  it.effect("flags override the file and are validated like it", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const file = join(root, "config.json")
      writeFileSync(file, JSON.stringify({ agents: { idlePeriod: "2h" }, daemon: { port: 9000 } }))
      const config = yield* loadConfig(file, { sweepInterval: "5s" })
      assert.strictEqual(config.daemon.port, 9000)
      assert.strictEqual(Duration.toMillis(config.agents.sweepInterval), 5_000)
      assert.strictEqual(Duration.toMillis(config.agents.idlePeriod), 7_200_000)
      const bad = yield* Effect.flip(loadConfig(file, { idlePeriod: "-5m" }))
      assert.instanceOf(bad, ConfigInvalid)
      assert.include(bad.message, `["agents"]["idlePeriod"]`)
      writeFileSync(file, "{ not json")
      assert.include((yield* Effect.flip(loadConfig(file))).message, file)
    }))

  it.effect("memory flags are laid over the file's agents.memory, keeping what they do not set", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const file = join(root, "config.json")
      writeFileSync(file, JSON.stringify({ agents: { memory: { high: "6GiB", low: "4GiB", minIdle: "5m" } } }))
      const config = yield* loadConfig(file, { memoryLow: "3GiB", minAvailable: "1GiB", maxResident: 12 })
      assert.strictEqual(config.agents.memory?.high, 6 * 1024 ** 3)
      assert.strictEqual(config.agents.memory?.low, 3 * 1024 ** 3)
      assert.strictEqual(config.agents.memory?.minAvailable, 1024 ** 3)
      assert.strictEqual(config.agents.memory === undefined ? 0 : Duration.toMillis(config.agents.memory.minIdle), 300_000)
      assert.strictEqual(config.agents.maxResident, 12)
      const alone = yield* Effect.flip(loadConfig(join(root, "absent.json"), { memoryHigh: "6GiB" }))
      assert.include(alone.message, "go together")
    }))

  it.effect("a missing file means every default", () =>
    Effect.gen(function*() {
      const config = yield* loadConfig(join(yield* tempDir, "absent.json"))
      assert.strictEqual(config.daemon.port, 7377)
    }))
})
