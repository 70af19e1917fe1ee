/**
 * The harness of the real-CLI tests: a provider layer under the real registry, store and
 * collector, in a temp home, with bounded polling (time is real: real processes run). On scope
 * close it proves that no process group the provider started is left.
 */
import * as RuntimeCollectorLive from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import { assert } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, type Scope } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ProviderRegistrationRefused } from "../../../src/domain/errors.ts"
import { FakeCallerProtection } from "../../../src/testing/FakeRuntimes.ts"
import { groupAlive } from "../../../src/platform/processGroups.ts"
import * as AgentRegistryLive from "../../../src/layers/registry/AgentRegistryLive.ts"
import * as SqliteDatabase from "../../../src/layers/store/SqliteDatabase.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { RuntimeCollector } from "../../../src/services/RuntimeCollector.ts"
import { agentCliBinary, type AgentCli } from "../../../scripts/agentClis.ts"
import { scriptedPolicy, type ShellTool } from "./fakeModel/policy.ts"
import { type Dialect, type FakeModel, fakeModelServer } from "./fakeModel/server.ts"

/** Polls until the condition holds, at most `tries` times `every` apart. */
export const eventually = <E, R>(
  condition: Effect.Effect<boolean, E, R>,
  what: string,
  options: { readonly tries?: number; readonly every?: `${number} millis` } = {}
) =>
  Effect.gen(function*() {
    const tries = options.tries ?? 200
    for (let i = 0; i < tries; i++) {
      if (yield* condition) return
      yield* Effect.sleep(options.every ?? "100 millis")
    }
    return assert.fail(`timed out waiting until ${what}`)
  })

/** Fails the test instead of hanging when a wait takes too long. */
export const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, what: string, seconds = 60) =>
  effect.pipe(Effect.timeoutOrElse({ duration: `${seconds} seconds`, orElse: () => Effect.die(`timed out: ${what}`) }))

/**
 * A background job a turn can start and the test can end without signalling anything: it waits
 * for a file to appear. (`sleep 600` could only be ended by a kill.) It also ends once its folder
 * is gone, so a test that fails before opening the gate leaves no job behind: the harness always
 * removes the home.
 */
export const gatedJob = (dir: string) => {
  const gate = join(dir, "job-may-end")
  return {
    command: `until [ -e '${gate}' ] || [ ! -d '${dir}' ]; do sleep 0.2; done`,
    end: Effect.sync(() => writeFileSync(gate, ""))
  }
}

export interface RealAgentOptions<E> {
  readonly provider: string
  /**
   * The provider's layer for this home. `onSpawn` must be given every runtime process (group) id
   * it starts.
   */
  readonly layer: (home: string, onSpawn: (pid: number) => void) => Layer.Layer<never, E, ProviderRegistry>
}

const build = Effect.fnUntraced(function*<E>(options: RealAgentOptions<E>, home: string, pids: Array<number>) {
  const providerLayer = options.layer(home, (pid) => pids.push(pid))
  const registryLayer = AgentRegistryLive.layer.pipe(
    Layer.provide([
      SqliteDatabase.layerStores(join(home, "quiesce.sqlite")),
      providerLayer.pipe(Layer.provideMerge(ProviderRegistry.layer))
    ])
  )
  const collectorLayer = RuntimeCollectorLive.layer({ tickInterval: "3650 days", probeTimeout: "10 seconds" }).pipe(
    Layer.provide([AgentRegistryLive.candidatesLayer, new FakeCallerProtection().layer])
  )
  const context = yield* Layer.build(collectorLayer.pipe(Layer.provideMerge(registryLayer)))
  const registry = Context.get(context, AgentRegistry)
  const collector = Context.get(context, RuntimeCollector)
  /** Prompts and waits for the turn's finish, which is watched before the prompt goes out. */
  const promptAndFinish = (agentId: string, text: string) =>
    Effect.gen(function*() {
      const finish = yield* Effect.forkChild(registry.awaitFinish(agentId), { startImmediately: true })
      const receipt = yield* registry.prompt(agentId, text)
      const outcome = yield* bounded(Fiber.join(finish), `the finish of "${text}"`)
      return { receipt, outcome }
    })
  return {
    registry,
    collector,
    home,
    pids,
    create: registry.create({ provider: options.provider, cwd: home }),
    promptAndFinish
  }
})

export type RealAgent = Effect.Success<ReturnType<typeof build>>

/**
 * Runs the body against a fresh registry in a temp home, then proves that once the scope has
 * closed, every process group the provider started is gone, and removes the home.
 */
export const withRealAgent = <E, E2>(
  options: RealAgentOptions<E>,
  body: (agent: RealAgent) => Effect.Effect<void, E2, Scope.Scope>
) =>
  Effect.gen(function*() {
    const pids: Array<number> = []
    yield* Effect.scoped(Effect.gen(function*() {
      // Released last, so the home goes whether the body passes or fails.
      const home = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), `quiesce-${options.provider}-`))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      yield* Effect.scoped(Effect.gen(function*() {
        yield* body(yield* build(options, home, pids))
      }))
      yield* eventually(Effect.sync(() => pids.every((pid) => !groupAlive(pid))), "no runtime process group is left")
    }))
  })

/**
 * The scenario every adapter proves against its real CLI: a turn leaves a background job; the
 * probe vetoes the release; the job ends; the probe permits it; the runtime is released and its
 * process group ends; the next prompt resumes the same session.
 */
export const backgroundJobScenario = (agent: RealAgent, startJob: (command: string) => string) =>
  Effect.gen(function*() {
    const created = yield* agent.create
    const first = yield* agent.promptAndFinish(created.agentId, "hello")
    assert.strictEqual(first.outcome.kind, "finished")
    const sessionId = (yield* agent.registry.get(created.agentId)).record.persistence?.sessionId
    assert.isString(sessionId, "the provider reported a session")

    const job = gatedJob(agent.home)
    const started = yield* agent.promptAndFinish(created.agentId, startJob(job.command))
    assert.strictEqual(started.outcome.kind, "finished")
    yield* bounded(agent.registry.awaitIdle(created.agentId), "the turn's end")

    const vetoed = yield* agent.collector.collectNow(created.agentId)
    assert.strictEqual(vetoed._tag, "Retained", "the background job keeps the runtime")
    assert.isTrue((yield* agent.registry.get(created.agentId)).resident)

    yield* job.end
    const runtimePid = (yield* agent.registry.get(created.agentId)).pid
    yield* eventually(
      agent.collector.collectNow(created.agentId).pipe(Effect.map((outcome) => outcome._tag === "Collected")),
      "the probe permits the release once the job has ended",
      { tries: 60, every: "500 millis" }
    )
    assert.isFalse((yield* agent.registry.get(created.agentId)).resident)
    if (runtimePid !== null) {
      yield* eventually(Effect.sync(() => !groupAlive(runtimePid)), "the released runtime's process group is gone")
    }

    const resumed = yield* agent.promptAndFinish(created.agentId, "again")
    assert.isTrue(resumed.receipt.resumed, "the prompt resumed the released agent")
    assert.strictEqual(resumed.receipt.sessionId, sessionId, "the same session")
    assert.strictEqual(resumed.outcome.kind, "finished")
    return { agentId: created.agentId, sessionId, vetoed, resumed }
  })

/** How a provider starts its CLI: the daemon config's provider entry has the same fields. */
export interface Launch {
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  readonly env: Readonly<Record<string, string>>
}

/**
 * One agent CLI as the real-CLI tests and the bench drive it. Each adapter's test support module
 * (`test/agents/support/<name>Cli.ts`) exports one.
 */
export interface RealCli<E = ProviderRegistrationRefused> {
  /** The pinned CLI it runs (`scripts/agentClis.ts`). */
  readonly cli: AgentCli["name"]
  /** The provider id agents name. */
  readonly provider: string
  /** The wire dialects the CLI speaks to its model. */
  readonly dialects: ReadonlyArray<Dialect>
  /** How the CLI's shell tool is called by the scripted model. */
  readonly shell: ShellTool
  /** The prompt that makes the scripted model start the command in the background. */
  readonly startJob: (command: string) => string
  /**
   * Points the CLI at the fake model: writes whatever config files it needs under `home` and says
   * how to launch it. This is exactly what a daemon config's provider entry would hold.
   */
  readonly launch: (options: { readonly binary: string; readonly home: string; readonly model: FakeModel }) => Launch
  /** Set when the pinned version's probe can never permit a release, saying why (OMP before isSettled). */
  readonly neverReleasedBecause?: string | undefined
  /** Adapter options a daemon config's provider entry adds to the launch, e.g. `{ trustMissingInventories: true }`. */
  readonly configOptions?: Readonly<Record<string, unknown>> | undefined
  /** The provider layer for that launch; `onSpawn` gets each runtime pid (its group id). */
  readonly layer: (launch: Launch, onSpawn: (pid: number) => void) => Layer.Layer<never, E, ProviderRegistry>
}

/**
 * Runs the body against the real CLI driven by a fresh fake model; skips the test, saying why,
 * when the pinned CLI is not installed.
 */
export const withRealCli = <E, E2>(
  cli: RealCli<E>,
  skip: (note: string) => void,
  body: (agent: RealAgent, model: FakeModel) => Effect.Effect<void, E2, Scope.Scope>
) =>
  Effect.gen(function*() {
    const binary = agentCliBinary(cli.cli)
    if ("missing" in binary) return skip(binary.missing)
    yield* Effect.scoped(Effect.gen(function*() {
      const model = yield* fakeModelServer(scriptedPolicy(cli.shell), cli.dialects)
      yield* withRealAgent(
        {
          provider: cli.provider,
          layer: (home, onSpawn) => cli.layer(cli.launch({ binary: binary.path, home, model }), onSpawn)
        },
        (agent) => body(agent, model)
      )
    }))
  })

export { sessionConfig } from "../../support/runtimeMarker.ts"
