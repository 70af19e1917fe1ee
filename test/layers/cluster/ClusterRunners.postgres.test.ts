/**
 * Runners of one cluster (X6) over a real PostgreSQL server, with real sockets between them and
 * real shell plugin processes: each runner is a daemon's services (the shared stores on
 * PostgreSQL, its own SQLite ledger) plus `ClusterRunner.layer`, in a runtime of its own. Time is
 * real, so every wait polls with a bound.
 *
 * Covered here: agents spread over three runners; a prompt sent from any runner reaches its
 * agent once; a fourth runner joining takes shards and every agent still answers with its own
 * session; a runner that stops hands its runtimes off, and the next prompt resumes each agent
 * on a runner that still serves. The collector releases an idle agent on its host only. A finish
 * watch registered on a runner that hosts neither agent reports a finish that came before its
 * watch reached the host, once; a subscription every runner watches is notified once.
 */
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import { EntityId, Sharding } from "effect/cluster"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import * as ClusterRunner from "../../../src/layers/cluster/ClusterRunner.ts"
import * as AgentEntity from "../../../src/layers/cluster/AgentEntity.ts"
import * as AgentOperationsLive from "../../../src/layers/cluster/agentOperations.ts"
import * as ProcessInspectionProcfs from "../../../src/layers/host/ProcessInspectionProcfs.ts"
import * as PluginProvider from "../../../src/layers/providers/plugin/PluginProvider.ts"
import * as RegistryOperations from "../../../src/layers/registry/registryOperations.ts"
import * as PostgresDatabase from "../../../src/layers/store/PostgresDatabase.ts"
import * as SqliteDatabase from "../../../src/layers/store/SqliteDatabase.ts"
import * as SqliteRuntimeLedger from "../../../src/layers/store/SqliteRuntimeLedger.ts"
import { daemonServices } from "../../../src/programs/daemon.ts"
import { pluginPath as shellPluginPath } from "../../../src/layers/providers/shell/ShellProvider.ts"
import { AgentOperations } from "../../../src/services/AgentOperations.ts"
import { AgentRegistry } from "../../../src/services/AgentRegistry.ts"
import { FinishStore } from "../../../src/services/FinishStore.ts"
import { FinishSubscriptions } from "../../../src/services/FinishSubscriptions.ts"
import { MessageDelivery } from "../../../src/services/MessageDelivery.ts"
import { ProviderRegistry } from "../../../src/services/ProviderRegistry.ts"
import { RuntimeCollector } from "../../../src/services/RuntimeCollector.ts"
import { freePort, groupAlive, until } from "../../support/daemonProcess.ts"
import { identityWith, noTimer } from "../../support/memoryDaemon.ts"
import { usePostgres } from "../../support/usePostgres.ts"

const postgres = usePostgres()

const folders: Array<string> = []
const runners: Array<Runner> = []

afterEach(async () => {
  for (const runner of runners.splice(0).reverse()) await runner.stop()
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

const tempFolder = (prefix: string) => {
  const folder = mkdtempSync(join(tmpdir(), prefix))
  folders.push(folder)
  return folder
}

const shardsPerGroup = 12

/**
 * One runner: a daemon's services over the cluster's database, and its side of the cluster.
 * Its message delivery and finish watches go through `operations` (as a daemon's do once joined).
 */
const runnerLayer = (url: string, pluginHome: string, port: number, operations: () => AgentOperations["Service"] | undefined) => {
  // One pool per runner, for its stores and its cluster storage alike (the same layer, built once).
  const database = PostgresDatabase.layer(url)
  const ledger = SqliteRuntimeLedger.layerFromClient.pipe(Layer.provide(SqliteDatabase.layer(join(tempFolder("quiesce-runner-"), "state.db"))))
  const services = daemonServices({
    stores: Layer.mergeAll(PostgresDatabase.sharedStoresFromClient.pipe(Layer.provide(database)), ledger),
    providers: PluginProvider.layer({
      provider: "shell",
      plugin: { command: process.execPath, args: [shellPluginPath] },
      // The runners of this test share one machine, so they share the shell's transcripts.
      home: pluginHome
    }).pipe(Layer.provideMerge(ProviderRegistry.layer)),
    inspection: ProcessInspectionProcfs.layer(),
    collector: { tickInterval: "3650 days" },
    registry: { sharedStore: true },
    operations: RegistryOperations.layerVia(operations),
    identity: identityWith(noTimer)
  })
  return ClusterRunner.layer({
    host: "127.0.0.1",
    port,
    shardsPerGroup,
    shardLockRefreshInterval: "1 second",
    shardLockExpiration: "5 seconds"
  }).pipe(Layer.provideMerge(services), Layer.provideMerge(database))
}

interface Runner {
  readonly port: number
  readonly run: <A, E>(
    effect: Effect.Effect<A, E, AgentRegistry | RuntimeCollector | Sharding.Sharding | MessageDelivery | FinishSubscriptions | FinishStore>
  ) => Promise<A>
  readonly stop: () => Promise<void>
}

const startRunner = async (url: string, pluginHome: string): Promise<Runner> => {
  const port = await freePort()
  let routed: AgentOperations["Service"] | undefined
  const runtime = ManagedRuntime.make(runnerLayer(url, pluginHome, port, () => routed))
  // Joined: from now on the operations go to each agent's runner.
  routed = await runtime.runPromise(Effect.scoped(Effect.map(
    Layer.build(AgentOperationsLive.clusterLayer()),
    (context) => Context.get(context, AgentOperations)
  )))
  let stopped = false
  const runner: Runner = {
    port,
    run: (effect) => runtime.runPromise(effect),
    stop: async () => {
      if (stopped) return
      stopped = true
      await runtime.dispose()
    }
  }
  runners.push(runner)
  return runner
}

const withRegistry = <A, E>(f: (registry: AgentRegistry["Service"]) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    return yield* f(yield* AgentRegistry)
  })

const withFinish = <A, E>(f: (finish: FinishSubscriptions["Service"]) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    return yield* f(yield* FinishSubscriptions)
  })

const agentClient = (agentId: string) => Effect.map(AgentEntity.AgentEntity.client, (clientFor) => clientFor(agentId))

const create = (agentId: string, cwd: string) =>
  Effect.flatMap(agentClient(agentId), (agent) => agent.Create({ provider: "shell", cwd }))

const prompt = (agentId: string, text: string, clientMessageId: string) =>
  Effect.flatMap(agentClient(agentId), (agent) => agent.Prompt({ text, clientMessageId, wait: true }))

/** The runner whose registry holds the agent's live runtime, if any. */
const hostOf = async (all: ReadonlyArray<Runner>, agentId: string): Promise<Runner | undefined> => {
  for (const runner of all) {
    const resident = await runner.run(withRegistry((registry) =>
      registry.get(agentId).pipe(Effect.map((view) => view.resident), Effect.orElseSucceed(() => false))
    ))
    if (resident) return runner
  }
  return undefined
}

/** Waits until every shard is held by exactly one of `all`, and each of them holds some. */
const settled = async (all: ReadonlyArray<Runner>) => {
  const ids = Array.from({ length: 60 }, (_, i) => `probe-${i}`)
  await until(async () => {
    const holdings = await Promise.all(all.map((runner) =>
      runner.run(Effect.gen(function*() {
        const sharding = yield* Sharding.Sharding
        return ids.map((id) => sharding.hasShardId(sharding.getShardId(EntityId.make(id), "default")))
      }))
    ))
    const eachOnce = ids.every((_, i) => holdings.filter((held) => held[i]).length === 1)
    return eachOnce && holdings.every((held) => held.some(Boolean))
  }, `the shards are spread over ${all.length} runners`, 60_000)
}

describe("cluster runners on PostgreSQL", () => {
  it("spread agents over three runners, answer each prompt once from any runner, and move shards to a fourth without losing an agent", async () => {
    const url = postgres.database("cluster")
    const pluginHome = tempFolder("quiesce-shell-")
    const three = [await startRunner(url, pluginHome), await startRunner(url, pluginHome), await startRunner(url, pluginHome)]
    await settled(three)

    const cwd = tempFolder("quiesce-work-")
    const agentIds = Array.from({ length: 9 }, (_, i) => `agent-${i}`)
    // Each agent is created from one runner and prompted from another.
    const sessions = new Map<string, string | null>()
    for (const [i, agentId] of agentIds.entries()) {
      await three[i % 3]!.run(create(agentId, cwd))
      const receipt = await three[(i + 1) % 3]!.run(prompt(agentId, `echo set-${i}`, `${agentId}-set`))
      expect(receipt.output?.trim()).toBe(`set-${i}`)
      expect(receipt.sessionId).not.toBeNull()
      sessions.set(agentId, receipt.sessionId)
    }
    const hosts = await Promise.all(agentIds.map((agentId) => hostOf(three, agentId)))
    expect(hosts.every((host) => host !== undefined)).toBe(true)
    expect(new Set(hosts.map((host) => host?.port)).size).toBeGreaterThan(1)

    // The same client id from every runner at once: one turn, run once.
    const counted = await Promise.all(three.map((runner) => runner.run(prompt("agent-0", "echo once >> once.txt; wc -l < once.txt", "agent-0-once"))))
    expect(new Set(counted.map((receipt) => receipt.turnId)).size).toBe(1)
    expect(counted[0]!.output?.trim()).toBe("1")

    // A fourth runner joins: it takes shards, and every agent answers with its own session.
    const fourth = await startRunner(url, pluginHome)
    const four = [...three, fourth]
    await settled(four)
    for (const [i, agentId] of agentIds.entries()) {
      const receipt = await four[i % 4]!.run(prompt(agentId, `echo again-${i}`, `${agentId}-after-join`))
      expect(receipt.output?.trim()).toBe(`again-${i}`)
      expect(receipt.sessionId).toBe(sessions.get(agentId))
    }
    const after = await Promise.all(agentIds.map((agentId) => hostOf(four, agentId)))
    expect(after.every((host) => host !== undefined)).toBe(true)
    // It took shards: new agents land on it too (each id is on one of its shards one time in four).
    let probes = 0
    await until(async () => {
      const probe = `probe-agent-${probes++}`
      await four[0]!.run(create(probe, cwd))
      return (await hostOf(four, probe)) === fourth
    }, "an agent is hosted by the fourth runner", 60_000)
  }, 240_000)

  it("a runner that stops hands its runtimes off: each agent resumes its session on a runner that serves, and none is left running", async () => {
    const url = postgres.database("handoff")
    const pluginHome = tempFolder("quiesce-shell-")
    const two = [await startRunner(url, pluginHome), await startRunner(url, pluginHome)]
    await settled(two)
    const cwd = tempFolder("quiesce-work-")
    const agentIds = Array.from({ length: 6 }, (_, i) => `moved-${i}`)
    const sessions = new Map<string, string | null>()
    for (const agentId of agentIds) {
      await two[0]!.run(create(agentId, cwd))
      sessions.set(agentId, (await two[0]!.run(prompt(agentId, "echo set", `${agentId}-set`))).sessionId)
    }
    const leaving = two[1]!
    const moved: Array<string> = []
    const pids: Array<number> = []
    for (const agentId of agentIds) {
      if ((await hostOf(two, agentId)) !== leaving) continue
      moved.push(agentId)
      pids.push(await leaving.run(withRegistry((registry) =>
        Effect.map(Effect.orDie(registry.get(agentId)), (view) => view.pid ?? 0)
      )))
    }
    expect(moved.length).toBeGreaterThan(0)
    await leaving.stop()
    for (const pid of pids) expect(groupAlive(pid)).toBe(false)

    const staying = two[0]!
    for (const agentId of moved) {
      const receipt = await staying.run(prompt(agentId, `echo ${agentId}`, `${agentId}-after-stop`))
      expect(receipt.resumed).toBe(true)
      expect(receipt.output?.trim()).toBe(agentId)
      expect(receipt.sessionId).toBe(sessions.get(agentId))
      expect(await hostOf([staying], agentId)).toBe(staying)
    }

    // The collector releases an idle agent on the runner that hosts it, and that runner only.
    const agentId = moved[0]!
    const outcome = await staying.run(Effect.gen(function*() {
      return yield* (yield* RuntimeCollector).collectNow(agentId)
    }))
    expect(outcome._tag).toBe("Collected")
    expect(await hostOf([staying], agentId)).toBeUndefined()
  }, 240_000)

  it("a message delivered and a finish watched through a runner that does not host the agents are carried out by the runner that hosts them", async () => {
    const url = postgres.database("routing")
    const pluginHome = tempFolder("quiesce-shell-")
    const two = [await startRunner(url, pluginHome), await startRunner(url, pluginHome)]
    await settled(two)
    const [via, host] = [two[0]!, two[1]!]
    const cwd = tempFolder("quiesce-work-")
    // Two agents hosted by `host`: a target and the caller to be told when it finishes.
    const hosted: Array<string> = []
    let made = 0
    await until(async () => {
      const agentId = `routed-${made++}`
      await via.run(create(agentId, cwd))
      await via.run(prompt(agentId, "echo up", `${agentId}-up`))
      if ((await hostOf(two, agentId)) === host) hosted.push(agentId)
      return hosted.length === 2
    }, "two agents are hosted by the second runner", 60_000)
    const [target, caller] = [hosted[0]!, hosted[1]!]

    // A finish watch registered on `via`, held so that its watch is not issued yet; the target
    // finishes on `host` in between. That finish is owed, though it came before the watch.
    const told = (turns: ReadonlyArray<{ readonly text: string; readonly state: string }>) =>
      turns.filter((turn) => turn.text.includes(`[finish notification] Agent ${target} finished.`) && turn.state !== "accepted").length
    const registration = await via.run(Effect.gen(function*() {
      return yield* (yield* FinishSubscriptions).register({ callerAgentId: caller, targetAgentId: target }, { held: true })
    }))
    await via.run(prompt(target, "echo finished-on-host", `${target}-finish`))
    await via.run(registration.accept)
    await until(async () => {
      const turns = await host.run(withRegistry((registry) => Effect.orDie(registry.turns(caller, 10))))
      return told(turns) === 1
    }, "the caller is told on its runner that the target finished", 30_000)
    // Once: the subscription is gone, and nothing more comes.
    await until(async () => {
      const left = await via.run(Effect.gen(function*() {
        return yield* (yield* FinishSubscriptions).hasPendingForCaller(caller)
      }))
      return !left
    }, "the subscription is removed once the notification was acknowledged", 30_000)
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    expect(told(await host.run(withRegistry((registry) => Effect.orDie(registry.turns(caller, 10)))))).toBe(1)

    // A message enqueued on `via` is prompted on `host` at once: its turn reached the provider, not left accepted.
    const receipt = await via.run(Effect.gen(function*() {
      const acknowledged = yield* (yield* MessageDelivery).enqueue({ recipientId: target, text: "echo delivered", id: "message-1" })
      return yield* acknowledged
    }))
    expect(receipt.state).not.toBe("accepted")
    expect(receipt.disposition).not.toBeNull()
    await until(async () => {
      const delivered = await host.run(withRegistry((registry) => Effect.orDie(registry.turn(target, receipt.turnId))))
      return delivered.state === "completed"
    }, "the delivered message's turn completes on the host")
  }, 240_000)

  it("a subscription every runner recovers and watches is notified once", async () => {
    const url = postgres.database("once")
    const pluginHome = tempFolder("quiesce-shell-")
    const first = await startRunner(url, pluginHome)
    await settled([first])
    const cwd = tempFolder("quiesce-work-")
    const [target, caller] = ["once-target", "once-caller"]
    for (const agentId of [target, caller]) {
      await first.run(create(agentId, cwd))
      await first.run(prompt(agentId, "echo up", `${agentId}-up`))
    }
    await first.run(Effect.gen(function*() {
      yield* (yield* FinishSubscriptions).register({ callerAgentId: caller, targetAgentId: target })
    }))
    // Two more runners start with the subscription stored: each recovers it and watches it too.
    const all = [first, await startRunner(url, pluginHome), await startRunner(url, pluginHome)]
    for (const runner of all) await runner.run(withFinish((finish) => finish.recovered))
    await settled(all)
    for (const runner of all) {
      expect(await runner.run(withFinish((finish) => finish.hasPendingForCaller(caller)))).toBe(true)
    }

    await all[1]!.run(prompt(target, "echo done", `${target}-done`))
    const told = async () => {
      const turns = await all[2]!.run(Effect.flatMap(agentClient(caller), (agent) => agent.Turns({ limit: 20 })))
      return turns.filter((turn) => turn.text.includes(`[finish notification] Agent ${target} finished.`)).length
    }
    await until(async () => (await told()) >= 1, "the caller is told that the target finished", 60_000)
    // Delivered and forgotten: the shared record is gone once its notification was acknowledged.
    await until(async () => {
      const stored = await all[0]!.run(Effect.gen(function*() {
        return yield* Effect.orDie((yield* FinishStore).list)
      }))
      return stored.length === 0
    }, "the subscription's record is removed", 60_000)
    // Past every runner's batching window: still one notification.
    await new Promise((resolve) => setTimeout(resolve, 5_000))
    expect(await told()).toBe(1)
  }, 240_000)
})
