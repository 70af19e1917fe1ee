/**
 * The CLI's help (issue 31): every command's `--help`, walked from `quiesce --help` down through
 * every subcommand, has a description and an example, describes each argument and flag, and says
 * each flag's default (a boolean flag is off unless given); `--wizard` is not offered, and is
 * refused as an unknown flag.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Option } from "effect"
import { CliOutput, Command, type HelpDoc } from "effect/cli"
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cli, cliConfig } from "../../src/programs/cli/main.ts"

/** The help of one command path, as `quiesce … --help` would show it, captured instead of printed. */
const helpOf = (path: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const shown: Array<HelpDoc.HelpDoc> = []
    const capture = CliOutput.layerPresenter({
      present: (event) => Effect.sync(() => event._tag === "Help" && shown.push(event.helpDoc))
    })
    yield* Command.runWith(cli, { version: "test" })([...path, "--help"]).pipe(
      Effect.provide([NodeServices.layer, NodeHttpClient.layerNodeHttp, capture, cliConfig])
    )
    expect(shown, path.join(" ")).toHaveLength(1)
    return shown[0]!
  })

/** Every command path under the root, the root first, with its help. */
const everyHelp = Effect.gen(function*() {
  const found: Array<{ readonly path: ReadonlyArray<string>; readonly help: HelpDoc.HelpDoc }> = []
  const visit = (path: ReadonlyArray<string>): Effect.Effect<void, unknown> =>
    Effect.gen(function*() {
      const help = yield* helpOf(path)
      found.push({ path, help })
      for (const group of help.subcommands ?? []) {
        for (const command of group.commands) yield* visit([...path, command.name])
      }
    })
  yield* visit([])
  return found
})

const described = (description: Option.Option<string>) => Option.getOrElse(description, () => "").trim()

describe("the CLI's help", () => {
  it("describes every command, argument and flag, gives each command an example, and says each flag's default", async () => {
    const helps = await Effect.runPromise(everyHelp)
    const paths = helps.map(({ path }) => path.join(" "))
    // The walk reached the leaves, not just the root.
    for (const path of ["agents create", "agents close", "turns show", "collect", "sweep", "daemons stop", "hub add", "config check"]) {
      expect(paths).toContain(path)
    }
    const problems: Array<string> = []
    expect(helps.length).toBeGreaterThan(30)
    for (const { help, path } of helps) {
      const where = `quiesce ${path.join(" ")}`.trim()
      if (help.description.trim() === "") problems.push(`${where}: no description`)
      if (path.length > 0 && (help.examples ?? []).length === 0) problems.push(`${where}: no example`)
      for (const arg of help.args ?? []) {
        if (described(arg.description) === "") problems.push(`${where}: the argument <${arg.name}> has no description`)
      }
      for (const flag of [...help.flags, ...(help.inheritedFlags ?? [])]) {
        const description = described(flag.description)
        if (description === "") problems.push(`${where}: --${flag.name} has no description`)
        else if (flag.type !== "boolean" && !/\bdefault\b/.test(description)) problems.push(`${where}: --${flag.name} does not say its default`)
      }
      if ((help.globalFlags ?? []).some((flag) => flag.name === "wizard")) problems.push(`${where}: offers --wizard`)
    }
    expect(problems).toEqual([])
  }, 60_000)

  it("says the daemon's defaults as the configuration has them", async () => {
    const help = await Effect.runPromise(helpOf(["daemon"]))
    const flag = (name: string) => described(help.flags.find((candidate) => candidate.name === name)!.description)
    expect(flag("idle-period")).toContain("default: agents.idlePeriod of config.json, else 1h")
    expect(flag("sweep-interval")).toContain("default: agents.sweepInterval of config.json, else 1m")
    expect(flag("port")).toContain("else 7377")
  })
})

describe("--wizard", () => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-help-"))
  afterAll(() => rmSync(home, { recursive: true, force: true }))

  it("is an unknown flag: exit 1, one line, nothing run and no success reported", () => {
    const main = join(import.meta.dirname, "../../src/programs/cli/main.ts")
    for (const args of [["--wizard"], ["agents", "create", "--wizard"]]) {
      const result = spawnSync(process.execPath, [main, "--home", home, ...args], { encoding: "utf8", timeout: 20_000, input: "" })
      expect(result.status).toBe(1)
      expect(result.stdout).toBe("")
      expect(result.stderr).toMatch(/^quiesce: Unrecognized flag: --wizard in command quiesce/)
      expect(result.stderr).not.toMatch(/success/i)
    }
  }, 30_000)
})
