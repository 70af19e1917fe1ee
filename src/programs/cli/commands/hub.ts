/** The hub's commands: run it (`hub`), manage its homes, and its inventory of daemons (`daemons`). */
import { Console, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as path from "node:path"
import type { DaemonRow } from "../../../domain/hubDaemons.ts"
import { describeIdleTimeout } from "../../../domain/retirement.ts"
import {
  addHome,
  defaultHubPort,
  hubConfigFile,
  hubDefault,
  readHubConfig,
  removeHome,
  setArchived
} from "../../../layers/hub/hubFiles.ts"
import { documented } from "../documented.ts"
import { hubClient, hubConnection, hubLoginLink } from "../connection.ts"
import {
  ago,
  blockerList,
  memoryFiguresText,
  memoryTotalsTable,
  mib,
  printColumns,
  printedWith,
  printLoginLink,
  relative
} from "../render.ts"
import { hubHomeDirectory, jsonFlag, withLogFormat } from "../root.ts"
import { UsageError } from "../usageError.ts"
import { daemonOutcome } from "./daemon.ts"

/** The name of a home the hub manages, the argument of the commands on one home. */
const homeName = Argument.String("name").pipe(Argument.withDescription("The home's name in the hub (quiesce hub list shows them)"))

/** `hub archive` and `hub unarchive`: a home keeps its data and refuses new work, or accepts work again. */
const archiveCommand = (archived: boolean) =>
  Command.make(
    archived ? "archive" : "unarchive",
    { name: homeName },
    Effect.fn(function*({ name }) {
      yield* setArchived(yield* hubHomeDirectory, name, archived)
      yield* Console.log(archived ? `${name}: archived (its data is kept; new work is refused)` : `${name}: accepts work again`)
    })
  ).pipe(
    archived
      ? documented(
        "Archive a home: its data is kept and readable, new work is refused",
        [{ command: "quiesce hub archive old-project", description: "Keep its data, refuse new work" }]
      )
      : documented(
        "Accept work for an archived home again",
        [{ command: "quiesce hub unarchive old-project", description: "Accept work again" }]
      )
  )

/** `quiesce hub`: runs the hub; its subcommands manage its homes. */
export const hubCommand = Command.make(
  "hub",
  { port: Flag.Int("port").pipe(Flag.withDescription(`HTTP port on 127.0.0.1 (default ${defaultHubPort})`), Flag.optional) },
  Effect.fn(function*({ port }) {
    const hubHome = yield* hubHomeDirectory
    const { runHub } = yield* Effect.promise(() => import("../../hub.ts"))
    // A hub stopped by a signal (SIGINT, SIGTERM, SIGHUP) has shut down in order, as a daemon has: exit 0.
    daemonOutcome.running = true
    yield* runHub({ hubHome, port: Option.getOrElse(port, () => defaultHubPort) }).pipe(
      Effect.onInterrupt(() => Effect.logInfo("Quiesce hub stopped; its daemons keep running")),
      withLogFormat
    )
  })
).pipe(
  documented(
    "Run the hub: it starts each managed home's daemon on the next mutation, routes /v1/homes/NAME/… to it, and lists what is resident",
    [
      { command: "quiesce hub", description: "Run the hub on 127.0.0.1:7378" },
      { command: "quiesce --hub work prompt agent-1234 \"hello\" --wait", description: "A prompt through the hub: it starts the daemon of work if needed" }
    ]
  ),
  Command.withSubcommands([
    Command.make(
      "add",
      {
        name: Argument.String("name").pipe(Argument.withDescription("The name to manage it under: 1 to 64 letters, digits, ., _ or -, starting with a letter or digit")),
        dir: Argument.String("dir").pipe(Argument.withDescription("The daemon's home directory (created on the daemon's first start)"))
      },
      Effect.fn(function*({ dir, name }) {
        const hubHome = yield* hubHomeDirectory
        yield* addHome(hubHome, name, dir)
        yield* Console.log(`${name}: ${path.resolve(dir)} (in ${hubConfigFile(hubHome)})`)
      })
    ).pipe(
      documented(
        "Manage a daemon home under a name",
        [{ command: "quiesce hub add work ~/.local/state/quiesce", description: "Manage that home under the name work" }]
      )
    ),
    Command.make(
      "remove",
      { name: homeName },
      Effect.fn(function*({ name }) {
        yield* removeHome(yield* hubHomeDirectory, name)
        yield* Console.log(`${name}: no longer managed (its home and any running daemon are left as they are)`)
      })
    ).pipe(
      documented(
        "Stop managing a home (nothing is deleted or stopped)",
        [{ command: "quiesce hub remove work", description: "Stop managing it (nothing is deleted or stopped)" }]
      )
    ),
    Command.make(
      "list",
      { json: jsonFlag("hub.json's homes and the daemons' idle timeout") },
      printedWith(
        () => Effect.map(Effect.flatMap(hubHomeDirectory, readHubConfig), (config) => ({ daemonIdleTimeout: hubDefault(config), homes: config.homes })),
        Effect.fn(function*({ daemonIdleTimeout: timeout, homes }) {
          yield* Console.log(`daemon idle timeout ${timeout.value} (${timeout.source}); ${hubConfigFile(yield* hubHomeDirectory)}`)
          for (const entry of homes) {
            yield* Console.log(`${entry.name}  ${entry.dir}${entry.archived === true ? "  (archived)" : ""}`)
          }
        })
      )
    ).pipe(
      documented(
        "The homes in hub.json",
        [{ command: "quiesce hub list --json", description: "The homes in hub.json" }]
      )
    ),
    archiveCommand(true),
    archiveCommand(false),
    Command.make(
      "open",
      {},
      () => printLoginLink(hubConnection, hubLoginLink, undefined)
    ).pipe(
      documented(
        "Print a one-time link that signs a browser in to the hub's page (the resident inventory)",
        [{ command: "quiesce hub open", description: "A one-time link to the hub's page, printed for a browser" }]
      )
    )
  ])
)

const timeoutText = (timeout: DaemonRow["idleTimeout"]) => timeout === null ? "-" : describeIdleTimeout(timeout)

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

/** `quiesce daemons`: the hub's inventory; its subcommands retire, stop and resume a daemon. */
export const daemons = Command.make(
  "daemons",
  { json: jsonFlag("the inventory") },
  printedWith(() => Effect.flatMap(hubClient, (api) => api.daemons.list()), Effect.fn(function*(inventory) {
    yield* Console.log(
      `hub default idle timeout ${inventory.hubDefaultIdleTimeout.value} (${inventory.hubDefaultIdleTimeout.source}); protocol ${inventory.protocolVersion}`
    )
    const table = [
      ["NAME", "STATE", "PID", "STARTED", "PROTOCOL", "TIMEOUT", "PHASE", "RETIRES", "BLOCKERS", "MEMORY", "RESIDENT", "RELEASED"],
      ...inventory.daemons.map((row) => {
        const memory = row.memoryTotals === undefined ? undefined : memoryFiguresText(row.memoryTotals)
        return [
          `${row.name}${row.archived ? " (archived)" : ""}`,
          row.state,
          row.pid === null ? "-" : String(row.pid),
          row.startedAt === null ? "-" : ago(row.startedAt),
          row.protocolVersion === null ? "-" : `${row.protocolVersion}${row.compatible === false ? " (incompatible)" : ""}`,
          timeoutText(row.idleTimeout),
          row.phase ?? "-",
          row.deadline === null ? "-" : relative(row.deadline),
          row.blockers.join(", ") || "-",
          mib(row.memoryBytes),
          memory?.resident ?? "-",
          memory?.released ?? "-"
        ]
      })
    ]
    yield* printColumns(table)
    if (inventory.memoryTotals !== undefined) yield* printColumns(memoryTotalsTable(inventory.memoryTotals, "all homes"))
    for (const row of inventory.daemons) {
      const attempt = row.lastAttempt === null
        ? ""
        : ` Last attempt ${ago(row.lastAttempt.at)}: ${row.lastAttempt.outcome}${
          row.lastAttempt.blockers.length === 0 ? "" : ` by ${blockerList(row.lastAttempt.blockers)}`
        }.`
      const vetoes = row.vetoes === undefined || row.vetoes.length === 0 ? "" : ` Kept by ${blockerList(row.vetoes)}.`
      yield* Console.log(`${row.name}: ${row.note}${vetoes}${attempt}`)
    }
  }))
).pipe(
  documented(
    "The hub's resident inventory: one row per home's daemon, what it armed, what keeps it resident (a provider's veto with its reason and since when), " +
      "its memory resident against released (a home without a daemon: what its releases gave back, from its saved store), and all homes' totals per provider and per label",
    [{ command: "quiesce daemons", description: "The resident inventory of the hub" }]
  ),
  Command.withSubcommands([
    Command.make(
      "retire",
      { name: homeName },
      Effect.fn(function*({ name }) {
        const { api, row } = yield* rowNamed(name)
        const attempt = yield* api.daemons.retire({ params: { name }, payload: yield* identityOf(row) })
        yield* Console.log(`${name}: retirement committed at ${attempt.at}; the next mutation through the hub brings it back`)
      })
    ).pipe(
      documented(
        "Retire a home's daemon now if nothing would be lost; on refusal, print what blocks it",
        [{ command: "quiesce daemons retire work", description: "Retire that daemon now if nothing would be lost" }]
      )
    ),
    Command.make(
      "stop",
      {
        name: homeName,
        confirm: Flag.String("confirm").pipe(
          Flag.withDescription(
            "NAME:PID of the daemon, as `quiesce daemons` shows it: you accept that its work may be interrupted (default: none, and the stop is refused)"
          ),
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
    ).pipe(
      documented(
        "Force-stop a home's daemon (running work and watches may be interrupted); it then starts only on resume",
        [{ command: "quiesce daemons stop work --confirm work:4242", description: "Force-stop it (the pid as quiesce daemons shows it)" }]
      )
    ),
    Command.make(
      "resume",
      { name: homeName },
      Effect.fn(function*({ name }) {
        const api = yield* hubClient
        const row = yield* api.daemons.resume({ params: { name } })
        yield* Console.log(`${name}: ${row.state}${row.pid === null ? "" : `, pid ${row.pid}`}`)
      })
    ).pipe(
      documented(
        "Start a force-stopped (or retired) home's daemon again",
        [{ command: "quiesce daemons resume work", description: "Start a force-stopped home's daemon again" }]
      )
    )
  ])
)
