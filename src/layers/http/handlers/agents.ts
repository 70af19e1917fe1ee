/** The agents group's handlers: over `AgentOperations` (on a cluster's runner, the runner hosting the agent), closes and the registry. */
import { Duration, Effect, Stream } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import * as fs from "node:fs"
import { heartbeatSeconds, lastEventIdOf, sseComment, sseFrame, ssePosition } from "../../../api/eventStream.ts"
import { QuiesceApi } from "../../../api/QuiesceApi.ts"
import { defaultTurnsLimit } from "../../../api/turns.ts"
import { agentSummary, promptResult, turnView } from "../../../api/views.ts"
import type { NumberedEvent } from "../../../domain/agentEvent.ts"
import { WorkingDirectoryNotFound } from "../../../domain/errors.ts"
import { AgentClose } from "../../../services/AgentClose.ts"
import { AgentEvents } from "../../../services/AgentEvents.ts"
import { AgentOperations } from "../../../services/AgentOperations.ts"
import { type AgentDirectory, AgentRegistry } from "../../../services/AgentRegistry.ts"
import { sseResponse } from "../sseResponse.ts"

/** An agent's working directory must exist before its provider is asked to start there. */
const checkDirectory = (cwd: string) =>
  Effect.suspend(() => {
    const stat = fs.statSync(cwd, { throwIfNoEntry: false })
    return stat === undefined
      ? Effect.fail(WorkingDirectoryNotFound.of(cwd, "does not exist"))
      : stat.isDirectory()
      ? Effect.void
      : Effect.fail(WorkingDirectoryNotFound.of(cwd, "is not a directory"))
  })

/**
 * Events after `from` as server-sent events: first `from` itself (a frame with only its id), then
 * each event, with a heartbeat comment every `heartbeatSeconds`; it ends when the events do (the
 * daemon stops).
 */
const eventStreamResponse = (from: string, followed: Stream.Stream<NumberedEvent>) => {
  const frames = Stream.concat(Stream.make(ssePosition(from)), followed.pipe(Stream.map(sseFrame)))
  const heartbeat = Stream.tick(Duration.seconds(heartbeatSeconds)).pipe(Stream.map(() => sseComment("heartbeat")))
  return sseResponse(Stream.merge(frames, heartbeat, { haltStrategy: "left" }).pipe(Stream.encodeText))
}

/** The agents group. */
export const agentsHandlers = HttpApiBuilder.group(
  QuiesceApi,
  "agents",
  Effect.fn(function*(handlers) {
    // On a cluster's runner, each of these goes to the runner that hosts the agent.
    const agents = yield* AgentOperations
    const events = yield* AgentEvents
    const closes = yield* AgentClose
    const registry: AgentDirectory = yield* AgentRegistry
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          yield* checkDirectory(payload.cwd)
          const parent = payload.parentAgentId
          // A parent that does not exist would leave the child's family unknown to the collector.
          if (parent !== undefined) yield* agents.get(parent)
          const record = yield* agents.create({
            provider: payload.provider,
            cwd: payload.cwd,
            labels: payload.labels,
            parentAgentId: parent
          })
          return { agentId: record.agentId, provider: record.provider, sessionId: record.persistence?.sessionId ?? null }
        }))
      .handle("list", () => Effect.map(registry.list, (views) => views.map(agentSummary)))
      .handle("get", ({ params }) => Effect.map(agents.get(params.id), agentSummary))
      .handle("events", ({ headers, params }) =>
        Effect.gen(function*() {
          // Unknown agent: 404 before the stream starts.
          yield* agents.get(params.id)
          const from = lastEventIdOf(headers["last-event-id"]) ?? (yield* events.latestOf(params.id))
          return eventStreamResponse(from, yield* events.follow(params.id, from))
        }))
      .handle("everyAgentEvents", ({ headers }) =>
        Effect.gen(function*() {
          const from = lastEventIdOf(headers["last-event-id"]) ?? (yield* events.latest)
          return eventStreamResponse(from, yield* events.followEveryAgent(from))
        }))
      .handle("close", ({ params, query }) => closes.close(params.id, { force: query.force === "true" }))
      .handle("delete", ({ params, query }) => closes.delete(params.id, { force: query.force === "true" }))
      .handle("interrupt", ({ params }) => agents.interrupt(params.id))
      .handle("answerPermission", ({ params, payload }) =>
        agents.respondToPermission(params.id, params.permissionId, payload.allow))
      .handle("prompt", ({ params, payload }) =>
        agents.prompt(params.id, payload.text, {
          clientMessageId: payload.clientMessageId,
          wait: payload.wait
        }).pipe(Effect.map(promptResult)))
      .handle("turn", ({ params }) => Effect.map(agents.turn(params.id, params.turnId), turnView))
      .handle("turns", ({ params, query }) =>
        Effect.map(agents.turns(params.id, query.limit ?? defaultTurnsLimit), (records) => records.map(turnView)))
  })
)
