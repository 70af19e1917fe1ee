/**
 * How the commands print: JSON, aligned tables, times and sizes for people, the memory budget, and
 * a one-time login link.
 */
import { Console, Effect } from "effect"
import type { ReleaseReason } from "../../domain/agent.ts"
import { formatByteSize } from "../../domain/byteSize.ts"
import type { LoginLink } from "../../api/session.ts"
import type { MemoryView } from "../../api/memory.ts"
import { describeConfig, type QuiesceConfig } from "../../domain/config.ts"
import type { MemoryFigures, MemoryTotals } from "../../domain/memoryTotals.ts"
import { isVeto, type RetirementBlocker } from "../../domain/retirement.ts"

/**
 * Prints a one-time login link for a page of the server (the daemon or the hub) at `connection`'s
 * base URL, asked of it by `link`: the URL alone on stdout (to hand to a browser), what it is on
 * stderr. `next` is the page the login goes on to.
 */
export const printLoginLink = <E1, R1, E2, R2>(
  connection: Effect.Effect<{ readonly baseUrl: string }, E1, R1>,
  link: Effect.Effect<LoginLink, E2, R2>,
  next: string | undefined
) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* connection
    const { expiresAt, path } = yield* link
    const url = new URL(path, baseUrl)
    if (next !== undefined) url.searchParams.set("next", next)
    yield* Console.error(`Open this link in a browser on this machine; it signs in once, until ${new Date(expiresAt).toLocaleTimeString()}:`)
    yield* Console.log(url.href)
  })

/** A value as indented JSON. */
export const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/**
 * The handler of a command with a `--json` flag (see `jsonFlag`): it fetches a value, then prints it
 * as JSON with `--json`, else for people with `show`.
 */
export const printedWith = <Input extends { readonly json: boolean }, A, E, R, E2, R2>(
  fetch: (input: Input) => Effect.Effect<A, E, R>,
  show: (value: A, input: Input) => Effect.Effect<void, E2, R2>
) =>
(input: Input): Effect.Effect<void, E | E2, R | R2> =>
  Effect.flatMap(fetch(input), (value) => input.json ? printJson(value) : show(value, input))

/** Rows of cells (the first a header) in aligned columns. */
export const printColumns = (table: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => row[column]!.length)))
  return Effect.forEach(table, (cells) => Console.log(cells.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()), {
    discard: true
  })
}

/** When a runtime could be released: "-" when never while blocked, "now" once due, else how soon. */
export const releaseIn = (at: string | null, now: number = Date.now()) =>
  at === null ? "-" : Date.parse(at) <= now ? "now" : relative(at, now)

/** A span of whole seconds, unsigned, for people: "42s", "5m", "3h", "4d". */
const span = (seconds: number) =>
  seconds < 120
    ? `${seconds}s`
    : seconds < 7200
    ? `${Math.round(seconds / 60)}m`
    : seconds < 172_800
    ? `${Math.round(seconds / 3600)}h`
    : `${Math.round(seconds / 86_400)}d`

/**
 * How long ago (or until) an ISO time is, for people: "5m ago", "just now", "in 3h". A time that
 * rounds to the present second is "just now", never "in 0s".
 */
export const relative = (iso: string, now: number = Date.now()) => {
  const seconds = Math.round((Date.parse(iso) - now) / 1000)
  if (seconds === 0) return "just now"
  return seconds > 0 ? `in ${span(seconds)}` : `${span(-seconds)} ago`
}

/**
 * How long ago a time that has passed is ("idle since", "last try", "accepted"): a few seconds
 * ahead of this clock (the daemon's clock, or rounding) still reads "just now", never "in …".
 */
export const ago = (iso: string, now: number = Date.now()) => Date.parse(iso) >= now ? "just now" : relative(iso, now)

/** A span of seconds for people: "42s", "5m 3s", "2h 10m", "3d 4h". */
export const duration = (seconds: number) => {
  const s = Math.max(0, Math.round(seconds))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`
}

/**
 * How long a provider's refusal has held, for people: "vetoed since 3h ago" (or "timed-out since
 * …"); empty when it is not known.
 */
export const refusedSince = (probe: { readonly outcome: string; readonly since?: string | undefined }, now: number = Date.now()) =>
  probe.since === undefined ? "" : `${probe.outcome === "vetoed" ? "vetoed" : probe.outcome} since ${ago(probe.since, now)}`

/**
 * Blockers for people: each category, with its agent if it has one, and for a provider's veto (or
 * a failed probe) its reason and since when it holds; "none" without any.
 */
export const blockerList = (blockers: ReadonlyArray<RetirementBlocker>, now: number = Date.now()) =>
  blockers.length === 0 ? "none" : blockers.map((b) => {
    const why = isVeto(b)
      ? [b.detail, b.since === undefined ? undefined : `since ${ago(b.since, now)}`].filter((part) => part !== undefined).join(", ")
      : ""
    const whose = [b.agentId, why === "" ? undefined : why].filter((part) => part !== undefined).join(": ")
    return `${b.category}${whose === "" ? "" : ` (${whose})`}`
  }).join(", ")

/** Resident against released memory for people: "412.3 MiB in 3 runtimes (1 unmeasured)", "1.2 GiB by 7 releases". */
export const memoryFiguresText = (figures: MemoryFigures) => {
  const unmeasured = (n: number) => n === 0 ? "" : ` (${n} unmeasured)`
  return {
    resident: `${formatByteSize(figures.residentBytes)} in ${figures.residentRuntimes} runtime${
      figures.residentRuntimes === 1 ? "" : "s"
    }${unmeasured(figures.unmeasuredResident)}`,
    released: `${formatByteSize(figures.releasedBytes)} by ${figures.releasedAgents} agent${
      figures.releasedAgents === 1 ? "" : "s"
    }${unmeasured(figures.unmeasuredReleased)}`
  }
}

/** Memory totals as a table: in all, then per provider, then per label. */
export const memoryTotalsTable = (totals: MemoryTotals, all: string): ReadonlyArray<ReadonlyArray<string>> => {
  const row = (name: string, figures: MemoryFigures) => {
    const text = memoryFiguresText(figures)
    return [name, text.resident, text.released]
  }
  return [
    ["MEMORY", "RESIDENT", "RELEASED"],
    row(all, totals),
    ...totals.byProvider.map((entry) => row(`provider ${entry.provider}`, entry)),
    ...totals.byLabel.map((entry) => row(`label ${entry.label}`, entry))
  ]
}

/** Bytes in MiB for people, "-" when unmeasured. */
export const mib = (bytes: number | null) => bytes === null ? "-" : `${(bytes / 1024 / 1024).toFixed(1)} MiB`

/** Usage against the memory budget, for people; "none" without one. */
export const memoryBudgetLine = (memory: MemoryView | null): string => {
  if (memory === null) return "no budget (released by the idle period alone)"
  const { budget } = memory
  const parts = [
    budget.high === null || budget.low === null
      ? `${formatByteSize(memory.residentBytes)} resident`
      : `${formatByteSize(memory.residentBytes)} of ${formatByteSize(budget.high)} (release down to ${formatByteSize(budget.low)})`,
    ...(budget.maxResident === null ? [] : [`${memory.residentRuntimes} of at most ${budget.maxResident} runtimes`]),
    ...(budget.minAvailable === null
      ? []
      : [`${memory.availableBytes === null ? "available unknown" : `${formatByteSize(memory.availableBytes)} available`}, floor ${formatByteSize(budget.minAvailable)}`]),
    ...(memory.unmeasuredRuntimes === 0 ? [] : [`${memory.unmeasuredRuntimes} unmeasured`])
  ]
  const pressure = memory.pressure === null
    ? "no pressure"
    : `under pressure since ${memory.pressure.since} (${ago(memory.pressure.since)}): ${memory.pressure.causes.join(", ")}`
  const held = memory.held.length === 0
    ? ""
    : `; nothing more can be released: held by ${memory.held.map((holder) => `${holder.agentId} (${holder.rssBytes === null ? "unmeasured" : formatByteSize(holder.rssBytes)}${holder.veto === null ? "" : `, vetoed: ${holder.veto}`}${holder.blockers.length === 0 ? "" : `, ${holder.blockers.map((b) => b.kind).join(", ")}`})`).join(", ")}`
  return `${parts.join("; ")}; ${pressure}${held}`
}

/**
 * `config check` without a config.json: says there is none, and what the daemon uses instead,
 * each default by its path in the file (so it can be copied there), then what is off unless set.
 */
export const printDefaults = (home: string, config: QuiesceConfig) =>
  Effect.gen(function*() {
    const { settings, unset } = describeConfig(config)
    yield* Console.log(`no config.json in ${home}: the daemon uses the defaults:`)
    yield* printColumns(settings.map(([key, value]) => [`  ${key}`, value]))
    if (unset.length > 0) yield* Console.log(`  off unless set: ${unset.join(", ")}`)
  })

/** Why a runtime was released, in words (`explain` and `agents show` of a released agent). */
export const releaseReasonText: Record<ReleaseReason, string> = {
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
