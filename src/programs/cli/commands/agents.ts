/** `quiesce agents`: create, list, show, close and delete agents. */
import { Console, Effect, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import * as path from "node:path"
import type { AgentSummary } from "../../../api/agents.ts"
import { type CloseStakes, stakesLines } from "../../../domain/close.ts"
import { agentArgument, agentOrLabelArgument } from "../arguments.ts"
import { commandGroup, documented } from "../documented.ts"
import { client } from "../connection.ts"
import { actOnLabelled, labelArgs, labelFlag, labelPairs, targetOf } from "../labelled.ts"
import { ago, printColumns, printedWith, printJson, releaseReasonText } from "../render.ts"
import { jsonFlag } from "../root.ts"
import { type DaemonApi, daemonOrSavedStore } from "../savedReads.ts"

/** A close refused because it would end work, told to the user: what, and how to force it; exit code 1. */
class CloseRefused extends Schema.TaggedError<CloseRefused>()("CloseRefused", { message: Schema.String }) {}

/** The --force flag of `agents delete` and `agents close`: end the work they are otherwise refused for. */
const forceFlag = (description: string) => Flag.Boolean("force").pipe(Flag.withDescription(description), Flag.withDefault(false))

/** A delete or a close refused, told to the user: the work `holder` has that it would end, and how to force it. */
const refusedFor = (agent: string, command: "delete" | "close", holder: string) => (refused: CloseStakes) =>
  new CloseRefused({
    message: `${agent} was not ${command}d: ${holder} has work a ${command} would end: ${stakesLines(agent, refused).join("; ")}. ` +
      `To end it: quiesce agents ${command} ${agent} --force`
  })

/** What a delete or a close did: `done` when it ended no work, else by force, naming the work it ended, then `after`. */
const reportEnded = (agent: string, past: "deleted" | "closed", ended: CloseStakes, done: string, after: string) => {
  const lines = stakesLines(agent, ended)
  return Console.log(lines.length === 0 ? `${past} ${agent}: ${done}` : `${past} ${agent} by force, ending: ${lines.join("; ")}; ${after}`)
}

/** How the close of one agent of a close by label went: closed (and what that ended), refused (and what it would end), or not resident. */
type LabelledClose =
  | { readonly agentId: string; readonly outcome: "closed"; readonly ended: CloseStakes }
  | { readonly agentId: string; readonly outcome: "refused"; readonly stakes: CloseStakes }
  | { readonly agentId: string; readonly outcome: "not-resident" }

/**
 * Closes one agent of a close by label, as `agents close AGENT` does (the same request, so the
 * daemon logs it as it logs that one): refused with what it would end unless forced.
 */
const closeLabelled = (api: DaemonApi, agent: AgentSummary, force: boolean) =>
  agent.resident
    ? api.agents.close({ params: { id: agent.agentId }, query: force ? { force: "true" } : {} }).pipe(
      Effect.map((closed): LabelledClose => ({ agentId: agent.agentId, outcome: "closed", ended: closed.ended })),
      Effect.catchTag("RuntimeCloseRefused", (refused) =>
        Effect.succeed<LabelledClose>({
          agentId: agent.agentId,
          outcome: "refused",
          stakes: { blockers: refused.blockers, veto: refused.veto }
        }))
    )
    : Effect.succeed<LabelledClose>({ agentId: agent.agentId, outcome: "not-resident" })

/** One close by label, for people: what happened to the agent, naming the work a close ended or would end. */
const labelledCloseText = (result: LabelledClose) => {
  switch (result.outcome) {
    case "closed": {
      const lines = stakesLines(result.agentId, result.ended)
      return lines.length === 0 ? "closed" : `closed by force, ending: ${lines.join("; ")}`
    }
    case "refused":
      return `kept: it has work a close would end: ${stakesLines(result.agentId, result.stakes).join("; ")}`
    case "not-resident":
      return "released already (no runtime to close)"
  }
}

/**
 * `agents close --label`: closes every agent with the labels, one at a time, each as a close of
 * that one agent is (refused with what it would end unless --force); reports each, then fails
 * naming the ones kept and how to end their work too.
 */
const closeByLabel = (labels: Readonly<Record<string, string>>, force: boolean, json: boolean) =>
  Effect.gen(function*() {
    const { done: closed, kept, matched } = yield* actOnLabelled({
      labels,
      json,
      each: (api, agent) => closeLabelled(api, agent, force),
      text: labelledCloseText,
      done: (result) => result.outcome === "closed",
      kept: (result) => result.outcome === "refused"
    })
    if (kept > 0) {
      return yield* new CloseRefused({
        message: `${kept} of ${matched} ${kept === 1 ? "was" : "were"} not closed: ${kept === 1 ? "it has" : "they have"} work a close ` +
          `would end (named above). To end it: quiesce agents close ${labelArgs(labels)} --force`
      })
    }
    if (!json) yield* Console.log(`closed ${closed} of ${matched}; the next prompt to each resumes its session`)
  })

/** One agent for people, a line per field. */
const agentLines = (agent: AgentSummary) =>
  Effect.forEach([
    `agent        ${agent.agentId} (${agent.provider}${agent.providerAvailable ? "" : ", not configured: it can be read and deleted, not prompted"})`,
    `cwd          ${agent.cwd}`,
    `state        ${
      agent.resident
        ? `resident${agent.pid === null ? "" : ` (pid ${agent.pid})`}`
        : agent.sessionId === null
        ? "released (no session to resume)"
        : "released: the next prompt resumes its session"
    }`,
    ...(agent.resident || agent.release === undefined ? [] : [
      `released     ${agent.release.at} (${ago(agent.release.at)})${
        agent.release.reason === null ? "" : `: ${releaseReasonText[agent.release.reason]}`
      }`
    ]),
    `session      ${agent.sessionId ?? "none yet"}`,
    `last active  ${agent.lastActivityAt} (${ago(agent.lastActivityAt)})`,
    `parent       ${agent.parentAgentId ?? "-"}`,
    `labels       ${labelPairs(agent.labels).join(", ") || "-"}`,
    `permissions  ${
      agent.pendingPermissions.length === 0
        ? "none pending"
        : `${agent.pendingPermissions.join(", ")} pending: answer with quiesce permit|deny ${agent.agentId} PERMISSION`
    }`
  ], (line) => Console.log(line), { discard: true })

/** `quiesce agents` and its subcommands. */
export const agents = commandGroup("agents", "Create and inspect agents", [
  { command: "quiesce agents list", description: "Every agent of the daemon" }
], [
  Command.make(
    "create",
    {
      provider: Flag.String("provider").pipe(
        Flag.withDescription("A provider id of the daemon's config.json (default shell)"),
        Flag.withDefault("shell")
      ),
      cwd: Flag.String("cwd").pipe(Flag.withDescription("The agent's working directory (default: this one)"), Flag.withDefault(".")),
      parent: Flag.String("parent").pipe(
        Flag.withDescription("The managing parent agent: it and its children are released together (default: none)"),
        Flag.optional
      ),
      labels: Flag.KeyValuePair("label").pipe(
        Flag.withDescription("A label, key=value; repeat for more (keys starting quiesce. are the daemon's own) (default: none)"),
        Flag.withDefault({})
      ),
      json: jsonFlag("the new agent")
    },
    printedWith(({ cwd, labels, parent, provider }) =>
      Effect.flatMap(client, (api) =>
        api.agents.create({
          payload: {
            provider,
            cwd: path.resolve(cwd),
            ...(Option.isSome(parent) ? { parentAgentId: parent.value } : {}),
            ...(Object.keys(labels).length === 0 ? {} : { labels })
          }
        })), (created, { cwd }) => Console.log(`created ${created.agentId} (${created.provider}, working in ${path.resolve(cwd)})`))
  ).pipe(
    documented(
      "Create an agent; prints its id",
      [
        { command: "quiesce agents create", description: "A shell agent working in this directory" },
        { command: "quiesce agents create --provider claude --cwd ~/src/app --label team=web", description: "A Claude Code agent with a label" },
        { command: "quiesce agents create --json", description: "The new agent as JSON: agentId, provider, sessionId" }
      ]
    )
  ),
  Command.make(
    "list",
    { json: jsonFlag("the agents") },
    printedWith(() => daemonOrSavedStore((api) => api.agents.list(), (saved) => saved.agents), (list) =>
      list.length === 0 ? Console.log("no agents yet: quiesce agents create") : printColumns([
        ["AGENT", "PROVIDER", "STATE", "LAST ACTIVE", "LABELS", "CWD"],
        ...list.map((agent) => [
          agent.agentId,
          agent.providerAvailable ? agent.provider : `${agent.provider} (not configured)`,
          agent.resident
            ? `resident${agent.pid === null ? "" : ` (pid ${agent.pid})`}`
            : agent.sessionId === null ? "released (no session to resume)" : "released",
          ago(agent.lastActivityAt),
          labelPairs(agent.labels).join(",") || "-",
          agent.cwd
        ])
      ]))
  ).pipe(
    documented(
      "Every agent of the daemon: provider, resident or released, last activity, labels",
      [
        { command: "quiesce agents list", description: "A table: provider, resident or released, last activity, labels" },
        { command: "quiesce agents list --json", description: "The same as JSON, times ISO 8601" }
      ]
    )
  ),
  Command.make(
    "delete",
    {
      agent: agentArgument,
      force: forceFlag("Delete it even though that ends its runtime's work (blockers, work its provider's veto names)"),
      json: jsonFlag("what the delete ended")
    },
    printedWith(({ agent, force }) =>
      Effect.flatMap(client, (api) =>
        api.agents.delete({ params: { id: agent }, query: force ? { force: "true" } : {} }).pipe(
          Effect.catchTag("AgentDeleteRefused", refusedFor(agent, "delete", "its runtime"))
        )), (deleted, { agent }) =>
      reportEnded(agent, "deleted", deleted.ended, "its runtime ended, its record and turns are gone", "its record and turns are gone"))
  ).pipe(
    documented(
      "Delete an agent: end its runtime and forget it and its turns. Refused (exit 1, naming its blockers and its provider's " +
        "veto) when that would end its runtime's work, unless --force; refused while a turn of it has not ended, forced or not",
      [
        { command: "quiesce agents delete agent-1234", description: "End its runtime and forget it and its turns (refused if that ends work)" },
        { command: "quiesce agents delete agent-1234 --force", description: "Delete it even though that ends its runtime's work" }
      ]
    )
  ),
  Command.make(
    "close",
    {
      agent: agentOrLabelArgument,
      labels: labelFlag("Close"),
      force: forceFlag("Close it even though that ends its work (blockers, work its provider's veto names)"),
      json: jsonFlag("what the close ended (with --label, each agent's result)")
    },
    Effect.fn(function*({ agent, force, json, labels }) {
      const target = yield* targetOf("quiesce agents close", agent, labels)
      if (target._tag === "Labelled") return yield* closeByLabel(target.labels, force, json)
      const api = yield* client
      const closed = yield* api.agents.close({ params: { id: target.agentId }, query: force ? { force: "true" } : {} }).pipe(
        Effect.catchTag("RuntimeCloseRefused", refusedFor(target.agentId, "close", "it"))
      )
      if (json) return yield* printJson(closed)
      yield* reportEnded(
        target.agentId,
        "closed",
        closed.ended,
        "its runtime is released; the next prompt resumes its session",
        "the next prompt resumes its session"
      )
    })
  ).pipe(
    documented(
      "Release the agent's runtime now; the next prompt resumes its session. Refused (exit 1, naming its blockers and its " +
        "provider's veto) when that would end work, unless --force. With --label, each agent with the labels in turn, " +
        "by the same rule: each is reported, and the command exits 1 if any was kept",
      [
        { command: "quiesce agents close agent-1234", description: "Release its runtime now if that ends no work; the next prompt resumes it" },
        { command: "quiesce agents close agent-1234 --force", description: "Release it even if that ends work (a turn, a background job), naming what it ended" },
        { command: "quiesce agents close --label team=web", description: "Release every agent labelled team=web that has no work a close would end; name the rest" }
      ]
    )
  ),
  Command.make(
    "show",
    { agent: agentArgument, json: jsonFlag("the agent") },
    printedWith(({ agent }) => daemonOrSavedStore((api) => api.agents.get({ params: { id: agent } }), (saved) => saved.agent(agent)), agentLines)
  ).pipe(
    documented(
      "One agent: provider, working directory, resident or released, session, last activity, labels, and the permissions it waits on",
      [
        { command: "quiesce agents show agent-1234", description: "One agent, for people" },
        { command: "quiesce agents show agent-1234 --json", description: "The same as JSON, times ISO 8601" }
      ]
    )
  )
])

