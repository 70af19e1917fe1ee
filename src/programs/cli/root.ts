/**
 * The root command `quiesce`, its flags shared by every command (--home, --hub, --log-format), and
 * what they name: the home directories, the managed home to go through, the log format.
 */
import { Effect, Logger, Option } from "effect"
import { Command, Flag } from "effect/cli"
import * as path from "node:path"
import { defaultHome } from "../../layers/host/Home.ts"
import { defaultHubHome } from "../../layers/hub/hubFiles.ts"

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

/** The command `quiesce` with its shared flags; every other command is one of its subcommands. */
export const root = Command.make("quiesce").pipe(
  Command.withSharedFlags({ home, hub, logFormat }),
  Command.withDescription("Release idle coding-agent runtimes when nothing is lost; resume them on the next prompt")
)

/** The daemon home the command names (--home, else the default home). */
export const homeDirectory = Effect.map(root, (flags) =>
  Option.getOrElse(flags.home, defaultHome))

/** The hub home the command names (--home, else the default hub home), resolved. */
export const hubHomeDirectory = Effect.map(root, (flags) => path.resolve(Option.getOrElse(flags.home, defaultHubHome)))

/** The logger of a long-running command: pretty with dated timestamps on a terminal, one JSON object per line otherwise. */
export const withLogFormat = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(root, (flags) => {
    const format = Option.getOrElse(flags.logFormat, () => (process.stdout.isTTY ? "pretty" : "json"))
    const logger = format === "json" ? Logger.consoleJson : Logger.consolePretty({ formatDate: (date) => date.toISOString() })
    return effect.pipe(Effect.provide(Logger.layer([logger])))
  })

/** The managed home the daemon commands go to through the hub, if any. */
export const viaHub = Effect.map(root, (flags) =>
  Option.orElse(flags.hub, () => Option.fromNullishOr(process.env["QUIESCE_HUB"] || undefined)))

/** The --json flag of a command that prints `what`. */
export const jsonFlag = (what: string) => Flag.Boolean("json").pipe(Flag.withDescription(`Print ${what} as JSON`), Flag.withDefault(false))
