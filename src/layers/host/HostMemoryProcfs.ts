/**
 * HostMemory from Linux: `MemAvailable` of `/proc/meminfo`, and, when this process is in a cgroup
 * v2 (the `0::` line of `/proc/self/cgroup`), `memory.max − memory.current` of its cgroup and of
 * every ancestor that sets a limit (a limit anywhere above binds too). The smallest wins. A
 * cgroup level without a limit (`max`) or whose files cannot be read adds nothing; no
 * `MemAvailable` and no limit is `None`. Read fresh on every call: a few small files.
 */
import * as path from "node:path"
import { Effect, Layer, Option } from "effect"
import { HostMemory } from "../../services/HostMemory.ts"
import { readText } from "../../platform/procfs.ts"

/** Where the layer reads; a test points them at files of its own. */
export interface HostMemoryPaths {
  /** Default `/proc/meminfo`. */
  readonly meminfo?: string
  /** Default `/proc/self/cgroup`. */
  readonly selfCgroup?: string
  /** Where the cgroup v2 hierarchy is mounted; default `/sys/fs/cgroup`. */
  readonly cgroupRoot?: string
}

/** `MemAvailable` of a `/proc/meminfo` text, in bytes; undefined when absent. */
export const parseMemAvailable = (text: string): number | undefined => {
  const match = /^MemAvailable:\s+(\d+)\s*kB$/m.exec(text)
  return match === null ? undefined : Number(match[1]) * 1024
}

/** The cgroup v2 path of a `/proc/<pid>/cgroup` text (its `0::` line); undefined on a v1-only host. */
export const cgroupV2Path = (text: string): string | undefined => {
  const line = text.split("\n").find((entry) => entry.startsWith("0::"))
  return line === undefined ? undefined : line.slice(3).trim()
}

const readNumber = (file: string): number | undefined => {
  const text = readText(file)?.trim()
  if (text === undefined || text === "" || text === "max") return undefined
  const value = Number(text)
  return Number.isSafeInteger(value) ? value : undefined
}

/** The least headroom (`memory.max − memory.current`, at least 0) of the cgroup and its ancestors that set a limit. */
export const cgroupHeadroom = (cgroupRoot: string, cgroup: string): number | undefined => {
  let least: number | undefined
  for (let dir = path.posix.normalize(`/${cgroup}`); ; dir = path.posix.dirname(dir)) {
    const at = path.join(cgroupRoot, dir)
    const max = readNumber(path.join(at, "memory.max"))
    const current = max === undefined ? undefined : readNumber(path.join(at, "memory.current"))
    if (max !== undefined && current !== undefined) {
      const headroom = Math.max(0, max - current)
      least = least === undefined ? headroom : Math.min(least, headroom)
    }
    if (dir === "/") return least
  }
}

/** The host's available memory now, read from `paths`; undefined when nothing could be read. */
export const readAvailable = (paths: HostMemoryPaths = {}): number | undefined => {
  const meminfo = readText(paths.meminfo ?? "/proc/meminfo")
  const available = meminfo === undefined ? undefined : parseMemAvailable(meminfo)
  const selfCgroup = readText(paths.selfCgroup ?? "/proc/self/cgroup")
  const cgroup = selfCgroup === undefined ? undefined : cgroupV2Path(selfCgroup)
  const headroom = cgroup === undefined ? undefined : cgroupHeadroom(paths.cgroupRoot ?? "/sys/fs/cgroup", cgroup)
  if (available === undefined) return headroom
  return headroom === undefined ? available : Math.min(available, headroom)
}

/** HostMemory from procfs and the cgroup v2 hierarchy; see the module comment. */
export const layer = (paths: HostMemoryPaths = {}): Layer.Layer<HostMemory> =>
  Layer.succeed(HostMemory, HostMemory.of({ available: Effect.sync(() => Option.fromNullishOr(readAvailable(paths))) }))
