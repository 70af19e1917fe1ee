import { Context, Effect, Layer, Option, Schema } from "effect"
import { readStat } from "./ProcessInspectionProcfs.ts"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

/** The home directory could not be used: locked by another daemon, or unreadable. */
export class HomeUnavailable extends Schema.TaggedError<HomeUnavailable>()("HomeUnavailable", {
  home: Schema.String,
  message: Schema.String
}) {}

/** Where one daemon keeps everything; only one writing daemon owns it at a time (H2). */
export class Home extends Context.Service<Home, {
  readonly root: string
  readonly databaseFile: string
  readonly configFile: string
  readonly tokenFile: string
  readonly pluginHome: string
  /** The API token, created on first start. */
  readonly token: string
}>()("quiesce/host/Home") {}

const describe = (error: unknown) => error instanceof Error ? error.message : String(error)

/** The start time of a live process (procfs), so a reused pid is not taken for the holder. */
const startTimeOf = (pid: number): number | undefined => readStat(pid)?.startTime

/** Whether the process that wrote a lock still runs (same pid and, when known, same start time). */
const holderAlive = (holder: LockHolder) => {
  try {
    process.kill(holder.pid, 0)
  } catch (error) {
    // EPERM: it exists but belongs to someone else; it still holds the lock.
    if (!(error instanceof Error && "code" in error && error.code === "EPERM")) return false
  }
  const startTime = startTimeOf(holder.pid)
  return holder.startTime === undefined || startTime === undefined || startTime === holder.startTime
}

/** Homes this process holds: a lock file naming our own pid is ours only if we took it. */
const heldHere = new Set<string>()

const LockHolder = Schema.Struct({
  pid: Schema.Number,
  startedAt: Schema.Number,
  startTime: Schema.optionalKey(Schema.Number)
})
type LockHolder = typeof LockHolder.Type
const decodeLock = Schema.decodeUnknownOption(Schema.fromJsonString(LockHolder))

const readLock = (file: string) => {
  try {
    return decodeLock(fs.readFileSync(file, "utf8"))
  } catch {
    return Option.none()
  }
}

const isCode = (error: unknown, code: string) => error instanceof Error && "code" in error && error.code === code

/**
 * Takes `<home>/daemon.lock` atomically: the content is written to a private file first and then
 * hard-linked into place, so nobody ever reads a half-written lock. A lock whose holder is gone
 * (dead, or its pid reused) is moved aside with a rename that only one contender can win; a live
 * holder is named in the error. Released when the scope closes.
 */
const acquireLock = (root: string) => {
  const lockPath = path.join(root, "daemon.lock")
  const mine = path.join(root, `daemon.lock.${process.pid}`)
  const take = Effect.try({
    try: () => {
      const holder: LockHolder = {
        pid: process.pid,
        startedAt: Date.now(),
        ...(startTimeOf(process.pid) === undefined ? {} : { startTime: startTimeOf(process.pid)! })
      }
      fs.writeFileSync(mine, JSON.stringify(holder), { mode: 0o600 })
      try {
        for (let attempt = 0; attempt < 5; attempt++) {
          try {
            fs.linkSync(mine, lockPath)
            heldHere.add(lockPath)
            return
          } catch (error) {
            if (!isCode(error, "EEXIST")) throw error
          }
          const current = readLock(lockPath)
          const ours = Option.isSome(current) && current.value.pid === process.pid
          if (Option.isSome(current) && (ours ? heldHere.has(lockPath) : holderAlive(current.value))) {
            throw new HomeUnavailable({
              home: root,
              message: `${root} is in use by another Quiesce daemon (pid ${current.value.pid})`
            })
          }
          // Stale: move it aside. If what we moved is not what we judged stale, put it back.
          const aside = path.join(root, `daemon.lock.stale.${process.pid}`)
          try {
            fs.renameSync(lockPath, aside)
          } catch (error) {
            if (isCode(error, "ENOENT")) continue
            throw error
          }
          const moved = readLock(aside)
          const same = Option.isSome(moved) && Option.isSome(current) &&
            moved.value.pid === current.value.pid && moved.value.startedAt === current.value.startedAt
          if (!same) fs.renameSync(aside, lockPath)
          else fs.rmSync(aside, { force: true })
        }
        throw new Error("the lock keeps changing hands")
      } finally {
        fs.rmSync(mine, { force: true })
      }
    },
    catch: (error) =>
      error instanceof HomeUnavailable
        ? error
        : new HomeUnavailable({ home: root, message: `Cannot lock ${root}: ${describe(error)}` })
  })
  const release = Effect.sync(() => {
    const holder = readLock(lockPath)
    if (Option.isSome(holder) && holder.value.pid === process.pid) fs.rmSync(lockPath, { force: true })
    heldHere.delete(lockPath)
  })
  return Effect.acquireRelease(take, () => release)
}

/** Reads `<home>/token`, creating it (mode 0600) on first start. */
const readOrCreateToken = (tokenFile: string, root: string) =>
  Effect.try({
    try: () => {
      if (!fs.existsSync(tokenFile)) {
        fs.writeFileSync(tokenFile, randomBytes(32).toString("hex") + "\n", { flag: "wx", mode: 0o600 })
      }
      return fs.readFileSync(tokenFile, "utf8").trim()
    },
    catch: (error) => new HomeUnavailable({ home: root, message: `Cannot read the API token: ${describe(error)}` })
  })

export const layer = (root: string): Layer.Layer<Home, HomeUnavailable> =>
  Layer.effect(
    Home,
    Effect.gen(function*() {
      const absolute = path.resolve(root)
      yield* Effect.try({
        try: () => fs.mkdirSync(absolute, { recursive: true, mode: 0o700 }),
        catch: (error) => new HomeUnavailable({ home: absolute, message: `Cannot create ${absolute}: ${describe(error)}` })
      })
      yield* acquireLock(absolute)
      const tokenFile = path.join(absolute, "token")
      return Home.of({
        root: absolute,
        databaseFile: path.join(absolute, "quiesce.sqlite"),
        configFile: path.join(absolute, "config.json"),
        tokenFile,
        pluginHome: path.join(absolute, "plugins"),
        token: yield* readOrCreateToken(tokenFile, absolute)
      })
    })
  )
