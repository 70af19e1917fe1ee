/**
 * The collector's commands: `runtimes` (what is resident and why), `explain` one, `collect` one
 * now, and run a `sweep`.
 */
import { Console, Effect, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import type { AgentSummary } from "../../../api/agents.ts"
import type { CollectResult } from "../../../api/runtimes.ts"
import type { MemberBlocker } from "../../../domain/blocker.ts"
import { refusalOf, stakesLines } from "../../../domain/close.ts"
import type { ProbeView, RuntimeRow } from "../../../domain/runtimeRow.ts"
import { agentArgument, agentOrLabelArgument } from "../arguments.ts"
import { documented } from "../documented.ts"
import { client } from "../connection.ts"
import { actOnLabelled, labelArgs, labelFlag, targetOf } from "../labelled.ts"
import { ago, memoryBudgetLine, mib, printColumns, printedWith, printJson, refusedSince, releaseIn, releaseReasonText } from "../render.ts"
import { jsonFlag } from "../root.ts"
import { UsageError } from "../usageError.ts"

/** `quiesce runtimes`: every resident runtime and warm process, and why each is resident. */
export const runtimes = Command.make(
  "runtimes",
  {
    json: jsonFlag("the runtimes"),
    cluster: Flag.Boolean("cluster").pipe(
      Flag.withDescription("On a cluster's runner: every runner's runtimes, as each last reported them"),
      Flag.withDefault(false)
    )
  },
  Effect.fn(function*({ cluster, json }) {
    const api = yield* client
    const [rows, reserves, memory] = yield* Effect.all([
      api.runtimes.list({ query: cluster ? { scope: "cluster" } : {} }),
      // A daemon older than the warm reserve has no such route: it keeps no warm processes.
      api.reserve.list().pipe(Effect.catchTag("HttpClientError", () => Effect.succeed([]))),
      // Nor one older than the memory budget: it has none.
      api.runtimes.memory().pipe(Effect.catchTag("HttpClientError", () => Effect.succeed(null)))
    ], { concurrency: 3 })
    if (json) return yield* printJson(rows)
    // Warm processes hold no agent yet; they are listed (and their memory counted) after the runtimes.
    const warm = reserves.flatMap((reserve) => reserve.ready.map((process) => ({ ...process, provider: reserve.provider })))
    if (rows.length === 0 && warm.length === 0) {
      return yield* Console.log("no resident runtimes: every agent is released (or there is none)")
    }
    const table = [
      ["AGENT", "PROVIDER", "PID", "RSS", "STATE", "RELEASE", ...(memory === null ? [] : ["EVICT"]), "WHY"],
      ...rows.map((row) => [
        row.agentId,
        row.provider,
        row.pid === null ? "-" : String(row.pid),
        mib(row.rssBytes),
        row.state,
        releaseIn(row.eligibleAt),
        ...(memory === null ? [] : [row.evictionRank === undefined || row.evictionRank === null ? "-" : `#${row.evictionRank}`]),
        whyResident(row).join(", ") || "-"
      ]),
      ...warm.map((process) => [
        "-",
        process.provider,
        String(process.pid),
        mib(process.rssBytes),
        "warm",
        "-",
        ...(memory === null ? [] : ["-"]),
        process.expiring ? "idle limit reached: replaced once its successor is ready" : "warm reserve"
      ])
    ]
    yield* printColumns(table)
    yield* Console.log(memoryTotalLine([...rows, ...warm]))
    if (memory !== null && !cluster) yield* Console.log(`budget ${memoryBudgetLine(memory)}`)
  })
).pipe(
  documented(
    "Every resident runtime, and why it is still resident (each blocker, a provider's veto and its reason)",
    [
      { command: "quiesce runtimes", description: "Resident runtimes: memory, state, when releasable, and why not yet" },
      { command: "quiesce runtimes --json", description: "The same as JSON" }
    ]
  )
)

/** The memory of every listed runtime, saying how much of it was measured (an unmeasured one is not zero). */
const memoryTotalLine = (rows: ReadonlyArray<{ readonly rssBytes: number | null; readonly measuredProcesses: number | null }>) => {
  const measured = rows.filter((row) => row.rssBytes !== null)
  const bytes = measured.reduce((sum, row) => sum + (row.rssBytes ?? 0), 0)
  const processes = measured.reduce((sum, row) => sum + (row.measuredProcesses ?? 0), 0)
  const unmeasured = rows.length - measured.length
  return `total ${(bytes / 1024 / 1024).toFixed(1)} MiB in ${processes} measured process${processes === 1 ? "" : "es"}` +
    (unmeasured === 0 ? "" : `; ${unmeasured} runtime${unmeasured === 1 ? "" : "s"} unmeasured`)
}

/** A runtime's blockers and its provider's refusal. */
interface RuntimeWhy {
  readonly agentId: string
  readonly blockers: ReadonlyArray<MemberBlocker>
  readonly lastProbe?: ProbeView | null | undefined
}

/** What keeps a runtime resident now, for people: each blocker, and a probe that did not permit, with its reason. */
const stakesOf = (row: RuntimeWhy) => stakesLines(row.agentId, { blockers: row.blockers, veto: refusalOf(row.lastProbe) })

/**
 * What keeps a runtime resident, for people: each blocker, and a probe that did not permit, with
 * its reason and since when it has held ("vetoed since 3h ago"), so a stuck background job stands out.
 */
const whyResident = (row: RuntimeWhy) => {
  const lines = stakesOf(row)
  const since = row.lastProbe === null || row.lastProbe === undefined || row.lastProbe.outcome === "permitted"
    ? ""
    : refusedSince(row.lastProbe)
  return since === "" ? lines : [...lines, since]
}

/** Why a released agent has no runtime, for people: when and why it was released, and what its next prompt resumes. */
const releasedLines = (agent: AgentSummary) => {
  const release = agent.release
  return [
    `agent       ${agent.agentId} (${agent.provider})`,
    `state       released${release === undefined ? "" : ` ${release.at} (${ago(release.at)})`}`,
    `why         ${release === undefined || release.reason === null ? "not recorded (released by an older version)" : releaseReasonText[release.reason]}`,
    `gave back   ${release === undefined ? "-" : release.rssBytes === null ? "unmeasured" : mib(release.rssBytes)}`,
    `resumes     ${
      agent.sessionId === null
        ? "nothing: it has no saved session, so it cannot be prompted again"
        : `${agent.provider} session ${agent.sessionId} on its next prompt`
    }`
  ]
}


/** An explanation: the live runtime's row, or a released agent's summary. */
type Explained = RuntimeRow | AgentSummary

/** No agent by that id in this home: one line, exit 1. */
const noSuchAgent = (agent: string) =>
  new UsageError({ message: `No agent ${agent} in this home: nothing to explain (quiesce agents list shows its agents)` })

/** The live runtime's row, or, for an agent without one, its summary (when and why it was released). */
const explained = (agent: string) =>
  Effect.gen(function*() {
    const api = yield* client
    return yield* api.runtimes.explain({ params: { id: agent } }).pipe(
      Effect.map((row): Explained => row),
      Effect.catchTag("RuntimeNotFound", () => api.agents.get({ params: { id: agent } })),
      Effect.catchTag("AgentNotFound", () => Effect.fail(noSuchAgent(agent)))
    )
  })

/** `quiesce explain`: why one agent's runtime is still resident, or why it is released and what a prompt resumes. */
export const explain = Command.make(
  "explain",
  { agent: agentArgument, json: jsonFlag("the explanation (the runtime's row, or the released agent)") },
  printedWith(({ agent }) => explained(agent), Effect.fn(function*(row) {
    if ("resident" in row) {
      // Resumed between the two reads.
      if (row.resident) return yield* Console.log(`${row.agentId} was resumed just now: quiesce explain ${row.agentId} says why it is resident`)
      for (const line of releasedLines(row)) yield* Console.log(line)
      return
    }
    const lines = [
      `agent       ${row.agentId} (${row.provider}, session ${row.sessionId ?? "none yet"})`,
      `process     ${row.pid === null ? "-" : `pid ${row.pid}`}${row.rssBytes === null ? "" : `, ${mib(row.rssBytes)}`}`,
      `family      ${row.family.join(", ")}`,
      `state       ${row.state}`,
      `idle since  ${row.idleSince} (${ago(row.idleSince)})`,
      `release     ${row.eligibleAt === null ? `not while it is ${row.state}` : `${releaseIn(row.eligibleAt)} if nothing changes`}`,
      `why         ${whyResident(row).join("; ") || "nothing: it is released once its idle period ends"}`,
      ...(row.evictionRank === undefined
        ? []
        : [`pressure    ${
          row.evictionRank !== null
            ? `#${row.evictionRank} in the eviction order (1 goes first)`
            : row.sessionId === null
            ? "never released (not resumable)"
            : "not ranked yet (resident since the last sample)"
        }`])
    ]
    for (const line of lines) yield* Console.log(line)
    if (row.evictionRank !== undefined) {
      const api = yield* client
      const memory = yield* api.runtimes.memory().pipe(Effect.catchTag("HttpClientError", () => Effect.succeed(null)))
      yield* Console.log(`budget      ${memoryBudgetLine(memory)}`)
    }
  }))
).pipe(
  documented(
    "Why one agent's runtime is still resident (its state, each blocker, its provider's veto, its reason and since when, and when it could be released), " +
      "or, for a released agent, when and why it was released and what its next prompt resumes",
    [
      { command: "quiesce explain agent-1234", description: "Why its runtime is still resident, or why it is released" },
      { command: "quiesce explain agent-1234 --json", description: "The same as JSON: the runtime's row, or the released agent" }
    ]
  )
)

/** A collect that released nothing, told to the user: why, exit code 1. */
class CollectRefused extends Schema.TaggedError<CollectRefused>()("CollectRefused", { message: Schema.String }) {}

/** Why a collect kept a runtime, for people: its failure, else what keeps it resident, else its state. */
const whyKept = (agentId: string, result: CollectResult) =>
  result.outcome === "failed"
    ? `it failed: ${result.error?.message ?? "no reason given"}`
    : stakesOf({ agentId, blockers: result.blockers, lastProbe: result.lastProbe }).join(", ") ||
      `it is ${result.state ?? "not releasable"}`

/** How the collect of one agent of a collect by label went: its result, or that it had no runtime to release. */
type LabelledCollect =
  | ({ readonly agentId: string } & CollectResult)
  | { readonly agentId: string; readonly outcome: "not-resident" }

/** One collect by label, for people: released, released already, or kept and why. */
const labelledCollectText = (result: LabelledCollect) =>
  result.outcome === "collected"
    ? "released"
    : result.outcome === "not-resident"
    ? "released already"
    : `kept: ${whyKept(result.agentId, result)}`

/**
 * `collect --label`: releases every agent with the labels that can be released without losing
 * anything, one at a time as `collect AGENT` does; reports each, then fails naming how many were kept.
 */
const collectByLabel = (labels: Readonly<Record<string, string>>, json: boolean) =>
  Effect.gen(function*() {
    const { done: released, kept, matched } = yield* actOnLabelled({
      labels,
      json,
      each: (api, agent) =>
        agent.resident
          ? api.runtimes.collect({ params: { id: agent.agentId } }).pipe(
            Effect.map((result): LabelledCollect => ({ agentId: agent.agentId, ...result })),
            // Released between the list and the collect: nothing left to release.
            Effect.catchTag("RuntimeNotFound", () => Effect.succeed<LabelledCollect>({ agentId: agent.agentId, outcome: "not-resident" }))
          )
          : Effect.succeed<LabelledCollect>({ agentId: agent.agentId, outcome: "not-resident" }),
      text: labelledCollectText,
      done: (result) => result.outcome === "collected",
      kept: (result) => result.outcome === "retained" || result.outcome === "failed"
    })
    if (kept > 0) {
      return yield* new CollectRefused({
        message: `${kept} of ${matched} ${kept === 1 ? "was" : "were"} kept: releasing ${kept === 1 ? "it" : "them"} now would lose ` +
          `work (named above); quiesce agents close ${labelArgs(labels)} --force ends it`
      })
    }
    if (!json) yield* Console.log(`released ${released} of ${matched}; the next prompt to each resumes its session`)
  })

/** `quiesce collect`: releases one runtime, or every one with the labels, now if nothing would be lost. */
export const collect = Command.make(
  "collect",
  {
    agent: agentOrLabelArgument,
    labels: labelFlag("Release"),
    json: jsonFlag("the outcome (with --label, each agent's)")
  },
  Effect.fn(function*({ agent, json, labels }) {
    const target = yield* targetOf("quiesce collect", agent, labels)
    if (target._tag === "Labelled") return yield* collectByLabel(target.labels, json)
    const api = yield* client
    const collected = yield* api.runtimes.collect({ params: { id: target.agentId } }).pipe(
      Effect.map((result) => Option.some(result)),
      // No live runtime: released already (what was asked for holds), or no such agent (that error).
      Effect.catchTag("RuntimeNotFound", (notFound) =>
        api.agents.get({ params: { id: target.agentId } }).pipe(
          Effect.flatMap((found) => found.resident ? Effect.fail(notFound) : Effect.succeedNone)
        ))
    )
    if (Option.isNone(collected)) {
      const already: LabelledCollect = { agentId: target.agentId, outcome: "not-resident" }
      return yield* json
        ? printJson(already)
        : Console.log(`${target.agentId} is released already: its next prompt resumes its session`)
    }
    const result = collected.value
    if (json) yield* printJson(result)
    if (result.outcome !== "collected") {
      return yield* new CollectRefused({ message: `${target.agentId} was not released: ${whyKept(target.agentId, result)}` })
    }
    if (!json) yield* Console.log(`released ${target.agentId}: its next prompt resumes its session`)
  })
).pipe(
  documented(
    "Release one runtime now if nothing would be lost; otherwise say why and exit 1. With --label, every agent with the " +
      "labels by the same rule: each is reported, and the command exits 1 if any was kept",
    [
      { command: "quiesce collect agent-1234", description: "Release it now if nothing would be lost (exit 1 and why, if not)" },
      { command: "quiesce collect --label team=web", description: "Release every idle agent labelled team=web; say why each other one is kept" },
      { command: "quiesce collect agent-1234 --json", description: "The outcome as JSON: collected, retained (blockers, the last probe) or failed" }
    ]
  )
)

/** `quiesce sweep`: runs one sweep now. */
export const sweep = Command.make(
  "sweep",
  { json: jsonFlag("what the sweep released and what failed") },
  printedWith(() => Effect.flatMap(client, (api) => api.runtimes.sweep()), Effect.fn(function*(report) {
    yield* Console.log(
      report.collected.length === 0
        ? "released nothing: no runtime was both idle past its idle period and safe to release (quiesce runtimes says why)"
        : `released ${report.collected.length} runtime${report.collected.length === 1 ? "" : "s"}: ${
          report.collected.map((runtime) => `${runtime.agentId} (${runtime.provider})`).join(", ")
        }`
    )
    for (const failure of report.failures) {
      yield* Console.log(`could not release ${failure.agentId}: ${failure.error._tag}: ${failure.error.message}`)
    }
  }))
).pipe(
  documented(
    "Run one sweep now: release every runtime idle past its idle period that is safe to release",
    [
      { command: "quiesce sweep", description: "Run one sweep now and say what it released" },
      { command: "quiesce sweep --json", description: "The same as JSON: collected and failures" }
    ]
  )
)
