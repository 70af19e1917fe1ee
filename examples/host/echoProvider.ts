// A provider layer of one's own: an in-process "echo" agent whose conversation is a list of
// prompts, saved under its session id so that a released runtime resumes where it was. A real
// provider starts a process here and speaks its protocol; the contract is the same.
import { Console, Effect, Layer } from "effect"
import {
  type AgentClient,
  AgentRegistry,
  AgentRegistryLive,
  type AgentSession,
  CallerProtection,
  type PersistenceHandle,
  ProviderRegistry,
  RuntimeCollector,
  RuntimeCollectorLive,
  StoresMemory
} from "quiesce"

/** Where the echo provider keeps its conversations; a real one keeps them on disk. */
const savedConversations = new Map<string, Array<string>>()

const session = (sessionId: string): AgentSession => {
  const conversation = savedConversations.get(sessionId) ?? []
  savedConversations.set(sessionId, conversation)
  return {
    persistence: Effect.succeed({ provider: "echo", sessionId }),
    startTurn: (prompt) =>
      Effect.sync(() => {
        conversation.push(prompt)
        // The turn has started; the effect returned waits for its end.
        return Effect.succeed({ reply: `turn ${conversation.length}: ${prompt}` })
      }),
    outOfBand: () => undefined,
    respondToPermission: () => Effect.void,
    interrupt: Effect.void,
    close: Effect.void
  }
}

const echoClient: AgentClient = {
  provider: "echo",
  create: (config) => Effect.sync(() => session(`echo-${config.agentId}`)),
  resume: (handle: PersistenceHandle) => Effect.sync(() => session(handle.sessionId))
}

/** The provider layer: registers the client with the registry's providers. */
export const EchoProvider = ProviderRegistry.register(Effect.succeed(echoClient))

const registry = AgentRegistryLive.layer.pipe(
  Layer.provide(Layer.merge(StoresMemory.layer, EchoProvider.pipe(Layer.provideMerge(ProviderRegistry.layer))))
)
const collector = RuntimeCollectorLive.layer().pipe(
  Layer.provide(Layer.merge(AgentRegistryLive.candidatesLayer, CallerProtection.layerNone))
)

const program = Effect.gen(function*() {
  const agents = yield* AgentRegistry
  const { agentId } = yield* agents.create({ provider: "echo", cwd: process.cwd() })
  const first = yield* agents.prompt(agentId, "hello", { wait: true })
  const released = yield* (yield* RuntimeCollector).collectNow(agentId)
  const second = yield* agents.prompt(agentId, "hello again", { wait: true })
  yield* Console.log(JSON.stringify({
    step: "echo",
    replies: [first.output, second.output],
    released: released._tag,
    resumed: second.resumed
  }))
})

Effect.runPromise(program.pipe(Effect.provide(collector.pipe(Layer.provideMerge(registry))))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
