/**
 * A hub as a user runs it: a real `quiesce hub` process on an ephemeral loopback port over a
 * temporary hub home, and the daemons it launches (detached, in groups of their own). Time is real,
 * so every wait polls with a bound. `cleanUpHubs` (after each test) stops every hub and every daemon
 * recorded in the homes the test used, by process group, and removes the homes.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { groupAlive, until } from "./daemonProcess.ts"
import { showOnFailure } from "./failureOutput.ts"

const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")

export interface Hub {
  readonly hubHome: string
  readonly process: ChildProcess
  readonly port: number
  readonly output: () => string
  readonly token: string
}

const hubs: Array<ChildProcess> = []
const roots: Array<string> = []
/** Every daemon pid seen in a record of a test's homes, to stop whatever is left. */
const daemonPids = new Set<number>()
const daemonHomes: Array<string> = []

/** A temporary directory holding a hub home (`hub/`) and any daemon homes the test adds. */
export const newHubRoot = () => {
  const root = mkdtempSync(join(tmpdir(), "quiesce-hub-e2e-"))
  roots.push(root)
  return root
}

/** Writes `hub.json` with these homes (each `{ name, dir }`) and, if given, the daemons' idle timeout. */
export const writeHubConfig = (
  hubHome: string,
  homes: ReadonlyArray<{ readonly name: string; readonly dir: string }>,
  daemonIdleTimeout?: string
) => {
  for (const home of homes) daemonHomes.push(home.dir)
  mkdirSync(hubHome, { recursive: true })
  writeFileSync(
    join(hubHome, "hub.json"),
    JSON.stringify({ ...(daemonIdleTimeout === undefined ? {} : { daemonIdleTimeout }), homes }, null, 2)
  )
}

/** A hub home and one managed home named `work`, with the daemons' idle timeout. */
export const setUpWorkHome = (idleTimeout?: string) => {
  const root = newHubRoot()
  const hubHome = join(root, "hub")
  const dir = join(root, "work")
  writeHubConfig(hubHome, [{ name: "work", dir }], idleTimeout)
  return { root, hubHome, dir }
}

/** A shell agent in `cwd`, created through the hub in the home `work`; its id. */
export const createWorkAgent = async (hub: Hub, cwd: string): Promise<string> => {
  const created = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "shell", cwd })
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${JSON.stringify(created.body)}`)
  return created.body.agentId
}

/**
 * Starts a hub over `hubHome`; `command` stands for `quiesce hub` (e.g. `npm run hub --`), by default
 * the CLI from its sources; `env` is added to its environment (and so to its daemons').
 */
export const startHub = async (
  hubHome: string,
  command: ReadonlyArray<string> = [process.execPath, cli, "hub"],
  env?: Readonly<Record<string, string>>
): Promise<Hub> => {
  const [file, ...args] = command
  const child = spawn(file, [...args, "--home", hubHome, "--port", "0"], {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    ...(env === undefined ? {} : { env: { ...process.env, ...env } })
  })
  hubs.push(child)
  let output = ""
  child.stdout?.on("data", (chunk) => (output += String(chunk)))
  child.stderr?.on("data", (chunk) => (output += String(chunk)))
  // Kept, not printed: the hub's output shows only if the test fails.
  showOnFailure(`output of the hub (home ${hubHome})`, () => output)
  await until(() => output.includes("Quiesce hub ready") || child.exitCode !== null, "the hub is ready")
  if (!output.includes("Quiesce hub ready")) throw new Error(`the hub did not start:\n${output}`)
  const address = JSON.parse(readFileSync(join(hubHome, "hub.address.json"), "utf8"))
  return {
    hubHome,
    process: child,
    port: address.port,
    output: () => output,
    token: readFileSync(join(hubHome, "token"), "utf8").trim()
  }
}

export const hubApi = async (hub: Hub, method: string, route: string, body?: unknown) => {
  const response = await fetch(`http://127.0.0.1:${hub.port}${route}`, {
    method,
    headers: { authorization: `Bearer ${hub.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
}

/** The daemon's record in a home (and the pid noted for the clean-up), if one is there. */
export const daemonRecord = (dir: string): {
  readonly pid: number
  readonly startTime: number
  readonly instanceId: string
  readonly port: number
  readonly shutdownDeadlineMillis?: number
} | undefined => {
  const file = join(dir, "daemon.json")
  if (!existsSync(file)) return undefined
  const record = JSON.parse(readFileSync(file, "utf8"))
  daemonPids.add(record.pid)
  return record
}

export const processAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

export const inventoryRow = async (hub: Hub, name: string) =>
  (await hubApi(hub, "GET", "/v1/daemons")).body.daemons.find((row: { readonly name: string }) => row.name === name)

/** Runs the CLI against the hub home (`--home`), e.g. `quiesce --hub NAME prompt …` or `quiesce daemons`. */
export const runHubCli = (hubHome: string, ...args: Array<string>) => {
  const result = spawnSync(process.execPath, [cli, "--home", hubHome, ...args], { encoding: "utf8", timeout: 30_000 })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

/** SIGTERM (so a daemon ends its runtimes, which run in groups of their own), SIGKILL after 8 s; then none may be left. */
const stopGroups = async (pids: ReadonlyArray<number>) => {
  const alive = pids.filter(groupAlive)
  for (const pid of alive) process.kill(-pid, "SIGTERM")
  await Promise.all(alive.map((pid) =>
    until(() => !groupAlive(pid), "a process group stops on SIGTERM", 8_000).catch(() => process.kill(-pid, "SIGKILL"))
  ))
  await until(() => pids.every((pid) => !groupAlive(pid)), "every process group a test started is gone", 5_000)
}

export const cleanUpHubs = async () => {
  await stopGroups(hubs.splice(0).flatMap((child) => (child.pid === undefined ? [] : [child.pid])))
  for (const dir of daemonHomes.splice(0)) daemonRecord(dir)
  await stopGroups([...daemonPids])
  daemonPids.clear()
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true })
}
