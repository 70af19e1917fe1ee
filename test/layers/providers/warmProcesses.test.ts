/**
 * Warm processes (H4) of the adapters that can start one, with real processes: the shell plugin
 * (plugin protocol) and the ACP fixture agent. A warm process runs in a neutral folder under the
 * marker it was started with, takes one session later (new or resumed) in that session's cwd,
 * refuses a second, and ends with its group whether it was bound or not. Time is real here, so
 * waits poll with a bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { mkdtempSync, readlinkSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { AgentClient, AgentSession } from "../../../src/domain/provider.ts"
import * as AcpProvider from "../../../src/layers/providers/acp/AcpProvider.ts"
import { groupAlive } from "../../../src/platform/processGroups.ts"
import * as PluginProvider from "../../../src/layers/providers/plugin/PluginProvider.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { markerOf, sessionConfig } from "../../support/runtimeMarker.ts"

const shellPlugin = join(import.meta.dirname, "../../../plugins/shell/main.ts")
const acpAgent = join(import.meta.dirname, "../../fixtures/acpAgent.mjs")

const tempDir = Effect.acquireRelease(
  Effect.sync(() => realpathSync(mkdtempSync(join(tmpdir(), "quiesce-warm-")))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const eventually = (condition: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100; i++) {
      if (condition()) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

/** The reply of one turn. */
const turn = (session: AgentSession, text: string) =>
  Effect.flatMap(session.startTurn(text, `turn-${text.length}`), (ended) => ended).pipe(
    Effect.map((end) => end.reply),
    Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(`no reply to ${text}`) })
  )

interface Adapter {
  readonly name: string
  readonly layer: (home: string, warmCwd: string) => Layer.Layer<never, unknown, ProviderRegistry>
  readonly provider: string
  /** A prompt whose reply names the session's working directory, and that reply for `cwd`. */
  readonly askCwd: string
  readonly cwdReply: (cwd: string) => string
}

const adapters: ReadonlyArray<Adapter> = [
  {
    name: "plugin protocol (the shell plugin)",
    provider: "shell",
    layer: (home, warmCwd) =>
      PluginProvider.layer({ provider: "shell", plugin: { command: process.execPath, args: [shellPlugin] }, home, warmCwd }),
    askCwd: "pwd",
    cwdReply: (cwd) => `${cwd}\n`
  },
  {
    name: "ACP (the fixture agent)",
    provider: "acp",
    layer: (home, warmCwd) =>
      AcpProvider.layer({
        provider: "acp",
        command: process.execPath,
        args: [acpAgent],
        env: { ACP_FIXTURE_HOME: join(home, "sessions") },
        closeGrace: "1 second",
        warmCwd
      }),
    askCwd: "cwd",
    cwdReply: (cwd) => `cwd ${cwd}`
  }
]

const clientOf = (adapter: Adapter, home: string, warmCwd: string) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(adapter.layer(home, warmCwd).pipe(Layer.provideMerge(ProviderRegistry.layer)))
    const client: AgentClient = yield* Context.get(context, ProviderRegistry).get(adapter.provider)
    const startWarm = client.startWarm
    if (startWarm === undefined) return assert.fail(`${adapter.name} cannot start warm`)
    return { client, startWarm }
  })

describe.each(adapters)("warm processes: $name", (adapter) => {
  it.live("starts in the neutral folder under its marker, then takes a new session in that session's cwd", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempDir
      const warmCwd = yield* tempDir
      const project = yield* tempDir
      const { startWarm } = yield* clientOf(adapter, home, warmCwd)
      const config = sessionConfig(project)
      const warm = yield* startWarm(config.runtimeMarker)
      assert.isTrue(groupAlive(warm.pid))
      assert.strictEqual(readlinkSync(`/proc/${warm.pid}/cwd`), warmCwd)
      assert.strictEqual(markerOf(warm.pid), config.runtimeMarker)

      const session = yield* warm.create(config)
      assert.strictEqual(session.pid, warm.pid)
      assert.strictEqual(yield* turn(session, adapter.askCwd), adapter.cwdReply(project))
      // One process, one session.
      const again = yield* Effect.flip(warm.create(sessionConfig(project)))
      assert.strictEqual(again.refused, true)
      assert.strictEqual(yield* turn(session, adapter.askCwd), adapter.cwdReply(project))
      yield* session.close
      yield* eventually(() => !groupAlive(warm.pid), "the bound process's group is gone")
    })), 30_000)

  it.live("resumes a saved session, and a warm process closed unbound ends with its group", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tempDir
      const warmCwd = yield* tempDir
      const project = yield* tempDir
      const { client, startWarm } = yield* clientOf(adapter, home, warmCwd)
      const first = yield* client.create(sessionConfig(project))
      yield* turn(first, adapter.askCwd)
      const handle = yield* first.persistence
      yield* first.close
      if (handle === null) return assert.fail("no persistence handle")

      const config = sessionConfig(project)
      const warm = yield* startWarm(config.runtimeMarker)
      const resumed = yield* warm.resume(handle, config)
      assert.deepStrictEqual(yield* resumed.persistence, handle)
      assert.strictEqual(yield* turn(resumed, adapter.askCwd), adapter.cwdReply(project))
      yield* resumed.close

      const unbound = yield* startWarm(sessionConfig(project).runtimeMarker)
      assert.isTrue(groupAlive(unbound.pid))
      yield* unbound.close
      yield* eventually(() => !groupAlive(unbound.pid), "the unbound process's group is gone")
      yield* unbound.exited
    })), 30_000)
})
