/**
 * The CLI's manners (issue 31): a bad `--label` and a value that starts with - each get one clear
 * line naming the fix, `config check` without a config.json says so and lists the defaults the
 * daemon uses, and the README's shell-completions line works in a fresh HOME. Each runs the real
 * command line, as a person would.
 */
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { decodeConfig, describeConfig } from "../../src/domain/config.ts"

const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")
const homes: Array<string> = []
const newHome = () => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-manners-"))
  homes.push(home)
  return home
}
afterAll(() => homes.forEach((home) => rmSync(home, { recursive: true, force: true })))

const quiesce = (home: string, ...args: Array<string>) => {
  const result = spawnSync(process.execPath, [cli, "--home", home, ...args], { encoding: "utf8", timeout: 20_000 })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr.trim().split("\n") }
}

describe("the CLI's manners", () => {
  it("a --label that is not key=value is one line naming the form", () => {
    const home = newHome()
    const bad = quiesce(home, "agents", "create", "--label", "foo")
    expect(bad.status).toBe(1)
    expect(bad.stdout).toBe("")
    expect(bad.stderr).toEqual([
      `quiesce: --label takes key=value, got "foo"`,
      "quiesce: see: quiesce agents create --help"
    ])
    const empty = quiesce(home, "agents", "create", "--label", "team=")
    expect(empty.status).toBe(1)
    expect(empty.stderr).toEqual([
      `quiesce: --label takes key=value, both non-empty, got "team="`,
      "quiesce: see: quiesce agents create --help"
    ])
  }, 30_000)

  it("a prompt that starts with - is one mistake, with the command line that works", () => {
    const home = newHome()
    for (const args of [["prompt", "agent-1", "--wait", "-n x"], ["prompt", "agent-1", "-n x", "--wait"]]) {
      const bad = quiesce(home, ...args)
      expect(bad.status).toBe(1)
      expect(bad.stdout).toBe("")
      expect(bad.stderr).toEqual([
        `quiesce: "-n x" is not a flag of quiesce prompt: to pass a value that starts with -, put -- before it: quiesce --home ${home} prompt agent-1 --wait -- '-n x'`,
        "quiesce: see: quiesce prompt --help"
      ])
    }
    // An ordinary unknown flag still reads as one, with its suggestion.
    expect(quiesce(home, "prompt", "agent-1", "hello", "--wiat").stderr[0]).toBe(
      "quiesce: Unrecognized flag: --wiat in command quiesce prompt (did you mean --wait?)"
    )
  }, 30_000)

  it("config check without a config.json says there is none, and lists the defaults the daemon uses", async () => {
    const home = newHome()
    const check = quiesce(home, "config", "check")
    expect(check.status).toBe(0)
    expect(check.stdout).not.toContain(": ok")
    const lines = check.stdout.trimEnd().split("\n")
    expect(lines[0]).toBe(`no config.json in ${home}: the daemon uses the defaults:`)
    // The values are the configuration's own defaults: the ones decoding an empty file gives.
    const { settings, unset } = describeConfig(await Effect.runPromise(decodeConfig({})))
    const shown = new Map(lines.slice(1).map((line) => line.trim().split(/\s{2,}/) as [string, string]))
    for (const [key, value] of settings) expect(shown.get(key), key).toBe(value)
    for (const key of ["agents.idlePeriod", "agents.sweepInterval", "daemon.port", "daemon.host", "providers.shell.kind"]) {
      expect(shown.has(key), key).toBe(true)
    }
    expect(shown.get("agents.idlePeriod")).toMatch(/^\d+[hms]/)
    expect(lines.at(-1)).toBe(`  off unless set: ${unset.join(", ")}`)
    expect(unset).toContain("agents.memory")

    // With a file, the file is checked as before.
    writeFileSync(join(home, "config.json"), JSON.stringify({ agents: { idlePeriod: "30m" } }))
    const withFile = quiesce(home, "config", "check")
    expect(withFile.status).toBe(0)
    expect(withFile.stdout.trim()).toBe(`${join(home, "config.json")}: ok`)
  }, 30_000)

  it("the README's completions line works in a fresh HOME, where the directory it writes to does not exist", () => {
    const readme = readFileSync(join(import.meta.dirname, "../../README.md"), "utf8")
    const lines = readme.split("\n").filter((line) => line.includes("quiesce --completions bash"))
    expect(lines).toHaveLength(1)
    // The line as a person pastes it, without its comment.
    const line = lines[0]!.replace(/\s+#[^#]*$/, "")
    const home = newHome()
    // `quiesce` on PATH, as `export PATH="$PWD/bin:$PATH"` gives it, here from the sources.
    const bin = join(home, "bin")
    mkdirSync(bin)
    writeFileSync(join(bin, "quiesce"), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(cli)} "$@"\n`)
    chmodSync(join(bin, "quiesce"), 0o755)
    const fresh = join(home, "fresh-home")
    mkdirSync(fresh)
    const run = spawnSync("sh", ["-c", line], {
      encoding: "utf8",
      timeout: 20_000,
      env: { PATH: `${bin}:/usr/bin:/bin`, HOME: fresh }
    })
    expect(run.stderr).toBe("")
    expect(run.status).toBe(0)
    const script = join(fresh, ".local/share/bash-completion/completions/quiesce")
    expect(existsSync(script)).toBe(true)
    // A script bash loads, completing quiesce.
    const loaded = spawnSync("bash", ["-c", `source ${JSON.stringify(script)} && complete -p quiesce`], { encoding: "utf8" })
    expect(loaded.status, loaded.stderr).toBe(0)
    expect(loaded.stdout.trim()).toBe("complete -F _quiesce quiesce")
  }, 30_000)
})
