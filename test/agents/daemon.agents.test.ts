/**
 * The daemon serves every native provider from its configuration: for each pinned CLI, a daemon
 * process whose `config.json` names it creates an agent and runs a turn against the fake model;
 * the idle runtime is released (by the collector, or by the daemon's shutdown where the CLI's
 * probe can never permit) and the next prompt resumes the same session.
 */
import { Effect, Exit, Scope } from "effect"
import { existsSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { agentCliBinary } from "../../scripts/agentClis.ts"
import { api, cleanUpDaemons, type Daemon, exited, freePort, groupAlive, newHome, ready, runCli, startDaemon, until } from "../support/daemonProcess.ts"
import { claudeCli } from "./support/claudeCli.ts"
import { realClis } from "./support/clis.ts"
import type { Launch, RealCli } from "./support/realAgent.ts"
import { scriptedPolicy } from "./support/fakeModel/policy.ts"
import { fakeModelServer } from "./support/fakeModel/server.ts"

afterEach(cleanUpDaemons)

/**
 * Runs the body against a daemon whose `config.json` names the CLI, launched as `cli.launch` says
 * (after `adjust`), with the fake model serving for the whole body. Skips, saying why, when the
 * pinned CLI is not installed.
 */
const withConfiguredDaemon = async (
  cli: RealCli,
  skip: (note: string) => void,
  body: (daemon: Daemon, cliHome: string) => Promise<void>,
  adjust: (launch: Launch) => Launch = (launch) => launch
) => {
  const binary = agentCliBinary(cli.cli)
  if ("missing" in binary) return skip(binary.missing)
  const scope = Effect.runSync(Scope.make())
  try {
    const model = await Effect.runPromise(Scope.provide(fakeModelServer(scriptedPolicy(cli.shell), cli.dialects), scope))
    const home = newHome()
    const cliHome = join(home, "cli")
    mkdirSync(cliHome)
    const launch = adjust(cli.launch({ binary: binary.path, home: cliHome, model }))
    writeFileSync(join(home, "config.json"), JSON.stringify({
      providers: {
        [cli.provider]: {
          kind: cli.cli,
          command: launch.command,
          ...(launch.args === undefined ? {} : { args: launch.args }),
          env: launch.env,
          ...cli.configOptions
        }
      }
    }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    await body(daemon, cliHome)
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

describe("the daemon with native providers", () => {
  for (const cli of realClis) {
    it(`${cli.provider}: create, release and resume through the daemon`, (ctx) =>
      withConfiguredDaemon(cli, (note) => ctx.skip(note), async (daemon, cliHome) => {
        const created = await api(daemon, "POST", "/v1/agents", { provider: cli.provider, cwd: cliHome })
        expect(created.status, JSON.stringify(created.body)).toBe(201)
        const { agentId } = created.body
        const first = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "hello", wait: true })
        expect(first.status, JSON.stringify(first.body)).toBe(200)
        const shown = await api(daemon, "GET", `/v1/agents/${agentId}`)
        const sessionId: string = shown.body.sessionId
        expect(sessionId).toBeTruthy()
        let pid: number = shown.body.pid

        let collected = await api(daemon, "POST", `/v1/runtimes/${agentId}/collect`)
        if (cli.neverReleasedBecause === undefined) {
          // A runtime may still be settling right after its turn (its own bookkeeping, a title request).
          await until(async () => {
            if (collected.body.outcome !== "collected") collected = await api(daemon, "POST", `/v1/runtimes/${agentId}/collect`)
            return collected.body.outcome === "collected"
          }, `the idle ${cli.provider} runtime is released (last answer ${JSON.stringify(collected.body)})`, 30_000)
          await until(() => !groupAlive(pid), "its process group is gone")
          const again = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "again", wait: true })
          expect(again.body).toMatchObject({ resumed: true, sessionId })
          pid = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pid
        } else {
          expect(collected.body.outcome, cli.neverReleasedBecause).toBe("retained")
        }

        // Shutdown releases the runtime resumable; the next daemon on the home resumes it.
        daemon.process.kill("SIGTERM")
        expect(await exited(daemon.process)).toBe(0)
        await until(() => !groupAlive(pid), "the runtime's process group is gone after shutdown")
        const restarted = startDaemon(daemon.home, daemon.port)
        await ready(restarted)
        const resumed = await api(restarted, "POST", `/v1/agents/${agentId}/prompts`, { text: "after restart", wait: true })
        expect(resumed.body).toMatchObject({ resumed: true, sessionId })
        const last = (await api(restarted, "GET", `/v1/agents/${agentId}`)).body.pid
        restarted.process.kill("SIGTERM")
        expect(await exited(restarted.process)).toBe(0)
        await until(() => !groupAlive(last), "the resumed runtime's process group is gone")
      }), 180_000)
  }

  it("claude: a permission the runtime asks is listed, keeps the runtime, and is answered through the daemon", (ctx) =>
    withConfiguredDaemon(
      claudeCli,
      (note) => ctx.skip(note),
      async (daemon, cliHome) => {
        const { agentId } = (await api(daemon, "POST", "/v1/agents", { provider: "claude", cwd: cliHome })).body
        const asked = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "RUN: echo permitted > answer.txt" })
        expect(asked.status, JSON.stringify(asked.body)).toBe(200)

        let permission = ""
        await until(async () => {
          permission = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pendingPermissions[0] ?? ""
          return permission !== ""
        }, "the agent lists the permission it waits on", 60_000)
        const held = await api(daemon, "POST", `/v1/runtimes/${agentId}/collect`)
        expect(held.body.outcome).toBe("retained")
        expect(JSON.stringify(held.body.blockers)).toContain("pending-permission")

        const answered = runCli(daemon, "permit", agentId, permission)
        expect(answered.status, answered.stderr).toBe(0)
        await until(() => existsSync(join(cliHome, "answer.txt")), "the permitted command ran", 60_000)
        await until(
          async () => (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pendingPermissions.length === 0,
          "no permission is pending"
        )
        daemon.process.kill("SIGTERM")
        expect(await exited(daemon.process)).toBe(0)
      },
      // Without the tool allowed up front, Claude Code asks before running it.
      (launch) => ({
        ...launch,
        args: (launch.args ?? []).filter((arg, i, all) => arg !== "--allowedTools" && all[i - 1] !== "--allowedTools")
      })
    ), 180_000)
})
