/** `quiesce agents`: create, list, show, close and delete agents. */
import { Console, Effect, Option, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as path from "node:path"
import { type CloseStakes, stakesLines } from "../../../domain/close.ts"
import { commandGroup, documented } from "../documented.ts"
import { client } from "../connection.ts"
import { ago, printColumns, printedWith, printJson } from "../render.ts"
import { jsonFlag } from "../root.ts"
import { daemonOrSavedStore } from "../savedReads.ts"

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
      parent: Flag.String("parent").pipe(Flag.withDescription("The managing parent agent"), Flag.optional),
      labels: Flag.KeyValuePair("label").pipe(
        Flag.withDescription("A label, key=value; repeat for more (keys starting quiesce. are the daemon's own)"),
        Flag.withDefault({})
      )
    },
    Effect.fn(function*({ cwd, labels, parent, provider }) {
      const api = yield* client
      const payload = {
        provider,
        cwd: path.resolve(cwd),
        ...(Option.isSome(parent) ? { parentAgentId: parent.value } : {}),
        ...(Object.keys(labels).length === 0 ? {} : { labels })
      }
      yield* printJson(yield* api.agents.create({ payload }))
    })
  ).pipe(
    documented(
      "Create an agent; prints its id as JSON",
      [
        { command: "quiesce agents create", description: "A shell agent working in this directory" },
        { command: "quiesce agents create --provider claude --cwd ~/src/app --label team=web", description: "A Claude Code agent with a label" }
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
          Object.entries(agent.labels).map(([key, value]) => `${key}=${value}`).join(",") || "-",
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
      agent: Argument.String("agent"),
      force: forceFlag("Delete it even though that ends its runtime's work (blockers, work its provider's veto names)")
    },
    Effect.fn(function*({ agent, force }) {
      const api = yield* client
      const deleted = yield* api.agents.delete({ params: { id: agent }, query: force ? { force: "true" } : {} }).pipe(
        Effect.catchTag("AgentDeleteRefused", refusedFor(agent, "delete", "its runtime"))
      )
      yield* reportEnded(agent, "deleted", deleted.ended, "its runtime ended, its record and turns are gone", "its record and turns are gone")
    })
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
      agent: Argument.String("agent"),
      force: forceFlag("Close it even though that ends its work (blockers, work its provider's veto names)")
    },
    Effect.fn(function*({ agent, force }) {
      const api = yield* client
      const closed = yield* api.agents.close({ params: { id: agent }, query: force ? { force: "true" } : {} }).pipe(
        Effect.catchTag("RuntimeCloseRefused", refusedFor(agent, "close", "it"))
      )
      yield* reportEnded(agent, "closed", closed.ended, "its runtime is released; the next prompt resumes its session", "the next prompt resumes its session")
    })
  ).pipe(
    documented(
      "Release the agent's runtime now; the next prompt resumes its session. Refused (exit 1, naming its blockers and its " +
        "provider's veto) when that would end work, unless --force",
      [
        { command: "quiesce agents close agent-1234", description: "Release its runtime now if that ends no work; the next prompt resumes it" },
        { command: "quiesce agents close agent-1234 --force", description: "Release it even if that ends work (a turn, a background job), naming what it ended" }
      ]
    )
  ),
  Command.make(
    "show",
    { agent: Argument.String("agent") },
    ({ agent }) =>
      Effect.flatMap(daemonOrSavedStore((api) => api.agents.get({ params: { id: agent } }), (saved) => saved.agent(agent)), printJson)
  ).pipe(
    documented(
      "One agent as JSON: provider, session, resident or not, pid, labels, and the permissions it waits on",
      [{ command: "quiesce agents show agent-1234", description: "One agent as JSON" }]
    )
  )
])
