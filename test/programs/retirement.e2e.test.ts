/**
 * Daemon self-retirement as a user meets it: real daemon processes with a short idle timeout, the
 * reference shell provider, the CLI. Time is real, so every wait polls with a bound.
 */
import { afterEach, describe, expect, it } from "vitest"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import {
  api,
  cleanUpDaemons,
  createShellAgent,
  type Daemon,
  exited,
  freePort,
  groupAlive,
  newHome,
  prompt,
  ready,
  runCli,
  startDaemon,
  until
} from "../support/daemonProcess.ts"
import { daemonProtocolVersion } from "../../src/domain/retirement.ts"
import { pluginPath as shellPluginPath } from "../../src/layers/providers/shell/ShellProvider.ts"

afterEach(cleanUpDaemons)

const retiredExitCode = 75

const status = async (daemon: Daemon) => (await api(daemon, "GET", "/v1/daemon")).body

const lines = (daemon: Daemon, file: string) =>
  existsSync(join(daemon.home, file)) ? readFileSync(join(daemon.home, file), "utf8").split("\n").filter((l) => l !== "") : []

describe("daemon self-retirement with real processes", () => {
  it("an idle daemon retires (exit 75, no record, no process); started again, the agent resumes its session", async () => {
    const home = newHome()
    const port = await freePort()
    const daemon = startDaemon(home, port, ["--daemon-idle-timeout", "3s"])
    await ready(daemon)
    const record = JSON.parse(readFileSync(join(home, "daemon.json"), "utf8"))
    expect(record).toMatchObject({ pid: daemon.process.pid, port, protocolVersion: daemonProtocolVersion, idleTimeout: { value: "3s", source: "flag" } })
    expect(JSON.stringify(record)).not.toContain(daemon.token())
    const agentId = await createShellAgent(daemon)
    const first = await prompt(daemon, agentId, { text: "echo remembered", wait: true })
    const { pid, sessionId } = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body
    expect(first.body.state).toBe("completed")

    expect(await exited(daemon.process)).toBe(retiredExitCode)
    expect(existsSync(join(home, "daemon.json"))).toBe(false)
    expect(existsSync(join(home, "daemon.lock"))).toBe(false)
    await until(() => !groupAlive(pid), "the runtime's process group is gone")
    expect(daemon.output()).toContain("Daemon retired")

    const again = startDaemon(home, port)
    await ready(again)
    const resumed = await prompt(again, agentId, { text: "echo back", wait: true })
    expect(resumed.body).toMatchObject({ state: "completed", output: "back\n", resumed: true, sessionId })
    const transcript = readFileSync(join(home, "plugins", "shell", `${sessionId}.json`), "utf8")
    expect(transcript).toContain("echo remembered")
    expect(transcript).toContain("echo back")
    // Without the flag or config, the same daemon stays resident: no timer.
    expect((await status(again)).idleTimeout).toEqual({ value: null, millis: null, source: "omitted" })
  }, 60_000)

  it("a background job keeps the daemon resident, with the job's veto in lastAttempt; it retires once the job is done", async () => {
    const daemon = startDaemon(newHome(), await freePort(), ["--daemon-idle-timeout", "2s"])
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    await prompt(daemon, agentId, { text: "sleep 6 &", wait: true })
    await until(async () => (await status(daemon)).lastAttempt?.outcome === "refused", "an attempt is refused", 15_000)
    const refused = (await status(daemon)).lastAttempt
    expect(refused.blockers).toContainEqual(expect.objectContaining({ category: "veto", agentId }))
    expect(daemon.process.exitCode).toBeNull()
    const shown = runCli(daemon, "status")
    expect(shown.status).toBe(0)
    expect(shown.stdout).toMatch(/last try .*timer: refused by veto/)
    expect(shown.stdout).toMatch(/^up {10}\d+s; 1 agent, 1 resident$/m)
    expect(await exited(daemon.process)).toBe(retiredExitCode)
  }, 60_000)

  it("quiesce retire: refused with the fresh blockers while a turn runs; then retires now, with no timer", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const running = prompt(daemon, agentId, { text: "sleep 3", wait: true })
    await until(async () => (await status(daemon)).blockers.length > 0, "the turn runs")
    const refused = runCli(daemon, "retire")
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain(`Retirement refused: foreground-turn (${agentId})`)
    expect((await status(daemon)).phase).toBe("resident")
    expect((await running).body.state).toBe("completed")
    const retired = runCli(daemon, "retire")
    expect(retired.status, retired.stderr).toBe(0)
    expect(retired.stdout).toContain("retirement committed at")
    expect(await exited(daemon.process)).toBe(retiredExitCode)
  }, 60_000)

  it("a retire request whose client goes away mid-attempt still ends it: the daemon retires (exit 75)", async () => {
    const home = newHome()
    // The shell runtime takes its time to answer the safety query: the client leaves before it does.
    writeFileSync(join(home, "config.json"), JSON.stringify({
      providers: {
        shell: { kind: "plugin", command: process.execPath, args: [shellPluginPath], env: { QUIESCE_SHELL_CAN_STOP_DELAY_MS: "1500" } }
      }
    }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const { pid } = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body
    const leaving = new AbortController()
    const request = api(daemon, "POST", "/v1/daemon/retire", undefined, daemon.token(), leaving.signal).catch((error) => error)
    await until(async () => (await status(daemon)).phase === "retiring", "the attempt reads the evidence")
    leaving.abort()
    expect(await request).toBeInstanceOf(Error)
    expect(await exited(daemon.process)).toBe(retiredExitCode)
    await until(() => !groupAlive(pid), "the runtime's process group is gone")
    expect(daemon.output()).toContain("Daemon retired")
  }, 60_000)

  it("prompts racing the commit land in the old daemon or get a typed 503 (or no answer); retried, each runs exactly once", async () => {
    const home = newHome()
    const port = await freePort()
    // The shell runtime takes its time to answer the safety query: the attempt's evidence read is long.
    writeFileSync(join(home, "config.json"), JSON.stringify({
      providers: {
        shell: { kind: "plugin", command: process.execPath, args: [shellPluginPath], env: { QUIESCE_SHELL_CAN_STOP_DELAY_MS: "1500" } }
      }
    }))
    const daemon = startDaemon(home, port, ["--daemon-idle-timeout", "2s"])
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    await prompt(daemon, agentId, { text: "true", wait: true })
    const command = (n: number) => ({ text: `echo ${n} >> runs.log; echo out-${n}`, wait: true, clientMessageId: `race-${n}` })
    await until(async () => (await status(daemon)).phase === "retiring", "an attempt reads the evidence", 15_000)
    // While it reads, and through the commit and the exit: a prompt every 100 ms.
    const sent: Array<{ readonly n: number; readonly status: number; readonly body: { readonly _tag?: string; readonly turnId?: string } | undefined }> = []
    for (let n = 0; n < 30 && daemon.process.exitCode === null; n++) {
      sent.push(await prompt(daemon, agentId, command(n)).then(
        (answer) => ({ n, status: answer.status, body: answer.body }),
        () => ({ n, status: 0, body: undefined })
      ))
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    const statuses = sent.map((answer) => answer.status)
    expect(statuses, "refused while retiring").toContain(503)
    for (const answer of sent) {
      expect([503, 0], JSON.stringify(answer)).toContain(answer.status)
      if (answer.status === 503) expect(answer.body?._tag).toBe("DaemonRetiring")
    }
    expect(await exited(daemon.process)).toBe(retiredExitCode)

    const again = startDaemon(home, port)
    await ready(again)
    const retried = await Promise.all(sent.map((answer) => prompt(again, agentId, command(answer.n))))
    for (const [n, answer] of retried.entries()) expect(answer.body).toMatchObject({ state: "completed", output: `out-${n}\n` })
    const ran = lines(again, "runs.log")
    expect([...ran].sort((a, b) => Number(a) - Number(b))).toEqual(sent.map((answer) => String(answer.n)))
  }, 90_000)

  it("timeouts are checked before anything listens: a malformed flag or config value names its source; 0s is no timer", async () => {
    const bad = startDaemon(newHome(), await freePort(), ["--daemon-idle-timeout", "-5m"])
    expect(await exited(bad.process)).toBe(1)
    expect(bad.output()).toContain("--daemon-idle-timeout")
    expect(bad.output()).not.toContain("Quiesce ready")

    const home = newHome()
    writeFileSync(join(home, "config.json"), JSON.stringify({ daemon: { idleTimeout: "soon" } }))
    const badConfig = startDaemon(home, await freePort())
    expect(await exited(badConfig.process)).toBe(1)
    expect(badConfig.output()).toContain(`["daemon"]["idleTimeout"]`)

    writeFileSync(join(home, "config.json"), JSON.stringify({ daemon: { idleTimeout: "1h" } }))
    const fromConfig = startDaemon(home, await freePort())
    await ready(fromConfig)
    expect((await status(fromConfig)).idleTimeout).toEqual({ value: "1h0m0s", millis: 3_600_000, source: "config" })
    fromConfig.process.kill("SIGTERM")
    expect(await exited(fromConfig.process)).toBe(0)

    const disabled = startDaemon(home, await freePort(), ["--daemon-idle-timeout", "0s"])
    await ready(disabled)
    const shown = await status(disabled)
    expect(shown.idleTimeout).toEqual({ value: "0s", millis: null, source: "flag" })
    expect(shown.deadline).toBeNull()
  }, 60_000)
})
