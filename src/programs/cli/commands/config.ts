/** The home's configuration: `config check`, `config reload`, and the warm reserves (`warm-reserve`). */
import { Console, Effect, Option } from "effect"
import { Argument, Command } from "effect/cli"
import * as fs from "node:fs"
import * as path from "node:path"
import { commandGroup, documented } from "../documented.ts"
import { client } from "../connection.ts"
import { mib, printColumns, printDefaults, printedWith } from "../render.ts"
import { homeDirectory, jsonFlag } from "../root.ts"
import { UsageError } from "../usageError.ts"

/** `quiesce config` and its subcommands. */
export const config = commandGroup("config", "The home's configuration file, config.json", [
  { command: "quiesce config check", description: "Validate config.json" }
], [
  Command.make(
    "check",
    {},
    Effect.fn(function*() {
      const root = path.resolve(yield* homeDirectory)
      const file = path.join(root, "config.json")
      const { loadConfig, missingProviderCommands } = yield* Effect.promise(() => import("../../../layers/host/loadConfig.ts"))
      const checked = yield* loadConfig(file)
      if (!fs.existsSync(root)) {
        yield* Console.log(`${root} does not exist yet: a daemon creates it on its first start (quiesce --home ${root} daemon)`)
      }
      // A provider whose command cannot be found fails every agent that names it.
      const missing = missingProviderCommands(checked)
      if (missing.length > 0) return yield* new UsageError({ message: `${file}: ${missing.join("; ")}` })
      if (!fs.existsSync(file)) return yield* printDefaults(root, checked)
      yield* Console.log(`${file}: ok`)
    })
  ).pipe(
    documented(
      "Validate the configuration file: its shape, and that every provider's command can be found",
      [{ command: "quiesce --home ~/work config check", description: "Validate that home's config.json" }]
    )
  ),
  Command.make(
    "reload",
    { json: jsonFlag("what was applied") },
    printedWith(() => Effect.flatMap(client, (api) => api.reserve.reload()), Effect.fn(function*(reloaded) {
      yield* Console.log(
        reloaded.applied.length === 0
          ? "no warm reserve to apply"
          : `warm reserves: ${reloaded.applied.map(({ provider, warmReserve }) => `${provider} ${warmReserve}`).join(", ")}`
      )
      if (reloaded.needsRestart.length > 0) {
        yield* Console.log(`changed, applied at the next start (quiesce stop, then start the daemon): ${reloaded.needsRestart.join(", ")}`)
      }
    }))
  ).pipe(
    documented(
      "Reread config.json in the running daemon: warm reserves are applied at once; any other change is named, for a restart",
      [{ command: "quiesce config reload", description: "Apply config.json's warm reserves to the running daemon; name what needs a restart" }]
    )
  )
])

/** `quiesce warm-reserve`: each provider's warm reserve, or sets one. */
export const warmReserve = Command.make(
  "warm-reserve",
  {
    provider: Argument.String("provider").pipe(
      Argument.withDescription("A provider id of config.json whose warm reserve to set (default: list every provider's)"),
      Argument.optional
    ),
    size: Argument.Int("size").pipe(Argument.withDescription("How many warm processes to keep ready for it; 0 closes them"), Argument.optional),
    json: jsonFlag("the reserves")
  },
  printedWith(Effect.fn(function*({ provider, size }) {
    const api = yield* client
    if (Option.isSome(provider) && Option.isNone(size)) {
      return yield* new UsageError({ message: `Give the size too: quiesce warm-reserve ${provider.value} <size> (0 closes them)` })
    }
    return Option.isSome(provider) && Option.isSome(size)
      ? [yield* api.reserve.resize({ params: { provider: provider.value }, payload: { target: size.value } })]
      : yield* api.reserve.list()
  }), (rows) =>
    rows.length === 0
      ? Console.log("no warm reserve: every provider starts a process per runtime (set providers.<id>.warmReserve)")
      : printColumns([
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
        ]))
).pipe(
  documented(
    "Each provider's warm reserve (started processes without a session, taken by the next create or resume); with a provider and a size, sets it",
    [
      { command: "quiesce warm-reserve", description: "Each provider's warm processes: target, ready, starting, memory" },
      { command: "quiesce warm-reserve codex 2", description: "Keep two Codex app-servers started and ready; 0 closes them" }
    ]
  )
)

/** The summed memory of processes, or "-" when none was measured. */
const mebibytes = (processes: ReadonlyArray<{ readonly rssBytes: number | null }>) => {
  const measured = processes.filter((process) => process.rssBytes !== null)
  return mib(measured.length === 0 ? null : measured.reduce((sum, process) => sum + (process.rssBytes ?? 0), 0))
}
