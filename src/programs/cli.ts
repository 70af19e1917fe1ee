/**
 * The `quiesce` command: runs the daemon, and talks to a running daemon over its HTTP API with
 * the token from the home directory.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Cause, Console, Effect, Logger, Option, Predicate, Runtime, Schema } from "effect"
import { Argument, CliError, CliOutput, Command, Flag, HelpDoc } from "effect/cli"
import { HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { MemberBlocker } from "../domain/blocker.ts"
import { refusalOf, stakesLines } from "../domain/close.ts"
import { retiredExitCode, unrecordedShutdownDeadlineMillis } from "../domain/retirement.ts"
import { packageVersion } from "../domain/version.ts"
import { formatByteSize } from "../domain/byteSize.ts"
import { defaultHome, tokenProblem } from "../layers/host/Home.ts"
import {
  defaultLogFileOptions,
  formatLogLine,
  lastLogLines,
  logFile,
  logSize,
  readLogFrom,
  rotatedLogFile
} from "../layers/host/logFile.ts"
import { recordedProcessAlive } from "../layers/host/ProcessInspectionProcfs.ts"
import { readRendezvous } from "../layers/host/rendezvous.ts"
import type { PromptResult } from "../api/agents.ts"
import { HubApi, QuiesceApiViaHub } from "../api/HubApi.ts"
import type { MemoryView } from "../api/memory.ts"
import type { LoginLink } from "../api/session.ts"
import type { DaemonRow } from "../domain/hubDaemons.ts"
import type { ProbeView } from "../domain/runtimeRow.ts"
import {
  addHome,
  defaultHubHome,
  defaultHubPort,
  hubConfigFile,
  hubDefault,
  hubTokenFile,
  readHubAddress,
  readHubConfig,
  removeHome,
  setArchived
} from "../layers/hub/hubFiles.ts"
import type { DaemonOutcome } from "./runDaemon.ts"

/** A failure the user caused and can fix; printed as it is, exit code 1. */
class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

const home = Flag.String("home").pipe(
  Flag.withDescription(
    "The daemon's home directory (default $QUIESCE_HOME, else $XDG_STATE_HOME/quiesce or ~/.local/state/quiesce); for hub and daemons commands, and with --hub, " +
      "the hub's home (default $QUIESCE_HUB_HOME or $XDG_STATE_HOME/quiesce/hub)"
  ),
  Flag.optional
)

const hub = Flag.String("hub").pipe(
  Flag.withDescription("Go through the hub to the home of this name (default $QUIESCE_HUB); the hub starts its daemon if needed"),
  Flag.optional
)

const logFormat = Flag.Literals("log-format", ["pretty", "json"]).pipe(
  Flag.withDescription("How the daemon and the hub log: pretty (the default on a terminal) or json (the default otherwise)"),
  Flag.optional
)

const root = Command.make("quiesce").pipe(
  Command.withSharedFlags({ home, hub, logFormat }),
  Command.withDescription("Release idle coding-agent runtimes when nothing is lost; resume them on the next prompt")
)

const homeDirectory = Effect.map(root, (flags) =>
  Option.getOrElse(flags.home, defaultHome))

const hubHomeDirectory = Effect.map(root, (flags) => path.resolve(Option.getOrElse(flags.home, defaultHubHome)))

/** The logger of a long-running command: pretty with dated timestamps on a terminal, one JSON object per line otherwise. */
const withLogFormat = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(root, (flags) => {
    const format = Option.getOrElse(flags.logFormat, () => (process.stdout.isTTY ? "pretty" : "json"))
    const logger = format === "json" ? Logger.consoleJson : Logger.consolePretty({ formatDate: (date) => date.toISOString() })
    return effect.pipe(Effect.provide(Logger.layer([logger])))
  })

/** What each command's help shows under EXAMPLES, by command path (a test checks that every command has some). */
const commandExamples: Record<string, ReadonlyArray<HelpDoc.ExampleDoc>> = {
  daemon: [
    { command: "quiesce daemon", description: "Run the daemon of the default home on 127.0.0.1:7377" },
    { command: "quiesce --home ~/work daemon --idle-period 30m --daemon-idle-timeout 2h", description: "Release runtimes idle 30 minutes; retire after 2 hours idle" },
    { command: "quiesce daemon --memory-high 6GiB --memory-low 4GiB --max-resident 12", description: "Also release the safest runtimes, least recently active first, when memory runs short" }
  ],
  agents: [{ command: "quiesce agents list", description: "Every agent of the daemon" }],
  "agents create": [
    { command: "quiesce agents create", description: "A shell agent working in this directory" },
    { command: "quiesce agents create --provider claude --cwd ~/src/app --label team=web", description: "A Claude Code agent with a label" }
  ],
  "agents list": [
    { command: "quiesce agents list", description: "A table: provider, resident or released, last activity, labels" },
    { command: "quiesce agents list --json", description: "The same as JSON, times ISO 8601" }
  ],
  "agents show": [{ command: "quiesce agents show agent-1234", description: "One agent as JSON" }],
  "agents delete": [
    { command: "quiesce agents delete agent-1234", description: "End its runtime and forget it and its turns (refused if that ends work)" },
    { command: "quiesce agents delete agent-1234 --force", description: "Delete it even though that ends its runtime's work" }
  ],
  "agents close": [
    { command: "quiesce agents close agent-1234", description: "Release its runtime now if that ends no work; the next prompt resumes it" },
    { command: "quiesce agents close agent-1234 --force", description: "Release it even if that ends work (a turn, a background job), naming what it ended" }
  ],
  prompt: [
    { command: "quiesce prompt agent-1234 \"run the tests\" --wait", description: "Send a prompt and print the reply" },
    { command: "quiesce prompt agent-1234 --client-message-id m-1 \"deploy\"", description: "Repeatable: the same id never runs twice" },
    { command: "quiesce prompt agent-1234 --wait -- \"-n is a flag of echo\"", description: "A prompt that starts with -" }
  ],
  turns: [{ command: "quiesce turns show agent-1234 turn-5678", description: "One turn's state and reply" }],
  "turns show": [{ command: "quiesce turns show agent-1234 turn-5678", description: "State, reply or error, and times" }],
  "turns list": [{ command: "quiesce turns list agent-1234 --limit 5", description: "Its five newest turns: id, state, when, prompt" }],
  interrupt: [{ command: "quiesce interrupt agent-1234", description: "Interrupt its running turn" }],
  permit: [{ command: "quiesce permit agent-1234 perm-1", description: "Allow what agents show lists under pendingPermissions" }],
  deny: [{ command: "quiesce deny agent-1234 perm-1", description: "Refuse it" }],
  runtimes: [
    { command: "quiesce runtimes", description: "Resident runtimes: memory, state, when releasable, and why not yet" },
    { command: "quiesce runtimes --json", description: "The same as JSON" }
  ],
  explain: [{ command: "quiesce explain agent-1234", description: "Why its runtime is still resident" }],
  open: [
    { command: "quiesce open", description: "A one-time link to the daemon's page, printed for a browser" },
    { command: "quiesce --hub work open", description: "The page of the home work, through the hub" }
  ],
  "hub open": [{ command: "quiesce hub open", description: "A one-time link to the hub's page, printed for a browser" }],
  collect: [{ command: "quiesce collect agent-1234", description: "Release it now if nothing would be lost (exit 1 and why, if not)" }],
  sweep: [{ command: "quiesce sweep", description: "Run one sweep now and print what it released" }],
  status: [
    { command: "quiesce status", description: "Identity, uptime, phase and idle timer of the daemon" },
    { command: "quiesce --home ~/work status --json", description: "Another home's, as JSON" }
  ],
  stop: [{ command: "quiesce stop", description: "Stop the daemon in order and wait for it to exit" }],
  logs: [
    { command: "quiesce logs", description: "The last 50 lines of the daemon's log" },
    { command: "quiesce logs --lines 200 --follow", description: "The last 200, then new lines as they come" }
  ],
  retire: [{ command: "quiesce retire", description: "Retire the daemon now if nothing would be lost" }],
  config: [{ command: "quiesce config check", description: "Validate config.json" }],
  "config reload": [{ command: "quiesce config reload", description: "Apply config.json's warm reserves to the running daemon; name what needs a restart" }],
  "warm-reserve": [
    { command: "quiesce warm-reserve", description: "Each provider's warm processes: target, ready, starting, memory" },
    { command: "quiesce warm-reserve codex 2", description: "Keep two Codex app-servers started and ready; 0 closes them" }
  ],
  "config check": [{ command: "quiesce --home ~/work config check", description: "Validate that home's config.json" }],
  hub: [
    { command: "quiesce hub", description: "Run the hub on 127.0.0.1:7378" },
    { command: "quiesce --hub work prompt agent-1234 \"hello\" --wait", description: "A prompt through the hub: it starts the daemon of work if needed" }
  ],
  "hub add": [{ command: "quiesce hub add work ~/.local/state/quiesce", description: "Manage that home under the name work" }],
  "hub remove": [{ command: "quiesce hub remove work", description: "Stop managing it (nothing is deleted or stopped)" }],
  "hub list": [{ command: "quiesce hub list --json", description: "The homes in hub.json" }],
  "hub archive": [{ command: "quiesce hub archive old-project", description: "Keep its data, refuse new work" }],
  "hub unarchive": [{ command: "quiesce hub unarchive old-project", description: "Accept work again" }],
  daemons: [{ command: "quiesce daemons", description: "The resident inventory of the hub" }],
  "daemons retire": [{ command: "quiesce daemons retire work", description: "Retire that daemon now if nothing would be lost" }],
  "daemons stop": [{ command: "quiesce daemons stop work --confirm work:4242", description: "Force-stop it (the pid as quiesce daemons shows it)" }],
  "daemons resume": [{ command: "quiesce daemons resume work", description: "Start a force-stopped home's daemon again" }]
}

const examples = (commandPath: string) => Command.withExamples(commandExamples[commandPath] ?? [])

/** The managed home the daemon commands go to through the hub, if any. */
const viaHub = Effect.map(root, (flags) =>
  Option.orElse(flags.hub, () => Option.fromNullishOr(process.env["QUIESCE_HUB"] || undefined)))

// ---- the daemon --------------------------------------------------------------------------------

const durationFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)

const sizeFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)

/** How the daemon run went, for the exit code. */
const daemonOutcome: DaemonOutcome = { running: false, retired: false }

const daemon = Command.make(
  "daemon",
  {
    port: Flag.Int("port").pipe(Flag.withDescription("HTTP port (default 7377)"), Flag.optional),
    host: Flag.String("host").pipe(Flag.withDescription("Address to listen on (default 127.0.0.1)"), Flag.optional),
    idlePeriod: durationFlag("idle-period", "Release runtimes idle this long, e.g. 1h, 10s"),
    sweepInterval: durationFlag("sweep-interval", "Sweep this often, e.g. 1m, 5s"),
    memoryHigh: sizeFlag(
      "memory-high",
      "Release runtimes, least recently active first, once their total RSS reaches this, e.g. 6GiB (with --memory-low)"
    ),
    memoryLow: sizeFlag("memory-low", "...until their total RSS is at most this, e.g. 4GiB (with --memory-high)"),
    minAvailable: sizeFlag(
      "min-available",
      "Release runtimes, least recently active first, while the host's available memory is below this, e.g. 1GiB"
    ),
    maxResident: Flag.Int("max-resident").pipe(
      Flag.withDescription("At most this many resident runtimes: release the least recently active beyond it"),
      Flag.optional
    ),
    daemonIdleTimeout: durationFlag(
      "daemon-idle-timeout",
      `Retire the whole daemon after this long of proven inactivity, e.g. 1h, 30m; 0s for never (default: never). A retired daemon exits ${retiredExitCode}`
    ),
    printSystemdUnit: Flag.Boolean("print-systemd-unit").pipe(Flag.withDescription(
      "Print a systemd user unit (Type=notify) that runs this home's daemon, instead of running it"
    ), Flag.withDefault(false))
  },
  Effect.fn(function*(flags) {
    const root = path.resolve(yield* homeDirectory)
    if (flags.printSystemdUnit) {
      const { printSystemdUnit } = yield* Effect.promise(() => import("./runDaemon.ts"))
      return yield* printSystemdUnit(root)
    }
    const { runDaemon } = yield* Effect.promise(() => import("./runDaemon.ts"))
    yield* runDaemon(root, {
      port: Option.getOrUndefined(flags.port),
      host: Option.getOrUndefined(flags.host),
      idlePeriod: Option.getOrUndefined(flags.idlePeriod),
      sweepInterval: Option.getOrUndefined(flags.sweepInterval),
      memoryHigh: Option.getOrUndefined(flags.memoryHigh),
      memoryLow: Option.getOrUndefined(flags.memoryLow),
      minAvailable: Option.getOrUndefined(flags.minAvailable),
      maxResident: Option.getOrUndefined(flags.maxResident)
    }, Option.getOrUndefined(flags.daemonIdleTimeout), daemonOutcome).pipe(withLogFormat)
  })
).pipe(examples("daemon"), Command.withDescription(
  `Run the daemon (until SIGINT, SIGTERM or SIGHUP, or until it retires itself: exit code ${retiredExitCode})`
))

// ---- talking to a daemon -----------------------------------------------------------------------


/** Reads a token file for a client; the message says what to do when it is unusable. */
const readClientToken = (tokenFile: string, restart: string) =>
  Effect.gen(function*() {
    const token = yield* Effect.try({
      try: () => fs.readFileSync(tokenFile, "utf8").trim(),
      catch: (error) =>
        new UsageError({
          message: `Cannot read the API token file ${tokenFile}: ${error instanceof Error ? error.message : String(error)}`
        })
    })
    const problem = tokenProblem(token)
    if (problem !== undefined) {
      return yield* new UsageError({ message: `The API token file ${tokenFile} ${problem}. Delete it and ${restart} to have a new one made` })
    }
    return token
  })

/** Where the hub of the hub home listens, and its token. */
const hubConnection = Effect.gen(function*() {
  const hubHome = yield* hubHomeDirectory
  const address = readHubAddress(hubHome)
  // The token goes only to the process that wrote the address: alive, with the recorded start time.
  if (Option.isNone(address) || !recordedProcessAlive(address.value)) {
    return yield* new UsageError({ message: `No hub is running for ${hubHome}. Start one with: quiesce hub` })
  }
  const token = yield* readClientToken(hubTokenFile(hubHome), "restart the hub")
  return { baseUrl: `http://${address.value.host}:${address.value.port}`, token }
})

/** A typed client of the hub's own API. */
const hubClient = Effect.flatMap(hubConnection, ({ baseUrl, token }) =>
  HttpApiClient.make(HubApi, { baseUrl, transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token)) }))

/** Where the daemon of the home listens, and its token, from its record (it counts only while its process lives). */
const daemonConnection = Effect.gen(function*() {
  const { identity: listening, root } = yield* runningDaemon
  const tokenFile = path.join(root, "token")
  if (!fs.existsSync(tokenFile)) {
    return yield* new UsageError({
      message: `The API token file ${tokenFile} was deleted while the daemon (pid ${listening.pid}) runs. ` +
        `Restart the daemon (quiesce --home ${root} daemon) to have a new one made`
    })
  }
  const token = yield* readClientToken(tokenFile, "restart the daemon")
  const host = listening.host === "0.0.0.0" ? "127.0.0.1" : listening.host.includes(":") ? `[${listening.host}]` : listening.host
  return { baseUrl: `http://${host}:${listening.port}`, token }
})

/**
 * A typed client for the daemon of the home, authenticated with its token; with `--hub NAME`, the
 * same API through the hub (`/v1/…` becomes `/v1/homes/NAME/…`), authenticated with the hub's.
 */
const client = Effect.gen(function*() {
  const name = yield* viaHub
  if (Option.isSome(name)) {
    const { baseUrl, token } = yield* hubConnection
    const prefix = `/v1/homes/${encodeURIComponent(name.value)}/`
    return yield* HttpApiClient.make(QuiesceApiViaHub, {
      baseUrl,
      transformClient: HttpClient.mapRequest((request) =>
        HttpClientRequest.bearerToken(HttpClientRequest.updateUrl(request, (url) => url.replace("/v1/", prefix)), token)
      )
    })
  }
  const { baseUrl, token } = yield* daemonConnection
  return yield* HttpApiClient.make(QuiesceApiViaHub, {
    baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token))
  })
})

/**
 * Prints a one-time login link for a page: the URL alone on stdout (to hand to a browser), what it
 * is on stderr. `next` is the page the login goes on to.
 */
const printLoginLink = (baseUrl: string, link: LoginLink, next: string | undefined) =>
  Effect.gen(function*() {
    const url = new URL(link.path, baseUrl)
    if (next !== undefined) url.searchParams.set("next", next)
    yield* Console.error(`Open this link in a browser on this machine; it signs in once, until ${new Date(link.expiresAt).toLocaleTimeString()}:`)
    yield* Console.log(url.href)
  })

const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/** Rows of cells (the first a header) in aligned columns. */
const printColumns = (table: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => row[column]!.length)))
  return Effect.forEach(table, (cells) => Console.log(cells.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()), {
    discard: true
  })
}

/** When a runtime could be released: "-" when never while blocked, "now" once due, else how soon. */
const releaseIn = (at: string | null) => at === null ? "-" : Date.parse(at) <= Date.now() ? "now" : relative(at)

const jsonFlag = (what: string) => Flag.Boolean("json").pipe(Flag.withDescription(`Print ${what} as JSON`), Flag.withDefault(false))

/** How long ago (or until) an ISO time is, for people. */
const relative = (iso: string) => {
  const seconds = Math.round((Date.parse(iso) - Date.now()) / 1000)
  const span = Math.abs(seconds) < 120 ? `${Math.abs(seconds)}s` : Math.abs(seconds) < 7200
    ? `${Math.round(Math.abs(seconds) / 60)}m`
    : `${Math.round(Math.abs(seconds) / 3600)}h`
  return seconds >= 0 ? `in ${span}` : `${span} ago`
}

/** A span of seconds for people: "42s", "5m 3s", "2h 10m", "3d 4h". */
const duration = (seconds: number) => {
  const s = Math.max(0, Math.round(seconds))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`
}

const blockerList = (blockers: ReadonlyArray<{ readonly category: string; readonly agentId?: string }>) =>
  blockers.length === 0 ? "none" : blockers.map((b) => `${b.category}${b.agentId === undefined ? "" : ` (${b.agentId})`}`).join(", ")

const mib = (bytes: number | null) => bytes === null ? "-" : `${(bytes / 1024 / 1024).toFixed(1)} MiB`

/** A turn that failed or was interrupted, told to the user: the message, exit code 1. */
class TurnUnsuccessful extends Schema.TaggedError<TurnUnsuccessful>()("TurnUnsuccessful", { message: Schema.String }) {}

/**
 * A prompt's answer: with `--wait`, the reply of a completed turn; without, the receipt as JSON.
 * A failed or interrupted turn is an error either way (its receipt is printed first without `--wait`).
 */
const reportTurn = (result: PromptResult, wait: boolean) =>
  Effect.gen(function*() {
    if (!wait) yield* printJson(result)
    if (result.state === "failed" || result.state === "interrupted") {
      return yield* new TurnUnsuccessful({
        message: `turn ${result.turnId} ${result.state}: ${result.error?.message ?? "no reason given"}`
      })
    }
    // The reply as the agent gave it, without doubling its last newline.
    if (wait) yield* Console.log((result.output ?? "").replace(/\n$/, ""))
  })

/** A close refused because it would end work, told to the user: what, and how to force it; exit code 1. */
class CloseRefused extends Schema.TaggedError<CloseRefused>()("CloseRefused", { message: Schema.String }) {}

const agents = Command.make("agents").pipe(
  examples("agents"),
  Command.withDescription("Create and inspect agents"),
  Command.withSubcommands([
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
    ).pipe(examples("agents create"), Command.withDescription(
      "Create an agent; prints its id as JSON"
    )),
    Command.make(
      "list",
      { json: jsonFlag("the agents") },
      Effect.fn(function*({ json }) {
        const api = yield* client
        const list = yield* api.agents.list()
        if (json) return yield* printJson(list)
        if (list.length === 0) return yield* Console.log("no agents yet: quiesce agents create")
        yield* printColumns([
          ["AGENT", "PROVIDER", "STATE", "LAST ACTIVE", "LABELS", "CWD"],
          ...list.map((agent) => [
            agent.agentId,
            agent.providerAvailable ? agent.provider : `${agent.provider} (not configured)`,
            agent.resident
              ? `resident${agent.pid === null ? "" : ` (pid ${agent.pid})`}`
              : agent.sessionId === null ? "released (no session to resume)" : "released",
            relative(agent.lastActivityAt),
            Object.entries(agent.labels).map(([key, value]) => `${key}=${value}`).join(",") || "-",
            agent.cwd
          ])
        ])
      })
    ).pipe(examples("agents list"), Command.withDescription("Every agent of the daemon: provider, resident or released, last activity, labels")),
    Command.make(
      "delete",
      {
        agent: Argument.String("agent"),
        force: Flag.Boolean("force").pipe(
          Flag.withDescription("Delete it even though that ends its runtime's work (blockers, work its provider's veto names)"),
          Flag.withDefault(false)
        )
      },
      Effect.fn(function*({ agent, force }) {
        const api = yield* client
        const deleted = yield* api.agents.delete({ params: { id: agent }, query: force ? { force: "true" } : {} }).pipe(
          Effect.catchTag("AgentDeleteRefused", (refused) =>
            new CloseRefused({
              message: `${agent} was not deleted: its runtime has work a delete would end: ${stakesLines(agent, refused).join("; ")}. ` +
                `To end it: quiesce agents delete ${agent} --force`
            }))
        )
        const ended = stakesLines(agent, deleted.ended)
        yield* Console.log(
          ended.length === 0
            ? `deleted ${agent}: its runtime ended, its record and turns are gone`
            : `deleted ${agent} by force, ending: ${ended.join("; ")}; its record and turns are gone`
        )
      })
    ).pipe(examples("agents delete"), Command.withDescription(
      "Delete an agent: end its runtime and forget it and its turns. Refused (exit 1, naming its blockers and its provider's " +
        "veto) when that would end its runtime's work, unless --force; refused while a turn of it has not ended, forced or not"
    )),
    Command.make(
      "close",
      {
        agent: Argument.String("agent"),
        force: Flag.Boolean("force").pipe(
          Flag.withDescription("Close it even though that ends its work (blockers, work its provider's veto names)"),
          Flag.withDefault(false)
        )
      },
      Effect.fn(function*({ agent, force }) {
        const api = yield* client
        const closed = yield* api.agents.close({ params: { id: agent }, query: force ? { force: "true" } : {} }).pipe(
          Effect.catchTag("RuntimeCloseRefused", (refused) =>
            new CloseRefused({
              message: `${agent} was not closed: it has work a close would end: ${stakesLines(agent, refused).join("; ")}. ` +
                `To end it: quiesce agents close ${agent} --force`
            }))
        )
        const ended = stakesLines(agent, closed.ended)
        yield* Console.log(
          ended.length === 0
            ? `closed ${agent}: its runtime is released; the next prompt resumes its session`
            : `closed ${agent} by force, ending: ${ended.join("; ")}; the next prompt resumes its session`
        )
      })
    ).pipe(examples("agents close"), Command.withDescription(
      "Release the agent's runtime now; the next prompt resumes its session. Refused (exit 1, naming its blockers and its " +
        "provider's veto) when that would end work, unless --force"
    )),
    Command.make(
      "show",
      { agent: Argument.String("agent") },
      ({ agent }) => Effect.flatMap(client, (api) => Effect.flatMap(api.agents.get({ params: { id: agent } }), printJson))
    ).pipe(examples("agents show"), Command.withDescription(
      "One agent as JSON: provider, session, resident or not, pid, labels, and the permissions it waits on"
    ))
  ])
)

const retryableTags: ReadonlySet<string> = new Set([
  "HttpClientError",
  "ShuttingDown",
  "DaemonRetiring",
  "DaemonUnavailable",
  "HomeStopped",
  "DaemonStartFailed"
])

const prompt = Command.make(
  "prompt",
  {
    agent: Argument.String("agent"),
    text: Argument.String("text"),
    wait: Flag.Boolean("wait").pipe(Flag.withDescription("Wait for the turn's reply"), Flag.withDefault(false)),
    clientMessageId: Flag.String("client-message-id").pipe(
      Flag.withDescription("Your id for this prompt: repeating it returns the same turn, never a second one (default: a new random id, printed on a failure)"),
      Flag.optional
    )
  },
  Effect.fn(function*({ agent, clientMessageId, text, wait }) {
    const api = yield* client
    // Always an id: when the answer is lost (a timeout, a daemon that went away), repeating the
    // prompt with it returns the same turn instead of running it again.
    const id = Option.getOrElse(clientMessageId, () => `cli-${randomBytes(12).toString("hex")}`)
    const result = yield* api.agents.prompt({ params: { id: agent }, payload: { text, wait, clientMessageId: id } }).pipe(
      // Where the prompt may have been accepted, or would be on a retry: say how to repeat it.
      Effect.tapError((error) =>
        retryableTags.has(error._tag)
          ? Console.error(`quiesce: the prompt's client message id is ${id}: repeat it with --client-message-id ${id} to get the same turn`)
          : Effect.void
      )
    )
    yield* reportTurn(result, wait)
  })
).pipe(examples("prompt"), Command.withDescription(
  "Send a prompt; a released agent is resumed first. With --wait, prints the reply; a failed or interrupted turn exits 1. " +
    'A prompt that starts with "-" goes after --: quiesce prompt AGENT --wait -- "-n is a flag of echo"'
))

const turns = Command.make("turns").pipe(
  examples("turns"),
  Command.withDescription("Read the turns prompts started"),
  Command.withSubcommands([
    Command.make(
      "show",
      { agent: Argument.String("agent"), turn: Argument.String("turn") },
      ({ agent, turn }) =>
        Effect.flatMap(client, (api) =>
          Effect.flatMap(api.agents.turn({ params: { id: agent, turnId: turn } }), printJson))
    ).pipe(examples("turns show"), Command.withDescription("One turn: its state, reply or error, and times")),
    Command.make(
      "list",
      {
        agent: Argument.String("agent"),
        limit: Flag.Int("limit").pipe(Flag.withDescription("How many, newest first (1 to 100)"), Flag.withDefault(20)),
        json: jsonFlag("the turns")
      },
      Effect.fn(function*({ agent, json, limit }) {
        const api = yield* client
        const rows = yield* api.agents.turns({ params: { id: agent }, query: { limit } })
        if (json) return yield* printJson(rows)
        if (rows.length === 0) return yield* Console.log(`no turn yet: ${agent} has not been prompted`)
        yield* printColumns([
          ["TURN", "STATE", "ACCEPTED", "PROMPT"],
          ...rows.map((row) => [row.turnId, row.state, relative(row.acceptedAt), promptLine(row.text)])
        ])
      })
    ).pipe(examples("turns list"), Command.withDescription("An agent's recent turns, newest first"))
  ])
)

/** A prompt in one short line, for a table. */
const promptLine = (text: string) => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > 60 ? `${line.slice(0, 59)}…` : line
}

const interrupt = Command.make(
  "interrupt",
  { agent: Argument.String("agent") },
  ({ agent }) => Effect.flatMap(client, (api) => api.agents.interrupt({ params: { id: agent } }))
).pipe(examples("interrupt"), Command.withDescription("Interrupt the agent's running turn, if any"))

/** `permit` and `deny`: answers one of the permissions `agents show` lists as pending. */
const answerPermission = (name: "permit" | "deny") =>
  Command.make(
    name,
    { agent: Argument.String("agent"), permission: Argument.String("permission") },
    ({ agent, permission }) =>
      Effect.flatMap(client, (api) =>
        api.agents.answerPermission({
          params: { id: agent, permissionId: permission },
          payload: { allow: name === "permit" }
        }))
  ).pipe(examples(name), Command.withDescription(
    name === "permit"
      ? "Allow a permission the agent is waiting on (see pendingPermissions in agents show)"
      : "Refuse a permission the agent is waiting on"
  ))

const runtimes = Command.make(
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
).pipe(examples("runtimes"), Command.withDescription("Every resident runtime, and why it is still resident (each blocker, a provider's veto and its reason)"))

/** Usage against the memory budget, for people; "none" without one. */
const memoryBudgetLine = (memory: MemoryView | null): string => {
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
    : `under pressure since ${memory.pressure.since} (${relative(memory.pressure.since)}): ${memory.pressure.causes.join(", ")}`
  const held = memory.held.length === 0
    ? ""
    : `; nothing more can be released: held by ${memory.held.map((holder) => `${holder.agentId} (${holder.rssBytes === null ? "unmeasured" : formatByteSize(holder.rssBytes)}${holder.veto === null ? "" : `, vetoed: ${holder.veto}`}${holder.blockers.length === 0 ? "" : `, ${holder.blockers.map((b) => b.kind).join(", ")}`})`).join(", ")}`
  return `${parts.join("; ")}; ${pressure}${held}`
}

/** The memory of every listed runtime, saying how much of it was measured (an unmeasured one is not zero). */
const memoryTotalLine = (rows: ReadonlyArray<{ readonly rssBytes: number | null; readonly measuredProcesses: number | null }>) => {
  const measured = rows.filter((row) => row.rssBytes !== null)
  const bytes = measured.reduce((sum, row) => sum + (row.rssBytes ?? 0), 0)
  const processes = measured.reduce((sum, row) => sum + (row.measuredProcesses ?? 0), 0)
  const unmeasured = rows.length - measured.length
  return `total ${(bytes / 1024 / 1024).toFixed(1)} MiB in ${processes} measured process${processes === 1 ? "" : "es"}` +
    (unmeasured === 0 ? "" : `; ${unmeasured} runtime${unmeasured === 1 ? "" : "s"} unmeasured`)
}

/** What keeps a runtime resident, for people: each blocker, and a probe that did not permit, with its reason. */
const whyResident = (row: {
  readonly agentId: string
  readonly blockers: ReadonlyArray<MemberBlocker>
  readonly lastProbe?: ProbeView | null | undefined
}) => stakesLines(row.agentId, { blockers: row.blockers, veto: refusalOf(row.lastProbe) })

const explain = Command.make(
  "explain",
  { agent: Argument.String("agent"), json: jsonFlag("the explanation") },
  Effect.fn(function*({ agent, json }) {
    const api = yield* client
    const row = yield* api.runtimes.explain({ params: { id: agent } }).pipe(
      Effect.catchTag("RuntimeNotFound", () =>
        new UsageError({ message: `${agent} has no live runtime (released, or never started): its next prompt starts one` }))
    )
    if (json) return yield* printJson(row)
    const lines = [
      `agent       ${row.agentId} (${row.provider}, session ${row.sessionId ?? "none yet"})`,
      `process     ${row.pid === null ? "-" : `pid ${row.pid}`}${row.rssBytes === null ? "" : `, ${mib(row.rssBytes)}`}`,
      `family      ${row.family.join(", ")}`,
      `state       ${row.state}`,
      `idle since  ${row.idleSince} (${relative(row.idleSince)})`,
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
      const memory = yield* api.runtimes.memory().pipe(Effect.catchTag("HttpClientError", () => Effect.succeed(null)))
      yield* Console.log(`budget      ${memoryBudgetLine(memory)}`)
    }
  })
).pipe(examples("explain"), Command.withDescription(
  "Why one agent's runtime is still resident: its state, each blocker, its provider's veto and reason, and when it could be released"
))

/** A collect that released nothing, told to the user: why, exit code 1. */
class CollectRefused extends Schema.TaggedError<CollectRefused>()("CollectRefused", { message: Schema.String }) {}

const collect = Command.make(
  "collect",
  { agent: Argument.String("agent") },
  Effect.fn(function*({ agent }) {
    const api = yield* client
    const result = yield* api.runtimes.collect({ params: { id: agent } })
    yield* printJson(result)
    if (result.outcome === "collected") return
    const why = result.outcome === "failed"
      ? `it failed: ${result.error?.message ?? "no reason given"}`
      : whyResident({ agentId: agent, blockers: result.blockers, lastProbe: result.lastProbe }).join(", ") ||
        `it is ${result.state ?? "not releasable"}`
    return yield* new CollectRefused({ message: `${agent} was not released: ${why}` })
  })
).pipe(examples("collect"), Command.withDescription("Release one runtime now if nothing would be lost; otherwise say why and exit 1"))

const sweep = Command.make("sweep", {}, () => Effect.flatMap(client, (api) => Effect.flatMap(api.runtimes.sweep(), printJson))).pipe(
  examples("sweep"),
  Command.withDescription("Run one sweep now")
)

const status = Command.make(
  "status",
  { json: jsonFlag("the status") },
  Effect.fn(function*({ json }) {
    const api = yield* client
    const [view, health, agents, memory] = yield* Effect.all([
      api.daemon.status(),
      api.health(),
      api.agents.list(),
      api.runtimes.memory().pipe(Effect.catchTag("HttpClientError", () => Effect.succeed(null)))
    ], { concurrency: "unbounded" })
    const counts = { agents: agents.length, resident: agents.filter((agent) => agent.resident).length }
    if (json) return yield* printJson({ ...view, uptimeSeconds: health.uptimeSeconds, ...counts, memory })
    const timeout = view.idleTimeout.millis === null
      ? `none (${view.idleTimeout.value === null ? "omitted" : `${view.idleTimeout.value}, ${view.idleTimeout.source}`})`
      : `${view.idleTimeout.value} (from ${view.idleTimeout.source})`
    const lines = [
      `daemon      pid ${view.pid}, instance ${view.instanceId}, ${view.host}:${view.port}, quiesce ${view.packageVersion} (protocol ${view.protocolVersion})`,
      `up          ${duration(health.uptimeSeconds)}; ${counts.agents} agent${counts.agents === 1 ? "" : "s"}, ${counts.resident} resident`,
      `phase       ${view.phase}${view.failure === null ? "" : ` — ${view.failure.kind}: ${view.failure.message}`}`,
      `memory      ${memoryBudgetLine(memory)}`,
      `idle timer  ${timeout}`,
      `idle since  ${view.idleSince} (${relative(view.idleSince)})`,
      `retires     ${view.deadline === null ? "-" : `${view.deadline} (${relative(view.deadline)}) if nothing happens`}`,
      `blockers    ${blockerList(view.blockers)}`,
      `last try    ${
        view.lastAttempt === null
          ? "-"
          : `${view.lastAttempt.at} (${relative(view.lastAttempt.at)}), ${view.lastAttempt.trigger}: ${view.lastAttempt.outcome}${
            view.lastAttempt.outcome === "refused" ? ` by ${blockerList(view.lastAttempt.blockers)}` : ""
          }${view.lastAttempt.failure === null ? "" : ` (${view.lastAttempt.failure.kind}: ${view.lastAttempt.failure.message})`}`
      }`
    ]
    for (const line of lines) yield* Console.log(line)
  })
).pipe(examples("status"), Command.withDescription(
  "The daemon's identity, version, uptime, agents (and how many are resident), phase, idle timer, blockers and last retirement attempt"
))

/** The home's daemon as its record names it, while that process lives. */
const runningDaemon = Effect.gen(function*() {
  const root = path.resolve(yield* homeDirectory)
  const record = readRendezvous(root)
  if (Option.isNone(record) || !recordedProcessAlive(record.value)) {
    return yield* new UsageError({
      message: `No daemon is running for ${root}${
        Option.isSome(record) ? ` (its record names pid ${record.value.pid}, which has exited)` : ""
      }. Start one with: quiesce --home ${root} daemon`
    })
  }
  return { root, identity: record.value }
})

const stop = Command.make(
  "stop",
  {},
  Effect.fn(function*() {
    const { identity, root } = yield* runningDaemon
    // Exited (a zombie its parent has not reaped yet counts), or its pid is another process's now.
    const gone = () => !recordedProcessAlive(identity)
    process.kill(identity.pid, "SIGTERM")
    // Its own deadline ends an orderly shutdown that hangs; this waits a little beyond it.
    const until = Date.now() + (identity.shutdownDeadlineMillis ?? unrecordedShutdownDeadlineMillis) + 5_000
    while (!gone() && Date.now() < until) yield* Effect.sleep("100 millis")
    if (!gone()) return yield* new UsageError({ message: `The daemon of ${root} (pid ${identity.pid}) did not stop in time` })
    yield* Console.log(`stopped the daemon of ${root} (pid ${identity.pid}): its runtimes were released resumably`)
  })
).pipe(examples("stop"), Command.withDescription("Stop the home's daemon in order (as SIGTERM does): new work is refused, runtimes are released resumably"))

const logs = Command.make(
  "logs",
  {
    lines: Flag.Int("lines").pipe(Flag.withDescription("How many of the last lines to print (default 50)"), Flag.withDefault(50)),
    follow: Flag.Boolean("follow").pipe(Flag.withDescription("Keep printing lines as the daemon writes them, until Ctrl-C"), Flag.withDefault(false)),
    json: jsonFlag("each line as the daemon wrote it (one JSON object per line)")
  },
  Effect.fn(function*({ follow, json, lines }) {
    const root = path.resolve(yield* homeDirectory)
    const file = logFile(root)
    if (!fs.existsSync(file)) {
      return yield* new UsageError({ message: `${file} does not exist: no daemon has run in ${root} yet (start one with: quiesce --home ${root} daemon)` })
    }
    const show = (line: string) => Console.log(json ? line : formatLogLine(line))
    yield* Effect.forEach(lastLogLines(root, Math.max(0, lines)), show, { discard: true })
    if (!follow) return
    // Polled: what was appended since. Once the log rotated, the rest of the old file (now
    // daemon.log.1) comes first, then the new file from its start.
    let offset = logSize(file)
    let pending = ""
    while (true) {
      yield* Effect.sleep("250 millis")
      const size = logSize(file)
      let text = pending
      if (size < offset) {
        text += readLogFrom(rotatedLogFile(root, 1), offset)
        offset = 0
      }
      const appended = readLogFrom(file, offset)
      offset += Buffer.byteLength(appended)
      text += appended
      if (text === pending) continue
      const complete = text.split("\n")
      pending = complete.pop() ?? ""
      yield* Effect.forEach(complete.filter((line) => line !== ""), show, { discard: true })
    }
  })
).pipe(examples("logs"), Command.withDescription(
  `The daemon's log in its home (daemon.log, rotated at ${defaultLogFileOptions.maxBytes / 1024 / 1024} MiB, ${defaultLogFileOptions.keep} kept), ` +
    "whether or not it runs"
))

const retire = Command.make(
  "retire",
  {},
  Effect.fn(function*() {
    const api = yield* client
    const attempt = yield* api.daemon.retire()
    yield* Console.log(
      `retirement committed at ${attempt.at}: every runtime released resumably; the daemon exits once the requests ` +
        "in flight have left, and the next message brings it back"
    )
  })
).pipe(examples("retire"), Command.withDescription(
  "Retire the daemon now if nothing would be lost (every check kept, the idle time skipped), else say what blocks it"
))

const config = Command.make("config").pipe(
  examples("config"),
  Command.withDescription("The home's configuration file, config.json"),
  Command.withSubcommands([
    Command.make(
      "check",
      {},
      Effect.fn(function*() {
        const root = path.resolve(yield* homeDirectory)
        const file = path.join(root, "config.json")
        const { loadConfig, missingProviderCommands } = yield* Effect.promise(() => import("../layers/host/loadConfig.ts"))
        const checked = yield* loadConfig(file)
        if (!fs.existsSync(root)) {
          yield* Console.log(`${root} does not exist yet: a daemon creates it on its first start (quiesce --home ${root} daemon)`)
        }
        // A provider whose command cannot be found fails every agent that names it.
        const missing = missingProviderCommands(checked)
        if (missing.length > 0) return yield* new UsageError({ message: `${file}: ${missing.join("; ")}` })
        yield* Console.log(`${file}: ok`)
      })
    ).pipe(examples("config check"), Command.withDescription("Validate the configuration file: its shape, and that every provider's command can be found")),
    Command.make(
      "reload",
      { json: jsonFlag("what was applied") },
      Effect.fn(function*({ json }) {
        const api = yield* client
        const reloaded = yield* api.reserve.reload()
        if (json) return yield* printJson(reloaded)
        yield* Console.log(
          reloaded.applied.length === 0
            ? "no warm reserve to apply"
            : `warm reserves: ${reloaded.applied.map(({ provider, warmReserve }) => `${provider} ${warmReserve}`).join(", ")}`
        )
        if (reloaded.needsRestart.length > 0) {
          yield* Console.log(`changed, applied at the next start (quiesce stop, then start the daemon): ${reloaded.needsRestart.join(", ")}`)
        }
      })
    ).pipe(examples("config reload"), Command.withDescription(
      "Reread config.json in the running daemon: warm reserves are applied at once; any other change is named, for a restart"
    ))
  ])
)

const warmReserve = Command.make(
  "warm-reserve",
  {
    provider: Argument.String("provider").pipe(Argument.optional),
    size: Argument.Int("size").pipe(Argument.optional),
    json: jsonFlag("the reserves")
  },
  Effect.fn(function*({ json, provider, size }) {
    const api = yield* client
    if (Option.isSome(provider) && Option.isNone(size)) {
      return yield* new UsageError({ message: `Give the size too: quiesce warm-reserve ${provider.value} <size> (0 closes them)` })
    }
    const rows = Option.isSome(provider) && Option.isSome(size)
      ? [yield* api.reserve.resize({ params: { provider: provider.value }, payload: { target: size.value } })]
      : yield* api.reserve.list()
    if (json) return yield* printJson(rows)
    if (rows.length === 0) return yield* Console.log("no warm reserve: every provider starts a process per runtime (set providers.<id>.warmReserve)")
    yield* printColumns([
      ["PROVIDER", "TARGET", "READY", "STARTING", "PIDS", "RSS", "LAST FAILURE"],
      ...rows.map((row) => [
        row.provider,
        String(row.target),
        String(row.ready.length),
        String(row.starting),
        row.ready.map((process) => process.pid).join(",") || "-",
        mebibytes(row.ready),
        row.lastFailure ?? "-"
      ])
    ])
  })
).pipe(examples("warm-reserve"), Command.withDescription(
  "Each provider's warm reserve (started processes without a session, taken by the next create or resume); with a provider and a size, sets it"
))

/** The summed memory of processes, or "-" when none was measured. */
const mebibytes = (processes: ReadonlyArray<{ readonly rssBytes: number | null }>) => {
  const measured = processes.filter((process) => process.rssBytes !== null)
  return mib(measured.length === 0 ? null : measured.reduce((sum, process) => sum + (process.rssBytes ?? 0), 0))
}

// ---- the hub ----------------------------------------------------------------------------------

const hubCommand = Command.make(
  "hub",
  { port: Flag.Int("port").pipe(Flag.withDescription(`HTTP port on 127.0.0.1 (default ${defaultHubPort})`), Flag.optional) },
  Effect.fn(function*({ port }) {
    const hubHome = yield* hubHomeDirectory
    const { runHub } = yield* Effect.promise(() => import("./hub.ts"))
    // A hub stopped by a signal (SIGINT, SIGTERM, SIGHUP) has shut down in order, as a daemon has: exit 0.
    daemonOutcome.running = true
    yield* runHub({ hubHome, port: Option.getOrElse(port, () => defaultHubPort) }).pipe(
      Effect.onInterrupt(() => Effect.logInfo("Quiesce hub stopped; its daemons keep running")),
      withLogFormat
    )
  })
).pipe(
  examples("hub"),
  Command.withDescription(
    "Run the hub: it starts each managed home's daemon on the next mutation, routes /v1/homes/NAME/… to it, and lists what is resident"
  ),
  Command.withSubcommands([
    Command.make(
      "add",
      { name: Argument.String("name"), dir: Argument.String("dir") },
      Effect.fn(function*({ dir, name }) {
        const hubHome = yield* hubHomeDirectory
        yield* addHome(hubHome, name, dir)
        yield* Console.log(`${name}: ${path.resolve(dir)} (in ${hubConfigFile(hubHome)})`)
      })
    ).pipe(examples("hub add"), Command.withDescription("Manage a daemon home under a name")),
    Command.make(
      "remove",
      { name: Argument.String("name") },
      Effect.fn(function*({ name }) {
        yield* removeHome(yield* hubHomeDirectory, name)
        yield* Console.log(`${name}: no longer managed (its home and any running daemon are left as they are)`)
      })
    ).pipe(examples("hub remove"), Command.withDescription("Stop managing a home (nothing is deleted or stopped)")),
    Command.make(
      "list",
      { json: jsonFlag("hub.json's homes and the daemons' idle timeout") },
      Effect.fn(function*({ json }) {
        const hubHome = yield* hubHomeDirectory
        const config = yield* readHubConfig(hubHome)
        const timeout = hubDefault(config)
        if (json) return yield* printJson({ daemonIdleTimeout: timeout, homes: config.homes })
        yield* Console.log(`daemon idle timeout ${timeout.value} (${timeout.source}); ${hubConfigFile(hubHome)}`)
        for (const entry of config.homes) {
          yield* Console.log(`${entry.name}  ${entry.dir}${entry.archived === true ? "  (archived)" : ""}`)
        }
      })
    ).pipe(examples("hub list"), Command.withDescription("The homes in hub.json")),
    Command.make(
      "archive",
      { name: Argument.String("name") },
      Effect.fn(function*({ name }) {
        yield* setArchived(yield* hubHomeDirectory, name, true)
        yield* Console.log(`${name}: archived (its data is kept; new work is refused)`)
      })
    ).pipe(examples("hub archive"), Command.withDescription("Archive a home: its data is kept and readable, new work is refused")),
    Command.make(
      "unarchive",
      { name: Argument.String("name") },
      Effect.fn(function*({ name }) {
        yield* setArchived(yield* hubHomeDirectory, name, false)
        yield* Console.log(`${name}: accepts work again`)
      })
    ).pipe(examples("hub unarchive"), Command.withDescription("Accept work for an archived home again")),
    Command.make(
      "open",
      {},
      Effect.fn(function*() {
        const { baseUrl } = yield* hubConnection
        const link = yield* Effect.flatMap(hubClient, (api) => api.session.link())
        yield* printLoginLink(baseUrl, link, undefined)
      })
    ).pipe(examples("hub open"), Command.withDescription("Print a one-time link that signs a browser in to the hub's page (the resident inventory)"))
  ])
)

const timeoutText = (timeout: DaemonRow["idleTimeout"]) =>
  timeout === null ? "-" : timeout.millis === null ? `none (${timeout.value ?? "omitted"})` : `${timeout.value} (${timeout.source})`

/** The inventory row of a home, for an action on the identity it shows. */
const rowNamed = (name: string) =>
  Effect.gen(function*() {
    const api = yield* hubClient
    const inventory = yield* api.daemons.list()
    const row = inventory.daemons.find((candidate) => candidate.name === name)
    if (row === undefined) return yield* new UsageError({ message: `The hub manages no home named "${name}" (see quiesce hub list)` })
    return { api, row }
  })

const identityOf = (row: DaemonRow) =>
  row.pid === null || row.instanceId === null
    ? Effect.fail(new UsageError({ message: `${row.name} has no daemon running (${row.state}): ${row.note}` }))
    : Effect.succeed({ pid: row.pid, startTime: row.startTime, instanceId: row.instanceId })

const daemons = Command.make(
  "daemons",
  { json: jsonFlag("the inventory") },
  Effect.fn(function*({ json }) {
    const api = yield* hubClient
    const inventory = yield* api.daemons.list()
    if (json) return yield* printJson(inventory)
    yield* Console.log(
      `hub default idle timeout ${inventory.hubDefaultIdleTimeout.value} (${inventory.hubDefaultIdleTimeout.source}); protocol ${inventory.protocolVersion}`
    )
    const table = [
      ["NAME", "STATE", "PID", "STARTED", "PROTOCOL", "TIMEOUT", "PHASE", "RETIRES", "BLOCKERS", "MEMORY"],
      ...inventory.daemons.map((row) => [
        `${row.name}${row.archived ? " (archived)" : ""}`,
        row.state,
        row.pid === null ? "-" : String(row.pid),
        row.startedAt === null ? "-" : relative(row.startedAt),
        row.protocolVersion === null ? "-" : `${row.protocolVersion}${row.compatible === false ? " (incompatible)" : ""}`,
        timeoutText(row.idleTimeout),
        row.phase ?? "-",
        row.deadline === null ? "-" : relative(row.deadline),
        row.blockers.join(", ") || "-",
        mib(row.memoryBytes)
      ])
    ]
    yield* printColumns(table)
    for (const row of inventory.daemons) {
      const attempt = row.lastAttempt === null
        ? ""
        : ` Last attempt ${relative(row.lastAttempt.at)}: ${row.lastAttempt.outcome}${
          row.lastAttempt.blockers.length === 0 ? "" : ` by ${blockerList(row.lastAttempt.blockers)}`
        }.`
      yield* Console.log(`${row.name}: ${row.note}${attempt}`)
    }
  })
).pipe(
  examples("daemons"),
  Command.withDescription("The hub's resident inventory: one row per home's daemon, what it armed, and what keeps it resident"),
  Command.withSubcommands([
    Command.make(
      "retire",
      { name: Argument.String("name") },
      Effect.fn(function*({ name }) {
        const { api, row } = yield* rowNamed(name)
        const attempt = yield* api.daemons.retire({ params: { name }, payload: yield* identityOf(row) })
        yield* Console.log(`${name}: retirement committed at ${attempt.at}; the next mutation through the hub brings it back`)
      })
    ).pipe(examples("daemons retire"), Command.withDescription("Retire a home's daemon now if nothing would be lost; on refusal, print what blocks it")),
    Command.make(
      "stop",
      {
        name: Argument.String("name"),
        confirm: Flag.String("confirm").pipe(
          Flag.withDescription("NAME:PID of the daemon, as `quiesce daemons` shows it: you accept that its work may be interrupted"),
          Flag.optional
        )
      },
      Effect.fn(function*({ confirm, name }) {
        const { api, row } = yield* rowNamed(name)
        const identity = yield* identityOf(row)
        const result = yield* api.daemons.stop({
          params: { name },
          payload: { identity, confirm: Option.getOrElse(confirm, () => "") }
        })
        yield* Console.log(
          `${name}: pid ${result.pid} stopped${result.killed ? " (killed after its grace)" : ""}; it stays stopped until: quiesce daemons resume ${name}`
        )
      })
    ).pipe(examples("daemons stop"), Command.withDescription(
      "Force-stop a home's daemon (running work and watches may be interrupted); it then starts only on resume"
    )),
    Command.make(
      "resume",
      { name: Argument.String("name") },
      Effect.fn(function*({ name }) {
        const api = yield* hubClient
        const row = yield* api.daemons.resume({ params: { name } })
        yield* Console.log(`${name}: ${row.state}${row.pid === null ? "" : `, pid ${row.pid}`}`)
      })
    ).pipe(examples("daemons resume"), Command.withDescription("Start a force-stopped (or retired) home's daemon again"))
  ])
)

const open = Command.make(
  "open",
  {},
  Effect.fn(function*() {
    const name = yield* viaHub
    if (Option.isSome(name)) {
      // The hub's login, going on to that home's page, which the hub serves.
      const { baseUrl } = yield* hubConnection
      const link = yield* Effect.flatMap(hubClient, (api) => api.session.link())
      return yield* printLoginLink(baseUrl, link, `/homes/${encodeURIComponent(name.value)}/`)
    }
    const { baseUrl } = yield* daemonConnection
    const link = yield* Effect.flatMap(client, (api) => api.session.link())
    yield* printLoginLink(baseUrl, link, undefined)
  })
).pipe(examples("open"), Command.withDescription("Print a one-time link that signs a browser in to the daemon's page (agents, runtimes, why each is resident)"))

export const cli = root.pipe(Command.withSubcommands([
  daemon,
  open,
  agents,
  prompt,
  turns,
  interrupt,
  answerPermission("permit"),
  answerPermission("deny"),
  runtimes,
  explain,
  collect,
  sweep,
  warmReserve,
  status,
  stop,
  logs,
  retire,
  config,
  hubCommand,
  daemons
]))

/** Errors the user can act on are printed plainly; the exit code is 1. */
const reportUserErrors = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.catchIf(
      (error): error is E & { readonly message: string } =>
        typeof error === "object" && error !== null && "message" in error && typeof error.message === "string",
      (error) =>
        // The help (and any parse error) is printed already: bare `quiesce` and --help exit 0, a
        // command line that does not parse exits 1.
        CliError.isCliError(error) && error._tag === "ShowHelp"
          ? Effect.sync(() => (process.exitCode = error.errors.length === 0 ? 0 : 1))
          : Console.error(`quiesce: ${error.message}`).pipe(Effect.andThen(Effect.sync(() => (process.exitCode = 1))))
    )
  )

/** A parse error in one line: its first line, with the parser's suggestions if it has any. */
const oneLine = (error: CliError.NonShowHelpErrors) => {
  const first = error.message.split("\n")[0]!.trim()
  const suggestions = Predicate.hasProperty(error, "suggestions") && Array.isArray(error.suggestions)
    ? error.suggestions.filter(Predicate.isString)
    : []
  return suggestions.length === 0 ? first : `${first} (did you mean ${suggestions.join(" or ")}?)`
}

/**
 * A command line that does not parse gets one line per problem and where to read more, on stderr,
 * instead of the whole help page; help and the version print as usual.
 */
const presenter = CliOutput.layerPresenter({
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Effect.forEach(event.errors, (error) => Console.error(`quiesce: ${oneLine(error)}`), { discard: true }).pipe(
        Effect.andThen(Console.error(`quiesce: see: ${event.commandPath.join(" ")} --help`))
      )
      : CliOutput.defaultPresenter.present(event)
})

/** Flags that take a value which may look like a flag: a negative number or duration. */
const valueFlags = new Set(["--port", "--idle-period", "--sweep-interval", "--daemon-idle-timeout"])

/**
 * `--idle-period -5m` is the flag and its value, not two flags: joined as `--idle-period=-5m`,
 * so the value reaches its check (and is refused naming the flag) instead of failing the parse.
 */
export const joinNegativeValues = (args: ReadonlyArray<string>): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--") return [...out, ...args.slice(i)]
    const next = args[i + 1]
    if (valueFlags.has(arg) && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`)
      i++
    } else out.push(arg)
  }
  return out
}

/** Runs the command line of this process. */
export const main = () =>
  Command.runWith(cli, { version: packageVersion })(joinNegativeValues(process.argv.slice(2))).pipe(
    reportUserErrors,
    Effect.provide([NodeServices.layer, NodeHttpClient.layerNodeHttp, presenter]),
    NodeRuntime.runMain({
      // A daemon stopped by a signal has shut down in order: that is success. A retired one says so.
      teardown: (exit, onExit) =>
        daemonOutcome.retired && exit._tag === "Success"
          ? onExit(retiredExitCode)
          : daemonOutcome.running && exit._tag === "Failure" && Cause.hasInterruptsOnly(exit.cause)
          ? onExit(0)
          : Runtime.defaultTeardown(exit, onExit)
    })
  )

if (import.meta.main) main()
