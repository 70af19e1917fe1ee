/**
 * Opening and stopping a host as a user meets them (H1, H3), with real daemon processes: a taken
 * port and a locked home each say what is wrong in one line and leave the home as it was; a
 * service manager's `$NOTIFY_SOCKET` gets `READY=1` only once the record is written; the shutdown
 * deadline follows the providers' close graces and is what the systemd unit waits beyond.
 */
import { spawn, spawnSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { connect } from "node:net"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { api, cleanUpDaemons, exited, freePort, groupAlive, newHome, ready, startDaemon, until } from "../support/daemonProcess.ts"

const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")

afterEach(cleanUpDaemons)

/** Another program listening on a loopback port (a process group of its own), to be ended with `release`. */
const occupy = async (port: number) => {
  const holder = spawn(process.execPath, ["-e", `require("node:net").createServer().listen(${port}, "127.0.0.1")`, "port-holder"], {
    detached: true,
    stdio: "ignore"
  })
  const listening = () =>
    new Promise<boolean>((resolve) => {
      const probe = connect(port, "127.0.0.1")
      probe.once("connect", () => {
        probe.destroy()
        resolve(true)
      })
      probe.once("error", () => resolve(false))
    })
  await until(listening, "the other program listens")
  return {
    pid: holder.pid!,
    release: async () => {
      process.kill(-holder.pid!, "SIGKILL")
      await exited(holder)
    }
  }
}

/** The one line a failed start printed on stderr, and its exit code. */
const failedStart = async (home: string, port: number) => {
  const daemon = startDaemon(home, port)
  const code = await exited(daemon.process)
  const lines = daemon.output().split("\n").filter((line) => line.startsWith("quiesce: "))
  return { code, lines }
}

describe("opening a daemon (H1)", () => {
  it("a taken port names the port and the process holding it, exits 1, and leaves the home as it was", async () => {
    const home = newHome()
    const port = await freePort()
    const holder = await occupy(port)
    try {
      const { code, lines } = await failedStart(home, port)
      expect(code).toBe(1)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(new RegExp(
        `^quiesce: Cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use by pid ${holder.pid} \\(\\S*node -e .*port-holder\\)\\. ` +
          `Choose another port with --port or daemon\\.port in config\\.json$`
      ))
      // Only the log that says why: no token, database, record, lock or plugins folder.
      expect(readdirSync(home)).toEqual(["daemon.log"])
    } finally {
      await holder.release()
    }
  }, 30_000)

  it("a home kept from an earlier run keeps its token and database when a start fails", async () => {
    const home = newHome()
    const port = await freePort()
    const first = startDaemon(home, port)
    await ready(first)
    const token = first.token()
    first.process.kill("SIGTERM")
    expect(await exited(first.process)).toBe(0)
    const before = readdirSync(home).sort()
    const holder = await occupy(port)
    try {
      const { code } = await failedStart(home, port)
      expect(code).toBe(1)
    } finally {
      await holder.release()
    }
    expect(readdirSync(home).sort()).toEqual(before)
    const again = startDaemon(home, port)
    await ready(again)
    expect(again.token()).toBe(token)
  }, 40_000)

  it("a locked home names the pid holding it and touches nothing", async () => {
    const home = newHome()
    const first = startDaemon(home, await freePort())
    await ready(first)
    const before = readdirSync(home).sort()
    const { code, lines } = await failedStart(home, await freePort())
    expect(code).toBe(1)
    expect(lines).toEqual([`quiesce: ${home} is in use by another Quiesce daemon (pid ${first.process.pid})`])
    expect(readdirSync(home).sort()).toEqual(before)
  }, 30_000)

  it("a database that is not one stops the start at storage, and the file is left for the user", async () => {
    const home = newHome()
    writeFileSync(join(home, "quiesce.sqlite"), "this is not a database, it is a note that must survive\n".repeat(200))
    const { code, lines } = await failedStart(home, await freePort())
    expect(code).toBe(1)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^quiesce: .*quiesce\.sqlite.*not a database/)
    expect(readdirSync(home).sort()).toEqual(["daemon.log", "quiesce.sqlite"])
  }, 30_000)

  it("READY=1 reaches $NOTIFY_SOCKET once, after the record is written, and agents do not inherit the socket", async () => {
    const systemdNotify = spawnSync("systemd-notify", ["--version"], { encoding: "utf8" })
    const python = spawnSync("python3", ["--version"], { encoding: "utf8" })
    // Both ship with the machines CI runs on; without them this says so instead of passing.
    expect(systemdNotify.status, "systemd-notify is installed").toBe(0)
    expect(python.status, "python3 is installed").toBe(0)
    const home = newHome()
    const socket = join(home, "notify.sock")
    // A stand-in service manager: a Unix datagram socket, as systemd's. It answers the barrier
    // systemd-notify waits on (closing the fds it is sent) and notes whether daemon.json exists.
    const manager = spawn("python3", ["-u", "-c", `
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("listening", flush=True)
while True:
    data, ancillary, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
            for fd in fds:
                os.close(fd)
    text = data.decode().replace("\\n", " ").strip()
    print(text, "record=" + str(os.path.exists(sys.argv[2])), flush=True)
`, socket, join(home, "daemon.json")], { detached: true, stdio: ["ignore", "pipe", "inherit"] })
    let heard = ""
    manager.stdout?.on("data", (chunk) => (heard += String(chunk)))
    try {
      await until(() => heard.includes("listening"), "the stand-in manager listens")
      const daemon = startDaemon(home, await freePort(), [], { env: { NOTIFY_SOCKET: socket } })
      await ready(daemon)
      // The whole line: the manager's output can arrive in pieces, "record=" after the rest.
      await until(() => /READY=1[^\n]*\n/.test(heard), "READY=1 arrives")
      const readyLines = heard.split("\n").filter((line) => line.includes("READY=1"))
      expect(readyLines).toHaveLength(1)
      expect(readyLines[0]).toContain("record=True")
      expect(readyLines[0]).toContain(`STATUS=Listening on http://127.0.0.1:${daemon.port}`)
      // A shell agent's environment has no NOTIFY_SOCKET.
      const created = await fetch(`http://127.0.0.1:${daemon.port}/v1/agents`, {
        method: "POST",
        headers: { authorization: `Bearer ${daemon.token()}`, "content-type": "application/json" },
        body: JSON.stringify({ provider: "shell", cwd: home })
      })
      const { agentId } = await created.json()
      const printed = await fetch(`http://127.0.0.1:${daemon.port}/v1/agents/${agentId}/prompts`, {
        method: "POST",
        headers: { authorization: `Bearer ${daemon.token()}`, "content-type": "application/json" },
        body: JSON.stringify({ text: "echo \"socket=[${NOTIFY_SOCKET:-}]\"", wait: true })
      })
      expect((await printed.json()).output).toContain("socket=[]")
    } finally {
      if (manager.pid !== undefined) process.kill(-manager.pid, "SIGKILL")
      await exited(manager)
    }
  }, 40_000)
})

describe("a signal while opening (H1)", () => {
  it.each(["SIGTERM", "SIGHUP"] as const)("%s during the providers stage stops the start: exit 130, no record, no lock, the home's data kept", async (signal) => {
    const home = newHome()
    const port = await freePort()
    const caught = join(home, "caught-term")
    // A process a runtime started in a session of its own, which outlives a SIGKILLed daemon (and
    // its plugin) and catches SIGTERM: the next start's providers stage finds it by the runtime's
    // marker, ends it as a leftover, and waits its grace (2 s) while it runs on.
    const first = startDaemon(home, port)
    await ready(first)
    const created = await api(first, "POST", "/v1/agents", { provider: "shell", cwd: home })
    const { agentId } = created.body
    await api(first, "POST", `/v1/agents/${agentId}/prompts`, {
      text: `setsid sh -c "trap 'touch ${caught}' TERM; while :; do sleep 0.2; done" >/dev/null 2>&1 &`.replace(/&$/, "& true"),
      wait: true
    })
    const plugin: number = (await api(first, "GET", `/v1/agents/${agentId}`)).body.pid
    // The escaped process leads a group of its own: found by its command line, among processes of ours.
    let group = 0
    await until(() => {
      const found = readdirSync("/proc").filter((name) => /^\d+$/.test(name)).find((name) => {
        try {
          return readFileSync(`/proc/${name}/cmdline`, "utf8").includes(`touch ${caught}`)
        } catch {
          return false
        }
      })
      group = found === undefined ? 0 : Number(found)
      return group > 0
    }, "the escaped process runs")
    const token = first.token()
    process.kill(-first.process.pid!, "SIGKILL")
    await exited(first.process)
    try {
      // The plugin sees its daemon gone and ends its jobs itself (the job catches that too); once
      // the plugin has exited, only the job is left, and what it catches next is the new start's.
      await until(() => !existsSync(`/proc/${plugin}/cmdline`) || readFileSync(`/proc/${plugin}/cmdline`, "utf8") === "", "the plugin has exited")
      await until(() => groupAlive(group), "the escaped process still runs")
      rmSync(caught, { force: true })
      const second = startDaemon(home, port)
      await until(() => existsSync(caught), "the leftover process is told to end (the providers stage runs)")
      second.process.kill(signal)
      expect(await exited(second.process)).toBe(130)
      expect(second.output()).not.toContain("Quiesce ready")
      expect(existsSync(join(home, "daemon.json"))).toBe(false)
      expect(existsSync(join(home, "daemon.lock"))).toBe(false)
      expect(readdirSync(home)).toEqual(expect.arrayContaining(["token", "quiesce.sqlite"]))
      // The next start ends the leftover job (its ledger entry is still there) and opens.
      const third = startDaemon(home, port)
      await ready(third)
      expect(third.token()).toBe(token)
      await until(() => !groupAlive(group), "the leftover job's group is gone")
    } finally {
      if (groupAlive(group)) process.kill(-group, "SIGKILL")
    }
  }, 60_000)
})

describe("the shutdown deadline (H3)", () => {
  it("follows the largest close grace, is reported at start and recorded, and the systemd unit waits beyond it; a missing provider command is said", async () => {
    const home = newHome()
    writeFileSync(join(home, "config.json"), JSON.stringify({
      providers: {
        shell: { kind: "shell" },
        slow: { kind: "plugin", command: "/bin/true", closeGrace: "20s" },
        gone: { kind: "codex", command: "/nonexistent/codex" }
      }
    }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    // The providers are validated while opening: a missing command is said, and the others serve.
    expect(daemon.output()).toMatch(
      /providers\.gone\.command: \\"\/nonexistent\/codex\\" is not an executable file: creating or resuming its agents fails until it is installed/
    )
    // 2 × 20 s + the 13 s margin.
    expect(daemon.output()).toContain(`"shutdownDeadline":"53s"`)
    const record = JSON.parse(spawnSync("cat", [join(home, "daemon.json")], { encoding: "utf8" }).stdout)
    expect(record.shutdownDeadlineMillis).toBe(53_000)

    const unit = spawnSync(process.execPath, [cli, "--home", home, "daemon", "--print-systemd-unit"], { encoding: "utf8", timeout: 20_000 })
    expect(unit.status).toBe(0)
    expect(unit.stdout).toContain("Type=notify\n")
    expect(unit.stdout).toContain("KillMode=mixed\n")
    expect(unit.stdout).toContain("TimeoutStopSec=63\n")
    // Started from the sources here, the unit still runs the built command, never the TypeScript.
    expect(unit.stdout).toContain(`ExecStart=${process.execPath} --max-semi-space-size=1 ${join(import.meta.dirname, "../../bin/quiesce.mjs")} --home ${home} daemon\n`)
    expect(unit.stdout).toContain("SuccessExitStatus=75\n")
    daemon.process.kill("SIGTERM")
    expect(await exited(daemon.process)).toBe(0)
    expect(existsSync(join(home, "daemon.json"))).toBe(false)
  }, 30_000)
})
