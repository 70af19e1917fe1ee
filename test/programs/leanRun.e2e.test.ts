/**
 * The way the README runs Quiesce is the built one: `npm start` and `npm run hub` run
 * bin/quiesce.mjs (the CLI's bundle), the daemons a built hub launches run it too, and so do the
 * shell runtimes of a built daemon (dist/plugins/shell/main.cjs) — never the TypeScript sources.
 * The `quiesce` command on PATH (bin/quiesce) hands over to the project's Node by exec: the
 * process it starts is the command itself, with no wrapper left beside it, whatever `node` is on PATH.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { readStat } from "../../src/platform/procfs.ts"
import { liveProcesses } from "../../src/platform/detachedGroups.ts"
import { api, cleanUpDaemons, freePort, newHome, ready, startDaemon, until } from "../support/daemonProcess.ts"
import { cleanUpHubs, daemonRecord, hubApi, newHubRoot, startHub, writeHubConfig } from "../support/hubProcess.ts"

const root = realpathSync(join(import.meta.dirname, "../.."))
const builtCli = join(root, "bin/quiesce.mjs")
const projectNode = realpathSync(join(root, "node_modules/node/bin/node"))

/** A process's command line, its words. */
const commandLine = (pid: number) => {
  const cwd = readlinkSync(`/proc/${pid}/cwd`)
  return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((word) => word !== "")
    .map((word) => (word.startsWith(".") || /^[\w-]+\//.test(word) ? resolve(cwd, word) : word))
}

/** A Node command line from its script on: the Node and its flags left out. */
const fromScript = (line: ReadonlyArray<string>) => line.slice(1 + line.slice(1).findIndex((word) => !word.startsWith("-")))

/** The command lines of every live process of group `pgid`. */
const groupCommandLines = (pgid: number) =>
  (liveProcesses() ?? []).filter((stat) => stat.pgid === pgid).flatMap((stat) => {
    try {
      return [commandLine(stat.pid)]
    } catch {
      return []
    }
  })

/** No TypeScript source runs in these command lines. */
const noSources = (lines: ReadonlyArray<ReadonlyArray<string>>) => lines.flat().filter((word) => word.endsWith(".ts"))

/** The daemon's record in its home, once it is written. */
const daemonPid = async (home: string) => {
  await until(() => existsSync(join(home, "daemon.json")), "the daemon writes its record")
  const pid: number = JSON.parse(readFileSync(join(home, "daemon.json"), "utf8")).pid
  return pid
}

afterEach(async () => {
  await cleanUpHubs()
  await cleanUpDaemons()
})

describe("the lean way to run", () => {
  it("npm start runs the daemon from the build, and its shell runtimes from their built file", async () => {
    const home = newHome()
    const daemon = startDaemon(home, await freePort(), [], { command: ["npm", "start", "--silent", "--"] })
    await ready(daemon)
    const pid = await daemonPid(home)
    expect(commandLine(pid)).toContain("--max-semi-space-size=1")
    expect(fromScript(commandLine(pid)).slice(0, 3)).toEqual([builtCli, "daemon", "--home"])
    const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: home })
    expect(created.status).toBe(201)
    const runtimes = (liveProcesses() ?? []).filter((stat) => stat.ppid === pid).map((stat) => commandLine(stat.pid))
    expect(runtimes.map((line) => fromScript(line)[0])).toContain(join(root, "dist/plugins/shell/main.cjs"))
    expect(noSources([...groupCommandLines(daemon.process.pid!), ...runtimes])).toEqual([])
  }, 60_000)

  it("npm run hub runs the hub from the build, and the daemons it launches run the build too", async () => {
    const hubRoot = newHubRoot()
    const hubHome = join(hubRoot, "hub")
    const dir = join(hubRoot, "work")
    writeHubConfig(hubHome, [{ name: "work", dir }])
    const hub = await startHub(hubHome, ["npm", "run", "--silent", "hub", "--"])
    const hubLines = groupCommandLines(hub.process.pid!)
    expect(hubLines.some((line) => fromScript(line)[0] === builtCli && fromScript(line)[1] === "hub")).toBe(true)
    expect(noSources(hubLines)).toEqual([])
    const created = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "shell", cwd: hubRoot })
    expect(created.status).toBe(201)
    const record = daemonRecord(dir)
    expect(record).toBeDefined()
    const daemonLine = commandLine(record!.pid)
    expect(daemonLine).toContain("--max-semi-space-size=1")
    expect(fromScript(daemonLine).slice(0, 2)).toEqual([builtCli, "--home"])
    expect(daemonLine).toContain("daemon")
    expect(noSources(groupCommandLines(record!.pid))).toEqual([])
  }, 60_000)

  it("bin/quiesce execs the project's Node even when an older node is first on PATH: no wrapper stays", async () => {
    const home = newHome()
    const daemon = startDaemon(home, await freePort(), [], {
      command: [join(root, "bin/quiesce"), "daemon"],
      // The machine's own node (/usr/bin, Node 20 on a Debian machine) found first.
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` }
    })
    await ready(daemon)
    const pid = await daemonPid(home)
    // The process the test started is the daemon itself: the script became the project's Node.
    expect(pid).toBe(daemon.process.pid)
    expect(realpathSync(`/proc/${pid}/exe`)).toBe(projectNode)
    expect(readStat(pid)?.ppid).toBe(process.pid)
    expect(fromScript(commandLine(pid)).slice(0, 2)).toEqual([builtCli, "daemon"])
    // Nothing else lives in its group: no wrapper, no second Node.
    expect((liveProcesses() ?? []).filter((stat) => stat.pgid === pid).map((stat) => stat.pid)).toEqual([pid])
  }, 60_000)

  it("a clone without a build says in one line how to build it", () => {
    const clone = mkdtempSync(join(tmpdir(), "quiesce-unbuilt-"))
    try {
      mkdirSync(join(clone, "bin"))
      copyFileSync(builtCli, join(clone, "bin/quiesce.mjs"))
      const run = spawnSync(process.execPath, [join(clone, "bin/quiesce.mjs"), "daemon"], { encoding: "utf8", timeout: 20_000 })
      expect(run.status).toBe(1)
      expect(run.stderr.trim().split("\n")).toEqual(["quiesce is not built here: run npm run build (npm ci does it too)"])
    } finally {
      rmSync(clone, { recursive: true, force: true })
    }
  })
})
