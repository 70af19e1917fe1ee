/**
 * Which process listens on a TCP port, from Linux procfs: the listening socket's inode from
 * `/proc/net/tcp` and `/proc/net/tcp6`, then the process holding that socket among those whose
 * `/proc/<pid>/fd` this user may read. Used only to explain a failed listen, so it reads
 * synchronously and gives up quietly (`undefined`) on anything it cannot read.
 */
import { readdirSync, readlinkSync } from "node:fs"
import { readText } from "../../platform/procfs.ts"

/** A process holding a listening socket. */
export interface PortHolder {
  readonly pid: number
  /** Its command line, shortened. */
  readonly command: string
}

const listenState = "0A"

/** The inodes of sockets listening on `port`, from one `/proc/net/tcp*` table. */
export const listeningInodes = (table: string, port: number): ReadonlyArray<string> =>
  table.split("\n").slice(1).flatMap((line) => {
    const fields = line.trim().split(/\s+/)
    const local = fields[1]
    if (local === undefined || fields[3] !== listenState) return []
    const localPort = Number.parseInt(local.slice(local.lastIndexOf(":") + 1), 16)
    const inode = fields[9]
    return localPort === port && inode !== undefined && inode !== "0" ? [inode] : []
  })

const commandOf = (pid: number): string => {
  const text = (readText(`/proc/${pid}/cmdline`) ?? "").split("\0").filter((part) => part !== "").join(" ")
  return text.length > 160 ? `${text.slice(0, 157)}...` : text
}

/** The process listening on `port`, when it can be known. */
export const portHolder = (port: number): PortHolder | undefined => {
  const inodes = new Set(["/proc/net/tcp", "/proc/net/tcp6"].flatMap((file) => listeningInodes(readText(file) ?? "", port)))
  if (inodes.size === 0) return undefined
  const sockets = new Set([...inodes].map((inode) => `socket:[${inode}]`))
  let pids: ReadonlyArray<string>
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name))
  } catch {
    return undefined
  }
  for (const name of pids) {
    let fds: ReadonlyArray<string>
    try {
      fds = readdirSync(`/proc/${name}/fd`)
    } catch {
      continue
    }
    for (const fd of fds) {
      let target: string
      try {
        target = readlinkSync(`/proc/${name}/fd/${fd}`)
      } catch {
        continue
      }
      if (sockets.has(target)) return { pid: Number(name), command: commandOf(Number(name)) }
    }
  }
  return undefined
}
