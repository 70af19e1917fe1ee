/**
 * The collector's commands: `runtimes` (what is resident and why), `explain` one, `collect` one
 * now, and run a `sweep`.
 */
import { Console, Effect, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import type { MemberBlocker } from "../../../domain/blocker.ts"
import { refusalOf, stakesLines } from "../../../domain/close.ts"
import type { ProbeView } from "../../../domain/runtimeRow.ts"
import { documented } from "../documented.ts"
import { client } from "../connection.ts"
import type { AgentSummary } from "../../../api/agents.ts"
import type { RuntimeRow } from "../../../domain/runtimeRow.ts"
import { ago, memoryBudgetLine, mib, printColumns, printedWith, printJson, refusedSince, releaseIn } from "../render.ts"
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
    `why         ${release === undefined || release.reason === null ? "not recorded (released by an older version)" : releaseReasons[release.reason]}`,
    `gave back   ${release === undefined ? "-" : release.rssBytes === null ? "unmeasured" : mib(release.rssBytes)}`,
    `resumes     ${
      agent.sessionId === null
        ? "nothing: it has no saved session, so it cannot be prompted again"
        : `${agent.provider} session ${agent.sessionId} on its next prompt`
    }`
  ]
}

/** Each release reason in words. */
const releaseReasons: Record<NonNullable<NonNullable<AgentSummary["release"]>["reason"]>, string> = {
  idle: "idle for the idle period, with nothing that would be lost",
  pressure: "the memory budget was exceeded: the least recently active safe runtimes went first",
  "max-resident": "more runtimes were resident than --max-resident allows",
  collect: "collected on request (quiesce collect)",
  close: "its runtime was closed on request",
  retirement: "the daemon retired",
  shutdown: "the daemon stopped",
  reload: "its runtime was reloaded",
  "handed-over": "its runtime moved to another runner",
  exited: "its runtime exited on its own"
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
  { agent: Argument.String("agent"), json: jsonFlag("the explanation (the runtime's row, or the released agent)") },
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

/** `quiesce collect`: releases one runtime now if nothing would be lost. */
export const collect = Command.make(
  "collect",
  { agent: Argument.String("agent") },
  Effect.fn(function*({ agent }) {
    const api = yield* client
    const result = yield* api.runtimes.collect({ params: { id: agent } })
    yield* printJson(result)
    if (result.outcome === "collected") return
    const why = result.outcome === "failed"
      ? `it failed: ${result.error?.message ?? "no reason given"}`
      : stakesOf({ agentId: agent, blockers: result.blockers, lastProbe: result.lastProbe }).join(", ") ||
        `it is ${result.state ?? "not releasable"}`
    return yield* new CollectRefused({ message: `${agent} was not released: ${why}` })
  })
).pipe(
  documented(
    "Release one runtime now if nothing would be lost; otherwise say why and exit 1",
    [{ command: "quiesce collect agent-1234", description: "Release it now if nothing would be lost (exit 1 and why, if not)" }]
  )
)

/** `quiesce sweep`: runs one sweep now. */
export const sweep = Command.make("sweep", {}, () => Effect.flatMap(client, (api) => Effect.flatMap(api.runtimes.sweep(), printJson))).pipe(
  documented(
    "Run one sweep now",
    [{ command: "quiesce sweep", description: "Run one sweep now and print what it released" }]
  )
)
