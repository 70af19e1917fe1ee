/**
 * The daemon as a user runs it: a real process on a free loopback port, driven only through its
 * HTTP API and the CLI. Time is real, so every wait polls with a bound.
 */
import { afterEach, describe, expect, it } from "vitest"
import { spawnSync } from "node:child_process"
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { pluginPath as shellPluginPath } from "../../src/layers/providers/shell/ShellProvider.ts"
import { api, cleanUpDaemons, exited, freePort, groupAlive, newHome, ready, runCli, startDaemon, until } from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

describe("the daemon end to end", () => {
  it("quick start: a background job keeps the runtime, then it is released and resumed", async () => {
    const daemon = startDaemon(newHome(), await freePort(), ["--idle-period", "2s", "--sweep-interval", "500ms"])
    await ready(daemon)
    const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: daemon.home })
    expect(created.status).toBe(201)
    const { agentId, sessionId } = created.body
    const first = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "echo remembered", wait: true })
    expect(first.body.output).toContain("remembered")
    await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "sleep 3 &", wait: true })

    const table = runCli(daemon, "runtimes")
    expect(table.status).toBe(0)
    expect(table.stdout).toContain(agentId)
    expect(table.stdout).toMatch(/vetoed|blocked/)
    // The shell plugin, its shell and the background sleep, at least; measured, not guessed.
    expect(table.stdout).toMatch(/^total \d+\.\d MiB in ([3-9]|\d{2,}) measured processes$/m)
    const pid: number = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pid
    expect(groupAlive(pid)).toBe(true)

    await until(async () => (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.resident === false, "the runtime is released", 20_000)
    await until(() => !groupAlive(pid), "its process group is gone")
    const metrics = await (await fetch(`http://127.0.0.1:${daemon.port}/metrics`)).text()
    expect(metrics).toMatch(/quiesce_collections_total\{provider="shell"\} [1-9]/)
    const released = Number(/quiesce_released_bytes_total (\d+)/.exec(metrics)?.[1])
    expect(released).toBeGreaterThan(10 * 1024 * 1024)

    expect(runCli(daemon, "runtimes").stdout).toBe("no resident runtimes: every agent is released (or there is none)\n")
    const again = runCli(daemon, "prompt", agentId, "echo back", "--wait")
    expect(again.status).toBe(0)
    // The reply as the agent gave it (its own last newline, not a second one).
    expect(again.stdout).toBe("back\n")
    const shown = await api(daemon, "GET", `/v1/agents/${agentId}`)
    expect(shown.body).toMatchObject({ resident: true, sessionId })
    const transcript = readFileSync(join(daemon.home, "plugins", "shell", `${sessionId}.json`), "utf8")
    expect(transcript).toContain("echo remembered")
    expect(transcript).toContain("echo back")
  }, 60_000)

  it("serves exactly the configured providers, each under its id", async () => {
    const home = newHome()
    writeFileSync(join(home, "config.json"), JSON.stringify({
      providers: { "my-shell": { kind: "plugin", command: process.execPath, args: [shellPluginPath] } }
    }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const unknown = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: home })
    expect(unknown.status).toBe(422)
    expect(unknown.body.message).toBe(`No provider named "shell" is registered (the configured providers are "my-shell")`)

    const { agentId, sessionId } = (await api(daemon, "POST", "/v1/agents", { provider: "my-shell", cwd: home })).body
    const first = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "echo configured", wait: true })
    expect(first.body.output).toContain("configured")
    const collected = await api(daemon, "POST", `/v1/runtimes/${agentId}/collect`)
    expect(collected.body).toMatchObject({ outcome: "collected" })
    const again = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "echo resumed", wait: true })
    expect(again.body).toMatchObject({ resumed: true, sessionId })
  }, 60_000)

  it("requests without the token get 401; health needs none", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    expect((await api(daemon, "GET", "/v1/agents", undefined, "wrong")).status).toBe(401)
    const health = await fetch(`http://127.0.0.1:${daemon.port}/v1/health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toMatchObject({ status: "ok", version: expect.any(String), uptimeSeconds: expect.any(Number) })
    // Not on a terminal: one JSON object per log line, with a dated timestamp.
    const readyLine = JSON.parse(daemon.output().split("\n").find((line) => line.includes("Quiesce ready"))!)
    expect(readyLine).toMatchObject({ level: "INFO", message: expect.stringContaining("Quiesce ready on http://127.0.0.1:") })
    expect(readyLine.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T/)

    const pretty = startDaemon(newHome(), await freePort(), ["--log-format", "pretty"])
    await ready(pretty)
    expect(pretty.output()).toMatch(/^\[\d{4}-\d{2}-\d{2}T[\d:.]+Z\] INFO .*Quiesce ready/m)
  }, 30_000)

  it("a bad configuration exits with a clear message before anything listens", async () => {
    const home = newHome()
    writeFileSync(join(home, "config.json"), JSON.stringify({ agents: { idlePeriod: "-5m" } }))
    const daemon = startDaemon(home, await freePort())
    expect(await exited(daemon.process)).toBe(1)
    expect(daemon.output()).toContain(`["agents"]["idlePeriod"]`)
    expect(daemon.output()).not.toContain("Quiesce ready")
  }, 30_000)

  it("a daemon that cannot listen exits 1, and its log in the home says why", async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    try {
      const address = taken.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const daemon = startDaemon(newHome(), port)
      expect(await exited(daemon.process)).toBe(1)
      const logged = runCli(daemon, "logs", "--json")
      expect(logged.status, logged.stderr).toBe(0)
      const lines = logged.stdout.trim().split("\n").map((line) => JSON.parse(line))
      expect(lines.at(-1)).toMatchObject({ level: "ERROR", message: "Quiesce stopped on an error" })
      expect(JSON.stringify(lines.at(-1))).toMatch(/EADDRINUSE|address already in use|Failed to bind|listen/i)
    } finally {
      await new Promise((resolve) => taken.close(resolve))
    }
  }, 30_000)

  it("a second daemon on the same home is refused, naming the first", async () => {
    const home = newHome()
    const first = startDaemon(home, await freePort())
    await ready(first)
    const second = startDaemon(home, await freePort())
    expect(await exited(second.process)).toBe(1)
    expect(second.output()).toContain(`pid ${first.process.pid}`)
  }, 30_000)

  it("daemons started at once on one home: exactly one runs", async () => {
    const home = newHome()
    const daemons = await Promise.all(Array.from({ length: 4 }, async () => startDaemon(home, await freePort())))
    await until(() => daemons.some((daemon) => daemon.output().includes("Quiesce ready")), "one daemon is ready")
    const losers = daemons.filter((daemon) => !daemon.output().includes("Quiesce ready"))
    expect(losers).toHaveLength(3)
    for (const loser of losers) {
      expect(await exited(loser.process)).toBe(1)
      expect(loser.output()).toContain("in use by another Quiesce daemon")
    }
  }, 30_000)

  // SIGHUP is a closed terminal: the same orderly shutdown as SIGTERM, not an abrupt death.
  it.each(["SIGTERM", "SIGHUP"] as const)("%s releases every runtime resumable, leaves no process and no record, and a restart resumes", async (signal) => {
    const home = newHome()
    const port = await freePort()
    const daemon = startDaemon(home, port)
    await ready(daemon)
    const { agentId, sessionId } = (await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: home })).body
    await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "sleep 30 &", wait: true })
    const pid: number = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pid
    expect(existsSync(join(home, "daemon.json"))).toBe(true)
    daemon.process.kill(signal)
    expect(await exited(daemon.process)).toBe(0)
    expect(daemon.process.signalCode).toBeNull()
    await until(() => !groupAlive(pid), "the runtime's process group is gone")
    expect(existsSync(join(home, "daemon.json"))).toBe(false)
    expect(existsSync(join(home, "daemon.lock"))).toBe(false)
    expect(daemon.output()).toContain("admission closed")
    // The user's background job ended with the daemon: said by name, and in the summary (H3).
    expect(daemon.output()).toContain(`Stopping agent ${agentId} interrupts: background job`)
    expect(daemon.output()).toMatch(new RegExp(`Shutdown released 1 runtime resumable; interrupted: ${agentId} \\(background job[^)]*sleep 30`))

    const restarted = startDaemon(home, port)
    await ready(restarted)
    const shown = await api(restarted, "GET", `/v1/agents/${agentId}`)
    expect(shown.body).toMatchObject({ resident: false, lifecycle: "closed", sessionId })
    const resumed = await api(restarted, "POST", `/v1/agents/${agentId}/prompts`, { text: "echo after restart", wait: true })
    expect(resumed.body).toMatchObject({ resumed: true, sessionId })
    expect(resumed.body.output).toContain("after restart")
  }, 60_000)

  it("the CLI says plainly that no daemon runs, that the token was deleted, and that a cwd does not exist", async () => {
    const home = newHome()
    const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")
    const none = spawnSync(process.execPath, [cli, "--home", home, "status"], { encoding: "utf8", timeout: 20_000 })
    expect(none.status).toBe(1)
    expect(none.stderr.trim()).toBe(`quiesce: No daemon is running for ${home}. Start one with: quiesce --home ${home} daemon`)
    // Bare `quiesce` is the help (exit 0); a command line that does not parse exits 1, without noise.
    const bare = spawnSync(process.execPath, [cli], { encoding: "utf8", timeout: 20_000 })
    expect(bare.status).toBe(0)
    expect(bare.stdout).toContain("USAGE")
    // A typo: one line with the parser's suggestion, and where to read more; not the help page.
    const typo = spawnSync(process.execPath, [cli, "agents", "lst"], { encoding: "utf8", timeout: 20_000 })
    expect(typo.status).toBe(1)
    expect(typo.stdout).toBe("")
    expect(typo.stderr.trim().split("\n")).toEqual([
      `quiesce: Unknown subcommand "lst" for "quiesce agents" (did you mean list?)`,
      "quiesce: see: quiesce agents --help"
    ])
    const badFlag = spawnSync(process.execPath, [cli, "runtimes", "--jsn"], { encoding: "utf8", timeout: 20_000 })
    expect(badFlag.status).toBe(1)
    expect(badFlag.stderr.trim().split("\n")).toEqual([
      "quiesce: Unrecognized flag: --jsn in command quiesce runtimes (did you mean --json?)",
      "quiesce: see: quiesce runtimes --help"
    ])

    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const badCwd = runCli(daemon, "agents", "create", "--cwd", join(home, "nowhere"))
    expect(badCwd.status).toBe(1)
    expect(badCwd.stderr).toContain(`The working directory ${join(home, "nowhere")} does not exist`)

    rmSync(join(home, "token"))
    const noToken = runCli(daemon, "agents", "list")
    expect(noToken.status).toBe(1)
    expect(noToken.stderr).toContain("was deleted while the daemon")
  }, 30_000)

  it("collect says why a runtime was kept and exits 1; a released one exits 0", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const created = runCli(daemon, "agents", "create", "--cwd", daemon.home)
    expect(created.status, created.stderr).toBe(0)
    // For people, a sentence naming the new agent; its id is the one --json gives.
    const agentId = created.stdout.match(/^created (agent-\S+) \(shell, working in (.+)\)\n$/)![1]!
    expect(created.stdout).toBe(`created ${agentId} (shell, working in ${daemon.home})\n`)
    expect(runCli(daemon, "prompt", agentId, "sleep 20 &", "--wait").status).toBe(0)
    const kept = runCli(daemon, "collect", agentId)
    expect(kept.status).toBe(1)
    // The provider's veto says why, in one line, everywhere it is shown; no JSON without --json.
    const reason = "background job 1 `sleep 20`"
    expect(kept.stderr.trim()).toBe(`quiesce: ${agentId} was not released: vetoed by its provider: ${reason}`)
    expect(kept.stdout).toBe("")
    const keptJson = runCli(daemon, "collect", agentId, "--json")
    expect(keptJson.status).toBe(1)
    expect(JSON.parse(keptJson.stdout)).toMatchObject({ outcome: "retained", lastProbe: { outcome: "vetoed", message: reason } })
    const listed = JSON.parse(runCli(daemon, "runtimes", "--json").stdout)
    expect(listed).toContainEqual(expect.objectContaining({ agentId, state: "vetoed", lastProbe: expect.objectContaining({ message: reason }) }))
    expect(runCli(daemon, "runtimes").stdout).toContain(`vetoed by its provider: ${reason}`)
    const explained = runCli(daemon, "explain", agentId)
    expect(explained.status, explained.stderr).toBe(0)
    expect(explained.stdout).toMatch(/^state +vetoed$/m)
    expect(explained.stdout).toContain(`why         vetoed by its provider: ${reason}`)
    const explainedApi = await api(daemon, "GET", `/v1/runtimes/${agentId}`)
    expect(explainedApi.body).toMatchObject({ agentId, state: "vetoed", lastProbe: { outcome: "vetoed", message: reason } })
    const other = JSON.parse(runCli(daemon, "agents", "create", "--cwd", daemon.home, "--label", "team=web", "--label", "tier=1", "--json").stdout).agentId
    expect(JSON.parse(runCli(daemon, "agents", "show", other, "--json").stdout).labels).toEqual({ team: "web", tier: "1" })
    expect(runCli(daemon, "agents", "show", other).stdout).toMatch(/^labels +team=web, tier=1$/m)
    expect(runCli(daemon, "prompt", other, "true", "--wait").status).toBe(0)
    const released = runCli(daemon, "collect", other)
    expect(released.status, released.stderr).toBe(0)
    expect(released.stdout).toBe(`released ${other}: its next prompt resumes its session\n`)
    expect(runCli(daemon, "agents", "show", other).stdout).toMatch(/^state +released: the next prompt resumes its session$/m)

    // quiesce stop: an orderly shutdown (exit 0), the background job ended with its runtime.
    const { pid } = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body
    const stopped = runCli(daemon, "stop")
    expect(stopped.status, stopped.stderr).toBe(0)
    expect(await exited(daemon.process)).toBe(0)
    expect(existsSync(join(daemon.home, "daemon.json"))).toBe(false)
    await until(() => !groupAlive(pid), "the runtime's group is gone")
    expect(runCli(daemon, "stop").stderr).toContain("No daemon is running")
  }, 30_000)

  it("agents delete ends the runtime and forgets the agent; a running turn refuses it; an unconfigured provider's agent is listed and deletable", async () => {
    const home = newHome()
    const shell = { kind: "plugin", command: process.execPath, args: [shellPluginPath] }
    writeFileSync(join(home, "config.json"), JSON.stringify({ providers: { "old-shell": shell, "my-shell": shell } }))
    let daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const create = async (provider: string) => (await api(daemon, "POST", "/v1/agents", { provider, cwd: home })).body.agentId
    const old = await create("old-shell")
    expect((await api(daemon, "POST", `/v1/agents/${old}/prompts`, { text: "echo kept", wait: true })).body.state).toBe("completed")

    // A running turn refuses the delete (nothing accepted is lost): it is a blocker, named like any
    // other, and even a forced delete is refused while it runs; once it ended, the delete goes through.
    const busy = await create("my-shell")
    const running = (await api(daemon, "POST", `/v1/agents/${busy}/prompts`, { text: "sleep 30" })).body
    const busyPid: number = (await api(daemon, "GET", `/v1/agents/${busy}`)).body.pid
    const unforced = await api(daemon, "DELETE", `/v1/agents/${busy}`)
    expect(unforced.status).toBe(409)
    expect(unforced.body).toMatchObject({
      _tag: "AgentDeleteRefused",
      agentId: busy,
      blockers: expect.arrayContaining([expect.objectContaining({ agentId: busy, kind: "foreground-turn" })])
    })
    expect(runCli(daemon, "agents", "delete", busy).stderr).toContain(`quiesce: ${busy} was not deleted: its runtime has work a delete would end: foreground-turn`)
    const refused = await api(daemon, "DELETE", `/v1/agents/${busy}?force=true`)
    expect(refused.status).toBe(409)
    // The API's one error shape: an RFC 9457 problem carrying the typed error's tag and fields.
    expect(refused.contentType).toBe("application/problem+json")
    expect(refused.body).toEqual({
      type: "urn:quiesce:error:AgentBusy",
      title: "Agent busy",
      status: 409,
      detail: refused.body.message,
      _tag: "AgentBusy",
      agentId: busy,
      turnId: running.turnId,
      message: expect.stringContaining(`has turn ${running.turnId} running`)
    })
    expect(runCli(daemon, "agents", "delete", busy, "--force").stderr.trim()).toBe(`quiesce: ${refused.body.message}`)
    await api(daemon, "POST", `/v1/agents/${busy}/interrupt`)
    await until(async () => (await api(daemon, "DELETE", `/v1/agents/${busy}`)).status === 200, "the delete goes through after the turn ended")
    await until(() => !groupAlive(busyPid), "the deleted agent's runtime is gone")
    expect((await api(daemon, "GET", `/v1/agents/${busy}`)).status).toBe(404)
    expect((await api(daemon, "GET", `/v1/agents/${busy}/turns/${running.turnId}`)).status).toBe(404)

    // Through the CLI: a resident runtime with a background job ends with its agent when forced.
    const withJob = await create("my-shell")
    await api(daemon, "POST", `/v1/agents/${withJob}/prompts`, { text: "sleep 20 &", wait: true })
    const jobPid: number = (await api(daemon, "GET", `/v1/agents/${withJob}`)).body.pid
    const deleted = runCli(daemon, "agents", "delete", withJob, "--force")
    expect(deleted.status, deleted.stderr).toBe(0)
    expect(deleted.stdout).toContain(`deleted ${withJob} by force, ending: vetoed by its provider`)
    await until(() => !groupAlive(jobPid), "its runtime's group is gone")
    expect(runCli(daemon, "agents", "delete", withJob).stderr.trim()).toBe(`quiesce: No agent with id ${withJob}`)

    // The provider leaves the configuration: its agent is still listed, says so, and can be deleted.
    expect(runCli(daemon, "stop").status).toBe(0)
    writeFileSync(join(home, "config.json"), JSON.stringify({ providers: { "my-shell": shell } }))
    daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const listed = JSON.parse(runCli(daemon, "agents", "list", "--json").stdout)
    expect(listed).toEqual([expect.objectContaining({ agentId: old, provider: "old-shell", providerAvailable: false, resident: false })])
    expect(runCli(daemon, "agents", "list").stdout).toMatch(new RegExp(`${old} +old-shell \\(not configured\\) +released`))
    const prompted = await api(daemon, "POST", `/v1/agents/${old}/prompts`, { text: "echo again", wait: true })
    expect(prompted.status).toBe(422)
    expect(prompted.body.message).toContain(`No provider named "old-shell"`)
    expect(runCli(daemon, "agents", "delete", old).status).toBe(0)
    expect(JSON.parse(runCli(daemon, "agents", "list", "--json").stdout)).toEqual([])
  }, 90_000)

  it("config check names a provider command that cannot be found, and a home that does not exist yet", () => {
    const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")
    const check = (home: string) =>
      spawnSync(process.execPath, [cli, "--home", home, "config", "check"], { encoding: "utf8", timeout: 20_000 })
    const home = newHome()
    expect(check(home).status).toBe(0)
    // Without --home: $QUIESCE_HOME, else $XDG_STATE_HOME/quiesce; never the directory it runs in.
    const { QUIESCE_HOME: _, ...environment } = process.env
    const byDefault = spawnSync(process.execPath, [cli, "config", "check"], {
      encoding: "utf8",
      timeout: 20_000,
      cwd: home,
      env: { ...environment, XDG_STATE_HOME: join(home, "state") }
    })
    expect(byDefault.stdout).toContain(`no config.json in ${join(home, "state", "quiesce")}: the daemon uses the defaults`)
    const named = spawnSync(process.execPath, [cli, "config", "check"], {
      encoding: "utf8",
      timeout: 20_000,
      env: { ...environment, QUIESCE_HOME: home }
    })
    expect(named.stdout).toContain(`no config.json in ${home}: the daemon uses the defaults`)
    const fresh = check(join(home, "not-yet"))
    expect(fresh.status).toBe(0)
    expect(fresh.stdout).toContain("does not exist yet")
    writeFileSync(join(home, "config.json"), JSON.stringify({
      providers: {
        codex: { kind: "codex", command: "/nonexistent/codex" },
        mine: { kind: "plugin", command: "no-such-plugin-binary-for-quiesce" },
        shell: { kind: "shell" },
        node: { kind: "plugin", command: process.execPath }
      }
    }))
    const bad = check(home)
    expect(bad.status).toBe(1)
    expect(bad.stderr).toContain(`providers.codex.command: "/nonexistent/codex" is not an executable file`)
    expect(bad.stderr).toContain(`providers.mine.command: "no-such-plugin-binary-for-quiesce" is not found on PATH`)
    expect(bad.stderr).not.toContain("providers.node")

    // A negative flag value is the flag's value, refused naming the flag, before the home is touched.
    const untouched = join(home, "untouched")
    for (const [flag, words] of [["--idle-period", "invalid duration \"-5m\": must not be negative"], ["--port", "between 0 and 65535"]]) {
      const value = flag === "--port" ? "-1" : "-5m"
      const refused = spawnSync(process.execPath, [cli, "--home", untouched, "daemon", flag!, value], { encoding: "utf8", timeout: 20_000 })
      expect(refused.status).toBe(1)
      expect(refused.stderr).toContain(`quiesce: ${flag}: `)
      expect(refused.stderr).toContain(words)
    }
    expect(existsSync(untouched)).toBe(false)
  }, 60_000)
})
