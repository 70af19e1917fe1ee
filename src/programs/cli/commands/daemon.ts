/**
 * The commands of one home's daemon itself: run it (`daemon`), `status`, `stop`, `logs`, `retire`,
 * and `open` its page.
 */
import { Console, Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import * as fs from "node:fs"
import * as path from "node:path"
import { describeIdleTimeout, retiredExitCode, unrecordedShutdownDeadlineMillis } from "../../../domain/retirement.ts"
import { recordedProcessAlive } from "../../../platform/procfs.ts"
import {
  defaultLogFileOptions,
  formatLogLine,
  lastLogLines,
  logFile,
  logSize,
  readLogFrom,
  rotatedLogFile
} from "../../../layers/host/logFile.ts"
import type { DaemonOutcome } from "../../runDaemon.ts"
import { documented } from "../documented.ts"
import {
  client,
  daemonConnection,
  daemonLoginLink,
  hubConnection,
  hubConnectionAt,
  hubLoginLink,
  hubLoginLinkAt,
  managingHub,
  runningDaemon
} from "../connection.ts"
import {
  ago,
  blockerList,
  duration,
  memoryBudgetLine,
  memoryTotalsTable,
  printColumns,
  printJson,
  printLoginLink,
  relative
} from "../render.ts"
import { homeDirectory, jsonFlag, viaHub, withLogFormat } from "../root.ts"
import { UsageError } from "../usageError.ts"

const durationFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)

const sizeFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)

/** A flag's default: the setting of the home's config.json at `key`, else `otherwise`. */
const fromConfig = (key: string, otherwise: string) => `default: ${key} of config.json, else ${otherwise}`

/** How the daemon run went, for the exit code. */
export const daemonOutcome: DaemonOutcome = { running: false, retired: false }

/** `quiesce daemon`: runs the home's daemon, or prints a systemd unit that runs it. */
export const daemon = Command.make(
  "daemon",
  {
    port: Flag.Int("port").pipe(Flag.withDescription(`HTTP port; 0 takes any free one (${fromConfig("daemon.port", "7377")})`), Flag.optional),
    host: Flag.String("host").pipe(Flag.withDescription(`Address to listen on (${fromConfig("daemon.host", "127.0.0.1")})`), Flag.optional),
    idlePeriod: durationFlag("idle-period", `Release runtimes idle this long, e.g. 1h, 10s (${fromConfig("agents.idlePeriod", "1h")})`),
    sweepInterval: durationFlag("sweep-interval", `Sweep this often, e.g. 1m, 5s (${fromConfig("agents.sweepInterval", "1m")})`),
    memoryHigh: sizeFlag(
      "memory-high",
      `Release runtimes, least recently active first, once their total RSS reaches this, e.g. 6GiB (with --memory-low) (${
        fromConfig("agents.memory.high", "none")
      })`
    ),
    memoryLow: sizeFlag(
      "memory-low",
      `...until their total RSS is at most this, e.g. 4GiB (with --memory-high) (${fromConfig("agents.memory.low", "none")})`
    ),
    minAvailable: sizeFlag(
      "min-available",
      `Release runtimes, least recently active first, while the host's available memory is below this, e.g. 1GiB (${
        fromConfig("agents.memory.minAvailable", "none")
      })`
    ),
    maxResident: Flag.Int("max-resident").pipe(
      Flag.withDescription(
        `At most this many resident runtimes: release the least recently active beyond it (${fromConfig("agents.maxResident", "no limit")})`
      ),
      Flag.optional
    ),
    daemonIdleTimeout: durationFlag(
      "daemon-idle-timeout",
      `Retire the whole daemon after this long of proven inactivity, e.g. 1h, 30m; 0s for never (${
        fromConfig("daemon.idleTimeout", "never")
      }; a daemon the hub starts: the hub's daemonIdleTimeout). A retired daemon exits ${retiredExitCode}`
    ),
    printSystemdUnit: Flag.Boolean("print-systemd-unit").pipe(Flag.withDescription(
      "Print a systemd user unit (Type=notify) that runs this home's daemon, instead of running it"
    ), Flag.withDefault(false))
  },
  Effect.fn(function*(flags) {
    const root = path.resolve(yield* homeDirectory)
    if (flags.printSystemdUnit) {
      const { printSystemdUnit } = yield* Effect.promise(() => import("../../runDaemon.ts"))
      return yield* printSystemdUnit(root)
    }
    const { runDaemon } = yield* Effect.promise(() => import("../../runDaemon.ts"))
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
).pipe(
  documented(
    `Run the daemon (until SIGINT, SIGTERM or SIGHUP, or until it retires itself: exit code ${retiredExitCode})`,
    [
      { command: "quiesce daemon", description: "Run the daemon of the default home on 127.0.0.1:7377" },
      { command: "quiesce --home ~/work daemon --idle-period 30m --daemon-idle-timeout 2h", description: "Release runtimes idle 30 minutes; retire after 2 hours idle" },
      { command: "quiesce daemon --memory-high 6GiB --memory-low 4GiB --max-resident 12", description: "Also release the safest runtimes, least recently active first, when memory runs short" }
    ]
  )
)

/** `quiesce status`: the daemon's identity, phase, idle timer and last retirement attempt. */
export const status = Command.make(
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
    const timeout = describeIdleTimeout(view.idleTimeout)
    const lines = [
      `daemon      pid ${view.pid}, instance ${view.instanceId}, ${view.host}:${view.port}, quiesce ${view.packageVersion} (protocol ${view.protocolVersion})`,
      `up          ${duration(health.uptimeSeconds)}; ${counts.agents} agent${counts.agents === 1 ? "" : "s"}, ${counts.resident} resident`,
      `phase       ${view.phase}${view.failure === null ? "" : ` — ${view.failure.kind}: ${view.failure.message}`}`,
      `memory      ${memoryBudgetLine(memory)}`,
      `idle timer  ${timeout}`,
      `idle since  ${view.idleSince} (${ago(view.idleSince)})`,
      `retires     ${view.deadline === null ? "-" : `${view.deadline} (${relative(view.deadline)}) if nothing happens`}`,
      `blockers    ${blockerList(view.blockers)}`,
      `last try    ${
        view.lastAttempt === null
          ? "-"
          : `${view.lastAttempt.at} (${ago(view.lastAttempt.at)}), ${view.lastAttempt.trigger}: ${view.lastAttempt.outcome}${
            view.lastAttempt.outcome === "refused" ? ` by ${blockerList(view.lastAttempt.blockers)}` : ""
          }${view.lastAttempt.failure === null ? "" : ` (${view.lastAttempt.failure.kind}: ${view.lastAttempt.failure.message})`}`
      }`
    ]
    for (const line of lines) yield* Console.log(line)
    if (view.memoryTotals !== undefined) yield* printColumns(memoryTotalsTable(view.memoryTotals, "this home"))
  })
).pipe(
  documented(
    "The daemon's identity, version, uptime, agents (and how many are resident), phase, idle timer, what keeps it resident " +
      "(a provider's veto with its reason and since when), last retirement attempt, and memory resident against released " +
      "(in all, per provider, per label)",
    [
      { command: "quiesce status", description: "Identity, uptime, phase and idle timer of the daemon" },
      { command: "quiesce --home ~/work status --json", description: "Another home's, as JSON" }
    ]
  )
)

/** `quiesce stop`: stops the home's daemon in order and waits for it to exit. */
export const stop = Command.make(
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
).pipe(
  documented(
    "Stop the home's daemon in order (as SIGTERM does): new work is refused, runtimes are released resumably",
    [{ command: "quiesce stop", description: "Stop the daemon in order and wait for it to exit" }]
  )
)

/** `quiesce logs`: the daemon's log, optionally followed. */
export const logs = Command.make(
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
).pipe(
  documented(
    `The daemon's log in its home (daemon.log, rotated at ${defaultLogFileOptions.maxBytes / 1024 / 1024} MiB, ${defaultLogFileOptions.keep} kept), ` +
      "whether or not it runs",
    [
      { command: "quiesce logs", description: "The last 50 lines of the daemon's log" },
      { command: "quiesce logs --lines 200 --follow", description: "The last 200, then new lines as they come" }
    ]
  )
)

/** `quiesce retire`: retires the daemon now if nothing would be lost. */
export const retire = Command.make(
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
).pipe(
  documented(
    "Retire the daemon now if nothing would be lost (every check kept, the idle time skipped), else say what blocks it",
    [{ command: "quiesce retire", description: "Retire the daemon now if nothing would be lost" }]
  )
)

/** `quiesce open`: a one-time login link to the daemon's page (through the hub with --hub). */
export const open = Command.make(
  "open",
  {},
  Effect.fn(function*() {
    const name = yield* viaHub
    // Through the hub: the hub's login, going on to that home's page, which the hub serves.
    if (Option.isSome(name)) return yield* printLoginLink(hubConnection, hubLoginLink, `/homes/${encodeURIComponent(name.value)}/`)
    // A home a hub manages: its daemon listens on a new port at every start, so only the page the
    // hub serves keeps working across its retirements and restarts.
    const managed = yield* managingHub(path.resolve(yield* homeDirectory))
    if (Option.isSome(managed) && managed.value.running) {
      const { hubHome, name } = managed.value
      yield* Console.error(`The home ${name} is managed by a hub: its page goes through the hub, so it keeps working when its daemon retires and comes back`)
      return yield* printLoginLink(hubConnectionAt(hubHome), hubLoginLinkAt(hubHome), `/homes/${encodeURIComponent(name)}/`)
    }
    yield* printLoginLink(daemonConnection, daemonLoginLink, undefined)
    if (Option.isSome(managed)) {
      yield* Console.error(
        `This page stops answering when the daemon retires (it comes back on another port): for a page that keeps working, ` +
          `start the hub (quiesce hub) and open it through the hub: quiesce --hub ${managed.value.name} open`
      )
    }
  })
).pipe(
  documented(
    "Print a one-time link that signs a browser in to the daemon's page (agents, runtimes, why each is resident); for a " +
      "home a running hub manages, the page the hub serves, which keeps working across the daemon's retirements and restarts",
    [
      { command: "quiesce open", description: "A one-time link to the daemon's page, printed for a browser" },
      { command: "quiesce --hub work open", description: "The page of the home work, through the hub" }
    ]
  )
)
