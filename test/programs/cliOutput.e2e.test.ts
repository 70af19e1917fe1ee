/**
 * The CLI's one output rule (issue 31), with a real daemon: every command prints sentences or
 * tables for people, and JSON only with `--json`, and then nothing but the JSON. Each command that
 * printed JSON before (`agents create`, `agents show`, `prompt`, `turns show`, `collect`, `sweep`)
 * is run both ways.
 */
import { afterEach, describe, expect, it } from "vitest"
import { cleanUpDaemons, freePort, newHome, ready, runCli, startDaemon } from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

/** Whether a command's output is JSON: it parses as a whole. */
const isJson = (stdout: string) => {
  try {
    JSON.parse(stdout)
    return true
  } catch {
    return false
  }
}

describe("the CLI's output", () => {
  it("is for people without --json and JSON with it, on every command that has a result", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const both = (...args: Array<string>) => {
      const people = runCli(daemon, ...args)
      expect(people.status, `${args.join(" ")}: ${people.stderr}`).toBe(0)
      expect(people.stdout.trim(), args.join(" ")).not.toBe("")
      expect(isJson(people.stdout), `${args.join(" ")} printed JSON without --json:\n${people.stdout}`).toBe(false)
      expect(people.stderr, args.join(" ")).toBe("")
      const machines = runCli(daemon, ...args, "--json")
      expect(machines.status, `${args.join(" ")} --json: ${machines.stderr}`).toBe(0)
      expect(machines.stderr, args.join(" ")).toBe("")
      return { people: people.stdout, json: JSON.parse(machines.stdout) }
    }

    // Two agents, each created both ways.
    const created = both("agents", "create", "--cwd", daemon.home, "--label", "team=web")
    const [first] = created.people.match(/agent-[0-9a-f]+/) ?? []
    expect(created.people).toBe(`created ${first} (shell, working in ${daemon.home})\n`)
    expect(created.json).toEqual({ agentId: expect.stringMatching(/^agent-/), provider: "shell", sessionId: expect.anything() })
    const second: string = created.json.agentId

    const shown = both("agents", "show", second)
    expect(shown.people).toMatch(new RegExp(`^agent +${second} \\(shell\\)$`, "m"))
    expect(shown.people).toMatch(/^labels +team=web$/m)
    expect(shown.people).toMatch(/^permissions +none pending$/m)
    expect(shown.json).toMatchObject({ agentId: second, labels: { team: "web" }, pendingPermissions: [] })

    // prompt without --wait: one line naming the turn and how to read it; with --json, the receipt.
    const prompted = both("prompt", second, "echo hello")
    const [, turnId] = prompted.people.match(new RegExp(`^turn (turn-[0-9a-f]+) of ${second}: \\w+; its reply: quiesce turns show ${second} turn-`)) ?? []
    expect(turnId).toBeDefined()
    expect(prompted.json).toMatchObject({ agentId: second, turnId: expect.stringMatching(/^turn-/) })
    // With --wait, the reply alone; with --wait --json, the turn as it ended.
    const waited = both("prompt", second, "echo waited", "--wait")
    expect(waited.people).toBe("waited\n")
    expect(waited.json).toMatchObject({ state: "completed", output: "waited\n" })

    const turn = both("turns", "show", second, turnId!)
    expect(turn.people).toMatch(/^prompt +echo hello$/m)
    expect(turn.people).toMatch(/^accepted +\S+ \(.*\)$/m)
    expect(turn.json).toMatchObject({ turnId, text: "echo hello" })
    // Both runs of each prompt are turns: two without --wait, two with.
    expect(both("turns", "list", second).json).toHaveLength(4)

    const collected = runCli(daemon, "collect", first!)
    expect(collected.status, collected.stderr).toBe(0)
    expect(collected.stdout).toBe(`released ${first}: its next prompt resumes its session\n`)
    const collectedJson = runCli(daemon, "collect", second, "--json")
    expect(collectedJson.status, collectedJson.stderr).toBe(0)
    expect(JSON.parse(collectedJson.stdout)).toMatchObject({ outcome: "collected" })

    // Nothing is idle past the default hour: the sweep says it released nothing.
    const swept = both("sweep")
    expect(swept.people).toMatch(/^released nothing: /)
    expect(swept.json).toEqual({ collected: [], failures: [] })

    const interrupted = runCli(daemon, "interrupt", second)
    expect(interrupted.status, interrupted.stderr).toBe(0)
    expect(interrupted.stdout).toMatch(new RegExp(`^asked ${second} to interrupt its running turn`))

    const closed = runCli(daemon, "agents", "close", second, "--json")
    expect(closed.status, closed.stderr).toBe(0)
    expect(JSON.parse(closed.stdout)).toEqual({ agentId: second, ended: { blockers: [], veto: null } })
    const deleted = runCli(daemon, "agents", "delete", second)
    expect(deleted.status, deleted.stderr).toBe(0)
    expect(deleted.stdout).toBe(`deleted ${second}: its runtime ended, its record and turns are gone\n`)

    // The listings and readings that had --json already keep it.
    for (const args of [["agents", "list"], ["runtimes"], ["status"], ["warm-reserve"]]) both(...args)
  }, 120_000)
})
