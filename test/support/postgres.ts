/**
 * A real PostgreSQL server for the tests that need one: `initdb` in a temporary folder, then
 * `postgres` on a free loopback port, in a process group of its own. As root (where PostgreSQL
 * refuses to run) both run as the unprivileged `nobody`. The server's files live in the
 * temporary folder and go with it; `stop` ends the server by its own pid and waits for it.
 *
 * The binaries are looked up on PATH, then in Debian's `/usr/lib/postgresql/<version>/bin`.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readdirSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { freePort, until } from "./daemonProcess.ts"

export interface PostgresServer {
  readonly port: number
  /** A connection URL to database `database` (the server starts with `postgres` only). */
  readonly url: (database?: string) => string
  /** Creates an empty database and returns its URL. */
  readonly createDatabase: (name: string) => string
  /** Runs `statement` in `database` through psql; its rows, one a line, columns split by `|`. */
  readonly query: (database: string, statement: string) => string
  readonly stop: () => Promise<void>
}

const user = "quiesce"
const nobody = 65534

const onPath = (name: string): string | undefined => {
  const found = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" })
  return found.status === 0 ? found.stdout.trim() || undefined : undefined
}

/** The folder holding `initdb`, `postgres` and `psql`, or undefined when PostgreSQL is not installed. */
export const postgresBin = (): string | undefined => {
  const initdb = onPath("initdb")
  // Debian links initdb and postgres into a PATH folder, but not psql: the real folder has all three.
  if (initdb !== undefined) return dirname(realpathSync(initdb))
  const root = "/usr/lib/postgresql"
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root).filter((name) => /^\d+$/.test(name)).sort((a, b) => Number(b) - Number(a))
  const bin = versions.map((version) => join(root, version, "bin")).find((dir) => existsSync(join(dir, "initdb")))
  return bin
}

const asRoot = process.getuid?.() === 0

/** Runs `command` as the server's owner: `nobody` when we are root, ourselves otherwise. */
const owned = (command: string, args: ReadonlyArray<string>): [string, ReadonlyArray<string>] =>
  asRoot
    ? ["setpriv", [`--reuid=${nobody}`, `--regid=${nobody}`, "--clear-groups", command, ...args]]
    : [command, args]

const run = (command: string, args: ReadonlyArray<string>, what: string) => {
  const [file, argv] = owned(command, args)
  const result = spawnSync(file, argv, { encoding: "utf8" })
  if (result.status !== 0) throw new Error(`${what} failed (${result.status}): ${result.stderr || result.stdout}`)
  return result.stdout
}

/**
 * Starts a fresh server; fails with PostgreSQL's own message when it cannot. `settings` are
 * more server settings (`name=value`), e.g. `shared_preload_libraries=pg_stat_statements`.
 */
export const startPostgres = async (settings: ReadonlyArray<string> = []): Promise<PostgresServer> => {
  const bin = postgresBin()
  if (bin === undefined) throw new Error("PostgreSQL is not installed: initdb is neither on PATH nor in /usr/lib/postgresql/*/bin")
  const folder = mkdtempSync(join(tmpdir(), "quiesce-pg-"))
  if (asRoot) chownSync(folder, nobody, nobody)
  const data = join(folder, "data")
  try {
    run(join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", user, "-E", "UTF8", "--no-sync"], "initdb")
  } catch (error) {
    rmSync(folder, { recursive: true, force: true })
    throw error
  }
  const port = await freePort()
  const [file, argv] = owned(join(bin, "postgres"), [
    "-D", data, "-k", folder, "-h", "127.0.0.1", "-p", String(port),
    // A test server: nothing here must survive a power cut.
    "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
    "-c", "max_connections=200",
    ...settings.flatMap((setting) => ["-c", setting])
  ])
  const server: ChildProcess = spawn(file, argv, { detached: true, stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  server.stdout?.on("data", (chunk) => (output += String(chunk)))
  server.stderr?.on("data", (chunk) => (output += String(chunk)))
  let exited = false
  const gone = new Promise<void>((resolve) => server.once("exit", () => {
    exited = true
    resolve()
  }))
  const signal = (target: number, name: NodeJS.Signals) => {
    try {
      process.kill(target, name)
    } catch {
      // Gone already.
    }
  }
  // A test process that ends without stopping it (a failed hook, an exit) still takes it down.
  const onExit = () => {
    if (!exited && server.pid !== undefined) signal(-server.pid, "SIGKILL")
  }
  process.once("exit", onExit)
  const psql = (database: string, statement: string) =>
    run(join(bin, "psql"), ["-h", "127.0.0.1", "-p", String(port), "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1", "-qAtc", statement], "psql")
  const stop = async () => {
    process.removeListener("exit", onExit)
    if (!exited && server.pid !== undefined) {
      // SIGINT is PostgreSQL's fast shutdown: it ends its backends and exits.
      signal(server.pid, "SIGINT")
      await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, 10_000))])
      if (!exited) signal(-server.pid, "SIGKILL")
      await gone
    }
    rmSync(folder, { recursive: true, force: true })
  }
  try {
    await until(() => {
      if (exited) throw new Error(`postgres exited at start:\n${output}`)
      return output.includes("ready to accept connections")
    }, "PostgreSQL is ready", 30_000)
  } catch (error) {
    await stop()
    throw error
  }
  const url = (database = "postgres") => `postgres://${user}@127.0.0.1:${port}/${database}`
  return {
    port,
    url,
    createDatabase: (name) => {
      psql("postgres", `CREATE DATABASE "${name}"`)
      return url(name)
    },
    query: psql,
    stop
  }
}

