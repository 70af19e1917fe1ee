/**
 * Opening one runtime: its provider session (on a warm process when the reserve has one), and the
 * `LiveAgent` that holds it, with an empty turn slot. Registering it is the residency's.
 */
import { Cause, Clock, Effect, Exit, Option } from "effect"
import * as fs from "node:fs"
import { type AgentRecord, internalAgentLabel, parentAgentIdOf, type PersistenceHandle } from "../../domain/agent.ts"
import type { AgentClient, SessionConfig, SessionEvent } from "../../domain/provider.ts"
import { agentAttributes } from "../../domain/spans.ts"
import type { WarmReserveService } from "../../services/WarmReserve.ts"
import { randomId } from "../../platform/ids.ts"
import { type LiveAgent, makeLiveAgent } from "./LiveAgent.ts"

/** Where a session's events go: the runtime's queue once it exists, held until then. */
interface Target {
  agent: LiveAgent | undefined
  /** Events the session reported while it was still opening. */
  readonly early: Array<SessionEvent>
}

/** The session config for one runtime; its events go to `enqueue` once the runtime exists. */
const sessionConfig = (
  record: AgentRecord,
  target: Target,
  runtimeMarker: string,
  enqueue: (agent: LiveAgent, event: SessionEvent) => void
): SessionConfig => ({
  agentId: record.agentId,
  cwd: record.cwd,
  labels: record.labels,
  runtimeMarker,
  onEvent: (event) => {
    if (target.agent === undefined) target.early.push(event)
    else enqueue(target.agent, event)
  }
})

/**
 * Opens the runtime's session (a new one without a handle): on a warm process of the provider
 * when the reserve has one and the agent's cwd still exists (a new process is what reports a
 * missing one), else on a new process. A warm process that died before it took the session is
 * replaced by a new process; any other failure of the bind is the open's failure. Only the opens themselves can
 * be interrupted, so a taken warm process is always bound or closed.
 */
const openSession = (
  reserve: WarmReserveService,
  record: AgentRecord,
  client: AgentClient,
  handle: PersistenceHandle | null,
  target: Target,
  enqueue: (agent: LiveAgent, event: SessionEvent) => void,
  restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const cold = Effect.gen(function*() {
      const marker = yield* randomId("runtime")
      const config = sessionConfig(record, target, marker, enqueue)
      const session = yield* restore(handle === null ? client.create(config) : client.resume(handle, config))
      return { session, marker, handOver: Option.none<Effect.Effect<void>>() }
    })
    const warm = fs.existsSync(record.cwd) ? yield* reserve.take(record.provider) : Option.none()
    if (Option.isNone(warm)) return yield* cold
    const { handOver, marker, process } = warm.value
    const config = sessionConfig(record, target, marker, enqueue)
    const bound = yield* Effect.exit(restore(handle === null ? process.create(config) : process.resume(handle, config)))
    if (Exit.isSuccess(bound)) return { session: bound.value, marker, handOver: Option.some(handOver) }
    // A provider that refused the session would refuse it on a new process too: only a warm
    // process that died (before the reserve saw it go) is replaced by a new one.
    const died = !process.running()
    yield* process.close
    if (!died || Exit.hasInterrupts(bound)) return yield* Effect.failCause(bound.cause)
    yield* Effect.logWarning("A warm process exited before it took the session; starting a new one").pipe(
      Effect.annotateLogs({ agentId: record.agentId, provider: record.provider, error: Cause.pretty(bound.cause) })
    )
    target.early.length = 0
    return yield* cold
  })

/** A runtime just opened, not yet registered. */
export interface OpenedRuntime {
  readonly agent: LiveAgent
  /** The persistence handle it reported, or the record's. */
  readonly persistence: PersistenceHandle | null
  /** Hands the warm process over to the agent: the reserve's entry goes (none for a new process). */
  readonly handOver: Option.Option<Effect.Effect<void>>
  /** Events it reported while opening: the caller queues them once it is registered. */
  readonly early: ReadonlyArray<SessionEvent>
}

/**
 * Opens the record's runtime, creating (no handle) or resuming its session; from the moment it is
 * built its events go to `enqueue`. Only the provider's open is run through `restore`.
 */
export const openRuntime = Effect.fn("Agent.openRuntime")(function*(
  reserve: WarmReserveService,
  record: AgentRecord,
  client: AgentClient,
  handle: PersistenceHandle | null,
  enqueue: (agent: LiveAgent, event: SessionEvent) => void,
  restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
) {
  yield* Effect.annotateCurrentSpan({ ...agentAttributes(record.agentId, record.provider), "quiesce.resume": handle !== null })
  const target: Target = { agent: undefined, early: [] }
  const { handOver, marker, session } = yield* openSession(reserve, record, client, handle, target, enqueue, restore)
  const persistence = (yield* session.persistence) ?? record.persistence
  const agent: LiveAgent = makeLiveAgent({
    agentId: record.agentId,
    session,
    parentAgentId: parentAgentIdOf(record.labels),
    internal: record.labels[internalAgentLabel] === "true",
    provider: record.provider,
    marker,
    sessionId: persistence?.sessionId ?? null,
    lastActivityAt: yield* Clock.currentTimeMillis
  })

  target.agent = agent
  return { agent, persistence, handOver, early: target.early } satisfies OpenedRuntime
})
