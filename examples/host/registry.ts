// A host that composes the agent registry with the shell provider and a store: in memory, or the
// SQLite file given as the first argument, in which case a second run finds the first run's agent
// and resumes its saved session. Each prompt is a shell command; the collector releases the idle
// runtime and the next prompt brings it back.
import { Console, Effect, Layer } from "effect"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import {
  AgentRegistry,
  AgentRegistryLive,
  CallerProtection,
  ProviderRegistry,
  RuntimeCollector,
  RuntimeCollectorLive,
  SqliteDatabase,
  StoresMemory
} from "quiesce"
import * as ShellProvider from "quiesce/providers/shell"

const database = process.argv[2]
// The shell provider keeps its transcripts here: beside the database, so they outlive the run.
const home = database === undefined ? mkdtempSync(join(tmpdir(), "quiesce-host-")) : join(dirname(database), "shell-home")
mkdirSync(home, { recursive: true })

const stores = database === undefined ? StoresMemory.layer : SqliteDatabase.layerStores(database)
const providers = ShellProvider.layer({ home }).pipe(Layer.provideMerge(ProviderRegistry.layer))
const registry = AgentRegistryLive.layer.pipe(Layer.provide(Layer.merge(stores, providers)))
const collector = RuntimeCollectorLive.layer({ idlePeriod: "1 hour" }).pipe(
  Layer.provide(Layer.merge(AgentRegistryLive.candidatesLayer, CallerProtection.layerNone))
)

const program = Effect.gen(function*() {
  const agents = yield* AgentRegistry
  const collector = yield* RuntimeCollector
  const known = yield* agents.list
  yield* Console.log(JSON.stringify({ step: "agents", agents: known.map((agent) => agent.record.agentId) }))
  const agentId = known[0]?.record.agentId ?? (yield* agents.create({ provider: "shell", cwd: home })).agentId

  const prompt = Effect.fn("prompt")(function*(command: string) {
    const receipt = yield* agents.prompt(agentId, command, { wait: true })
    const view = yield* agents.get(agentId)
    yield* Console.log(JSON.stringify({
      step: "prompt",
      agentId,
      state: receipt.state,
      output: receipt.output ?? null,
      resumed: receipt.resumed,
      sessionId: receipt.sessionId,
      pid: view.pid
    }))
  })

  yield* prompt("echo hello")
  // Nothing is running and nobody waits: the runtime can go, ahead of its idle period.
  const outcome = yield* collector.collectNow(agentId)
  yield* Console.log(JSON.stringify({ step: "collectNow", outcome: outcome._tag, resident: (yield* agents.get(agentId)).resident }))
  // The next prompt resumes the same session.
  yield* prompt("echo hello again")
  const turns = yield* agents.turns(agentId, 100)
  yield* Console.log(JSON.stringify({ step: "turns", count: turns.length }))
})

Effect.runPromise(program.pipe(Effect.provide(collector.pipe(Layer.provideMerge(registry))))).then(
  () => {
    if (database === undefined) rmSync(home, { recursive: true, force: true })
  },
  (error: unknown) => {
    console.error(error)
    process.exitCode = 1
  }
)
