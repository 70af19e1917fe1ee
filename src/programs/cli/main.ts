/**
 * The `quiesce` command: runs the daemon, and talks to a running daemon over its HTTP API with
 * the token from the home directory. The entry of the command (bin/quiesce.mjs bundles it): every
 * command group under the root, the error presenter, and the exit code.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Cause, Effect, Runtime } from "effect"
import { CliConfig, Command, GlobalFlag } from "effect/cli"
import { retiredExitCode } from "../../domain/retirement.ts"
import { packageVersion } from "../../domain/version.ts"
import { agents } from "./commands/agents.ts"
import { config, warmReserve } from "./commands/config.ts"
import { daemon, daemonOutcome, logs, open, retire, status, stop } from "./commands/daemon.ts"
import { daemons, hubCommand } from "./commands/hub.ts"
import { collect, explain, runtimes, sweep } from "./commands/runtimes.ts"
import { answerPermission, interrupt, prompt, turns } from "./commands/turns.ts"
import { watch } from "./commands/watch.ts"
import { presenterFor, reportUserErrors } from "./presenter.ts"
import { root } from "./root.ts"

/** The command line: the root command with every command under it. */
export const cli = root.pipe(Command.withSubcommands([
  daemon,
  open,
  agents,
  prompt,
  watch,
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

/**
 * effect/cli's built-in flags but `--wizard`: its interactive walk through a command's flags is not
 * part of this CLI (cancelled, it reported success), so `--wizard` is an unknown flag like any other.
 */
export const cliConfig = CliConfig.layer({ builtIns: GlobalFlag.BuiltIns.filter((flag) => flag !== GlobalFlag.Wizard) })

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
export const main = () => {
  const args = joinNegativeValues(process.argv.slice(2))
  return Command.runWith(cli, { version: packageVersion })(args).pipe(
    reportUserErrors,
    Effect.provide([NodeServices.layer, NodeHttpClient.layerNodeHttp, presenterFor(args), cliConfig]),
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
}

if (import.meta.main) main()
