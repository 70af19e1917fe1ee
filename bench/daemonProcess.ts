/**
 * Daemons the benchmarks start: what one is once ready, asking its API, its resident memory, and
 * stopping it (its whole process group) with its home removed.
 */
import type { ChildProcess } from "node:child_process"
import { readFileSync, rmSync } from "node:fs"

/** A daemon started over a new home, ready on `port`. */
export interface BenchDaemon {
  readonly child: ChildProcess
  readonly port: number
  readonly home: string
  readonly token: string
}

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
