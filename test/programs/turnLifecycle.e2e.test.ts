/**
 * Turns as a user meets them, through a real daemon and the reference shell provider: honest
 * outcomes, refusals that say what happened, shutdown and crash in the middle of turns.
 */
import { afterEach, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { readStat } from "../../src/platform/procfs.ts"
import {
  api,
  cleanUpDaemons,
  createShellAgent,
  type Daemon,
  exited,
  freePort,
  newHome,
  prompt,
  ready,
  runCli,
  startDaemon,
  until
} from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

/** Whether the process runs: a zombie (ended, not yet reaped by init) does not. */
const alive = (pid: number) => {
  const stat = readStat(pid)
  return stat !== undefined && stat.state !== "Z" && stat.state !== "X"
}

const lines = (daemon: Daemon, file: string) =>
  existsSync(join(daemon.home, file)) ? readFileSync(join(daemon.home, file), "utf8").split("\n").filter((l) => l !== "") : []

describe("honest outcomes", () => {
  it("a failing command is a failed turn, never the previous reply; the CLI says so and exits 1", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    expect((await prompt(daemon, agentId, { text: "echo earlier", wait: true })).body.output).toBe("earlier\n")

    const failed = await prompt(daemon, agentId, { text: "echo partial; exit 3", wait: true })
    expect(failed.status).toBe(200)
    expect(failed.body).toMatchObject({ state: "failed", output: null, disposition: "turn" })
    expect(failed.body.error.message).toContain("code 3")
    expect(failed.body.error.message).not.toContain("earlier")

    const shown = runCli(daemon, "turns", "show", agentId, failed.body.turnId, "--json")
    expect(shown.status).toBe(0)
    expect(JSON.parse(shown.stdout)).toMatchObject({ turnId: failed.body.turnId, state: "failed", text: "echo partial; exit 3" })
    // For people: the prompt, the state and the error, a line each.
    const read = runCli(daemon, "turns", "show", agentId, failed.body.turnId).stdout
    expect(read).toMatch(new RegExp(`^turn +${failed.body.turnId} of ${agentId}`, "m"))
    expect(read).toMatch(/^state +failed \(turn\)$/m)
    expect(read).toMatch(/^prompt +echo partial; exit 3$/m)
    expect(read).toMatch(/^error +\w+: .*code 3/m)

    const cli = runCli(daemon, "prompt", agentId, "exit 4", "--wait")
    expect(cli.status).toBe(1)
    expect(cli.stderr).toMatch(/turn turn-[0-9a-f]+ failed: .*code 4/)
    expect(cli.stdout).not.toContain("earlier")
  }, 60_000)

  it("a provider process that dies mid-turn fails the turn; the next prompt resumes the same session", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const { sessionId } = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body
    await prompt(daemon, agentId, { text: "echo before", wait: true })
    // The command's parent is the shell plugin itself: the runtime crashes under the turn.
    const crashed = await prompt(daemon, agentId, { text: "kill -9 $PPID; sleep 5", wait: true })
    expect(crashed.body.state).toBe("failed")
    expect(crashed.body.error.message).toMatch(/exited/)
    expect(crashed.body.output).toBeNull()
    const next = await prompt(daemon, agentId, { text: "echo after", wait: true })
    expect(next.body).toMatchObject({ state: "completed", output: "after\n", resumed: true, sessionId })
  }, 60_000)
})

describe("hostile requests", () => {
  it("an answer to a permission nobody asked for is 409 PermissionNotPending", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const answered = await api(daemon, "POST", `/v1/agents/${agentId}/permissions/never-asked`, { allow: true })
    expect(answered.status).toBe(409)
    expect(answered.body).toMatchObject({ _tag: "PermissionNotPending", permissionId: "never-asked" })
  }, 30_000)

  it("a prompt too large for the provider is 413 before anything runs, never a 502", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    // Within the request limit (1 MiB), beyond what a prompt may be.
    const large = await prompt(daemon, agentId, { text: `echo ${"x".repeat(600 * 1024)}` })
    expect(large.status).toBe(413)
    expect(large.body).toMatchObject({ _tag: "PromptTooLarge", limitBytes: 512 * 1024 })
    // JSON escaping counts: 100 Ki control characters are 600 KiB on the wire to the provider.
    const escaped = await prompt(daemon, agentId, { text: "\u0001".repeat(100 * 1024) })
    expect(escaped.status).toBe(413)
    expect(escaped.body._tag).toBe("PromptTooLarge")
    expect(lines(daemon, "runs.log")).toEqual([])
    // A large prompt within the bound reaches the provider whole (sh takes at most 128 KiB an argument).
    const fits = await prompt(daemon, agentId, { text: `printf %s ${"y".repeat(120 * 1024)} | wc -c`, wait: true })
    expect(fits.body).toMatchObject({ state: "completed", output: `${120 * 1024}\n` })
  }, 60_000)
})

describe("shutdown and crash in the middle of turns", () => {
  it("SIGTERM: waiting callers get a typed 503 naming their turn; after the restart the same ids return those turns, nothing runs twice", async () => {
    const home = newHome()
    const port = await freePort()
    const daemon = startDaemon(home, port)
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const running = prompt(daemon, agentId, { text: "echo a >> runs.log; sleep 30", wait: true, clientMessageId: "a" })
    await until(() => lines(daemon, "runs.log").includes("a"), "the first turn runs")
    const queued = prompt(daemon, agentId, { text: "echo b >> runs.log", wait: true, clientMessageId: "b" })
    await until(async () => (await api(daemon, "GET", "/v1/runtimes")).body[0]?.blockers.some(
      (blocker: { kind: string }) => blocker.kind === "queued-prompt"
    ), "the second prompt is queued behind it")

    daemon.process.kill("SIGTERM")
    const [first, second] = await Promise.all([running, queued])
    for (const answer of [first, second]) {
      expect(answer.status).toBe(503)
      expect(answer.body._tag).toBe("ShuttingDown")
      expect(answer.body.turnId).toMatch(/^turn-/)
    }
    expect(await exited(daemon.process)).toBe(0)

    const restarted = startDaemon(home, port)
    await ready(restarted)
    const cut = await prompt(restarted, agentId, { text: "echo a >> runs.log; sleep 30", wait: true, clientMessageId: "a" })
    expect(cut.body).toMatchObject({ turnId: first.body.turnId, state: "interrupted" })
    const ran = await prompt(restarted, agentId, { text: "echo b >> runs.log", wait: true, clientMessageId: "b" })
    expect(ran.body).toMatchObject({ turnId: second.body.turnId, state: "completed" })
    expect(lines(restarted, "runs.log").sort()).toEqual(["a", "b"])
  }, 60_000)

  it("SIGKILL: the next daemon ends what the dead one's runtime left (and nothing else), and never re-runs the cut turn", async () => {
    const home = newHome()
    const port = await freePort()
    const daemon = startDaemon(home, port)
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    // A job that outlives its shell and the plugin's own clean-up: only its process group holds it.
    const orphaned = await prompt(daemon, agentId, {
      text: "nohup sleep 300 > /dev/null 2>&1 & echo $! > orphan.pid",
      wait: true
    })
    expect(orphaned.body.state).toBe("completed")
    const orphan = Number(readFileSync(join(home, "orphan.pid"), "utf8"))
    const cut = prompt(daemon, agentId, { text: "echo c >> runs.log; sleep 30", wait: true, clientMessageId: "c" })
    await until(() => lines(daemon, "runs.log").includes("c"), "the turn runs")
    // A process of ours the daemon never started: it must survive the clean-up.
    const bystander = spawn("sleep", ["300"], { detached: true, stdio: "ignore" })
    const bystanderPid = bystander.pid!
    try {
      process.kill(daemon.process.pid!, "SIGKILL")
      await cut.catch(() => undefined)
      await exited(daemon.process)
      expect(alive(orphan), "the orphan outlives the dead daemon").toBe(true)

      const restarted = startDaemon(home, port)
      await ready(restarted)
      expect(alive(orphan), "ended before the daemon admits work").toBe(false)
      expect(restarted.output()).toMatch(new RegExp(`Ended sleep 300 \\(pid ${orphan},`))
      expect(alive(bystanderPid)).toBe(true)

      const again = await prompt(restarted, agentId, { text: "echo c >> runs.log; sleep 30", wait: true, clientMessageId: "c" })
      expect(again.body).toMatchObject({ state: "interrupted" })
      expect(again.body.error._tag).toBe("DaemonStopped")
      expect(lines(restarted, "runs.log")).toEqual(["c"])
      const next = await prompt(restarted, agentId, { text: "echo fine", wait: true })
      expect(next.body).toMatchObject({ state: "completed", output: "fine\n", resumed: true })
    } finally {
      process.kill(-bystanderPid, "SIGKILL")
      if (alive(orphan)) process.kill(orphan, "SIGKILL")
    }
  }, 60_000)
})
