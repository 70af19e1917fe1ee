/**
 * Daemons the benchmarks start: what one is once ready, asking its API, its resident memory, and
 * stopping it (its whole process group) with its home removed.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** A daemon started over a new home, ready on `port`. */
export interface BenchDaemon {
  readonly child: ChildProcess
  readonly port: number
  readonly home: string
  readonly token: string
}

/** A daemon started by `startDaemon`, and how long it took to be ready. */
export interface StartedDaemon extends BenchDaemon {
  readonly readyMs: number
}

/**
 * Starts a daemon over a new home (named after `label`) and waits for its ready line.
 * `commandFor(home)` is its command line; `env` is added to this process's environment, with no
 * OTLP endpoint unless `env` names one.
 */
export const startDaemon = (
  label: string,
  commandFor: (home: string) => readonly [string, ...Array<string>],
  env: Readonly<Record<string, string>> = {}
) =>
  new Promise<StartedDaemon>((resolve, reject) => {
    const home = mkdtempSync(join(tmpdir(), `quiesce-bench-${label}-`))
    const start = performance.now()
    const [command, ...args] = commandFor(home)
    const child = spawn(command, args, {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: "", ...env }
    })
    let output = ""
    const onData = (chunk: Buffer) => {
      output += String(chunk)
      const ready = /Quiesce ready on http:\/\/127\.0\.0\.1:(\d+)/.exec(output)
      if (ready === null) return
      const readyMs = performance.now() - start
      child.stdout?.off("data", onData)
      child.stderr?.off("data", onData)
      child.stdout?.resume()
      child.stderr?.resume()
      resolve({ child, readyMs, port: Number(ready[1]), home, token: readFileSync(join(home, "token"), "utf8").trim() })
    }
    child.stdout?.on("data", onData)
    child.stderr?.on("data", onData)
    child.once("exit", (code) => reject(new Error(`${command} ${args.join(" ")} exited ${code} before it was ready:\n${output}`)))
  })

/** Resident set size of one process in MiB, from procfs; NaN once it is gone. */
export const rssMiB = (pid: number): number => {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
    return line === undefined ? Number.NaN : Number(line.replace(/\D+/g, "")) / 1024
  } catch {
    return Number.NaN // gone meanwhile
  }
}

/** Stops the daemon's process group and waits for its exit, then removes its home. */
export const stopDaemon = async (daemon: BenchDaemon) => {
  daemon.child.removeAllListeners("exit")
  if (daemon.child.exitCode === null && daemon.child.pid !== undefined) {
    const exited = new Promise((resolve) => daemon.child.once("exit", resolve))
    process.kill(-daemon.child.pid, "SIGTERM")
    await exited
  }
  rmSync(daemon.home, { recursive: true, force: true })
}

/** One request to the daemon's API; its JSON answer, or an error naming the status and body. */
export const call = async (daemon: BenchDaemon, method: string, route: string, body?: unknown) => {
  const response = await fetch(`http://127.0.0.1:${daemon.port}${route}`, {
    method,
    headers: { authorization: `Bearer ${daemon.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${route} answered ${response.status}: ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}
