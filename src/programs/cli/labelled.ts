/**
 * Acting on agents by label (`quiesce collect --label`, `quiesce agents close --label`): the flag,
 * one agent or labels (never both), and the agents that carry every label given.
 */
import { Effect, Option } from "effect"
import { Flag } from "effect/cli"
import type { AgentSummary } from "../../api/agents.ts"
import { client } from "./connection.ts"
import { printColumns, printJson } from "./render.ts"
import type { DaemonApi } from "./savedReads.ts"
import { UsageError } from "./usageError.ts"

/** The repeatable `--label key=value` of a command that acts on every agent with the labels (`what` it does to each). */
export const labelFlag = (what: string) =>
  Flag.KeyValuePair("label").pipe(
    Flag.withDescription(
      `${what} every agent with this label, key=value; repeat it for the agents that have all of them (default: none, name one agent instead)`
    ),
    Flag.withDefault({})
  )

/** Each label as `key=value`, in order. */
export const labelPairs = (labels: Readonly<Record<string, string>>) =>
  Object.entries(labels).map(([key, value]) => `${key}=${value}`)

/** Labels as a person writes them: `team=web --label tier=1` reads `team=web and tier=1`. */
export const labelsText = (labels: Readonly<Record<string, string>>) => labelPairs(labels).join(" and ")

/** The `--label` flags again, to repeat a command line in a hint. */
export const labelArgs = (labels: Readonly<Record<string, string>>) => labelPairs(labels).map((pair) => `--label ${pair}`).join(" ")

/** What a command that acts on one agent or by label was asked: one agent, or every agent with these labels. */
export type Target =
  | { readonly _tag: "One"; readonly agentId: string }
  | { readonly _tag: "Labelled"; readonly labels: Readonly<Record<string, string>> }

/** One agent or labels, from a command line (`command` names it in the error): exactly one of them. */
export const targetOf = (command: string, agent: Option.Option<string>, labels: Readonly<Record<string, string>>) => {
  const labelled = Object.keys(labels).length > 0
  if (Option.isSome(agent) && labelled) {
    return Effect.fail(new UsageError({ message: `${command} takes an agent or --label, not both` }))
  }
  if (Option.isSome(agent)) return Effect.succeed<Target>({ _tag: "One", agentId: agent.value })
  if (labelled) return Effect.succeed<Target>({ _tag: "Labelled", labels })
  return Effect.fail(new UsageError({ message: `${command} needs an agent, or --label key=value for every agent with that label` }))
}

/** Whether an agent carries every one of the labels. */
export const hasLabels = (agent: Pick<AgentSummary, "labels">, labels: Readonly<Record<string, string>>) =>
  Object.entries(labels).every(([key, value]) => agent.labels[key] === value)

/** The daemon's agents that carry every one of the labels; a UsageError naming them when none does. */
export const agentsLabelled = (labels: Readonly<Record<string, string>>) =>
  Effect.gen(function*() {
    const api = yield* client
    const matching = (yield* api.agents.list()).filter((agent) => hasLabels(agent, labels))
    if (matching.length === 0) {
      return yield* new UsageError({ message: `No agent has the label ${labelsText(labels)} (see quiesce agents list): nothing was done` })
    }
    return matching
  })

/** What a command by label did, agent by agent, once reported: how many it did, how many it kept, and which agents it matched (in words). */
export interface LabelledOutcome {
  readonly done: number
  readonly kept: number
  readonly matched: string
}

/**
 * Runs `each` on every agent with the labels, one at a time, and reports each result (with `--json`
 * the results as JSON, else a table of `text`); the caller says what was `done` and what was `kept`.
 */
export const actOnLabelled = <R extends { readonly agentId: string }, E>(options: {
  readonly labels: Readonly<Record<string, string>>
  readonly json: boolean
  readonly each: (api: DaemonApi, agent: AgentSummary) => Effect.Effect<R, E>
  readonly text: (result: R) => string
  readonly done: (result: R) => boolean
  readonly kept: (result: R) => boolean
}) =>
  Effect.gen(function*() {
    const api = yield* client
    const agents = yield* agentsLabelled(options.labels)
    const results = yield* Effect.forEach(agents, (agent) => options.each(api, agent))
    if (options.json) yield* printJson(results)
    else yield* printColumns([["AGENT", "RESULT"], ...results.map((result) => [result.agentId, options.text(result)])])
    return {
      done: results.filter(options.done).length,
      kept: results.filter(options.kept).length,
      matched: `${agents.length} agent${agents.length === 1 ? "" : "s"} with ${labelsText(options.labels)}`
    } satisfies LabelledOutcome
  })
