/**
 * A daemon as a user runs it: a real process on a loopback port, with helpers to drive it through
 * its HTTP API and CLI. Time is real, so every wait polls with a bound. `cleanUpDaemons` (after
 * each test) stops what is left of the daemons started, by process group, and removes their homes.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { liveProcesses } from "../../src/platform/detachedGroups.ts"
import { showOnFailure } from "./failureOutput.ts"

const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

export const until = async (condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await condition()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`timed out waiting until ${what}`)
}

/**
 * Whether any process of group `pgid` still runs, zombies excepted. An orphan that was ended is
 * a zombie until the process that inherited it reaps it, and `kill(-pgid, 0)` counts zombies;
 * use this where the processes' parent is gone.
 */
export const groupRuns = (pgid: number) => (liveProcesses() ?? []).some((stat) => stat.pgid === pgid)

export const groupAlive = (pid: number) => {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

export interface Daemon {
  readonly home: string
  readonly port: number
  readonly process: ChildProcess
  readonly output: () => string
  readonly token: () => string
}

const started: Array<ChildProcess> = []
const homes: Array<string> = []

/**
 * Stops what is left of the daemons a test started. SIGTERM first, so a daemon left running by a
 * failed test still ends its runtimes (they run in process groups of their own, which a SIGKILL of
 * the daemon's group would orphan); SIGKILL after 8 s (within the 10 s hook timeout).
 */
export const cleanUpDaemons = async () => {
  const alive = started.splice(0).flatMap((child) => (child.pid === undefined ? [] : [child.pid])).filter(groupAlive)
  for (const pid of alive) process.kill(-pid, "SIGTERM")
  await Promise.all(alive.map((pid) =>
    until(() => !groupAlive(pid), "a daemon stops on SIGTERM", 8_000).catch(() => process.kill(-pid, "SIGKILL"))
  ))
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true })
}

export const newHome = () => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-e2e-"))
  homes.push(home)
  return home
}

export interface StartOptions {
  /** Run the daemon under this umask (octal digits, e.g. "000"), set by `sh` before it execs node. */
  readonly umask?: string | undefined
  /** Added to the daemon's environment. */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** What stands for `quiesce daemon` (e.g. `npm start --`); by default the CLI from its sources. */
  readonly command?: ReadonlyArray<string> | undefined
}

export const startDaemon = (
  home: string,
  port: number,
  flags: ReadonlyArray<string> = [],
  options: StartOptions = {}
): Daemon => {
  const [file, ...argv] = [
    ...(options.command ?? [process.execPath, cli, "daemon"]),
    "--home",
    home,
    "--port",
    String(port),
    ...flags
  ]
  // `exec` keeps the pid (and the process group) the daemon's own.
  const [command, args] = options.umask === undefined
    ? [file, argv]
    : ["sh", ["-c", `umask ${options.umask} && exec "$0" "$@"`, file, ...argv]]
  const child: ChildProcess = spawn(command, args, {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    ...(options.env === undefined ? {} : { env: { ...process.env, ...options.env } })
  })
  started.push(child)
  let output = ""
  child.stdout?.on("data", (chunk) => (output += String(chunk)))
  child.stderr?.on("data", (chunk) => (output += String(chunk)))
  // Kept, not printed: the daemon's output shows only if the test fails.
  showOnFailure(`output of the daemon on port ${port} (home ${home})`, () => output)
  return {
    home,
    port,
    process: child,
    output: () => output,
    token: () => readFileSync(join(home, "token"), "utf8").trim()
  }
}

export const ready = (daemon: Daemon) => until(() => daemon.output().includes("Quiesce ready"), "the daemon is ready")

/** A prompt through the API: `POST /v1/agents/{id}/prompts`. */
export const prompt = (
  daemon: Daemon,
  agentId: string,
  body: { readonly text: string; readonly wait?: boolean; readonly clientMessageId?: string },
  signal?: AbortSignal
) => api(daemon, "POST", `/v1/agents/${agentId}/prompts`, body, daemon.token(), signal)

/** Creates a shell agent working in the daemon's home; its id. */
export const createShellAgent = async (daemon: Daemon): Promise<string> => {
  const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: daemon.home })
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${JSON.stringify(created.body)}`)
  return created.body.agentId
}

export const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode)
    else child.once("exit", (code) => resolve(code))
  })

export const api = async (
  daemon: Daemon,
  method: string,
  route: string,
  body?: unknown,
  token = daemon.token(),
  signal?: AbortSignal
) => {
  const response = await fetch(`http://127.0.0.1:${daemon.port}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    ...(signal === undefined ? {} : { signal })
  })
  const text = await response.text()
  return { status: response.status, contentType: response.headers.get("content-type"), body: text === "" ? undefined : JSON.parse(text) }
}

// The CLI finds the daemon through the address it wrote into the home (it listens on --port).
export const runCli = (daemon: Daemon, ...args: Array<string>) => {
  const result = spawnSync(process.execPath, [cli, "--home", daemon.home, ...args], { encoding: "utf8", timeout: 20_000 })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}
