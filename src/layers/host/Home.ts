/**
 * A daemon's home directory (H1, H2): where it is by default, the lock that lets one daemon at a
 * time own it, its API token, and the files kept private to their owner.
 *
 * @module
 */
import { Effect, Layer, Option, Schema } from "effect"
import { Home, HomeUnavailable } from "../../services/Home.ts"
import { readStat } from "../../platform/procfs.ts"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** Where a user's Quiesce state lives: `$XDG_STATE_HOME/quiesce`, else `~/.local/state/quiesce`. */
export const stateDirectory = (): string =>
  path.join(process.env["XDG_STATE_HOME"] || path.join(os.homedir(), ".local", "state"), "quiesce")

/** A daemon's default home: `$QUIESCE_HOME`, else the state directory (not the directory a command runs in). */
export const defaultHome = (): string => process.env["QUIESCE_HOME"] || stateDirectory()

/** Where a home keeps its SQLite store (agents, turns, finishes, the runtime ledger). */
export const databaseFileOf = (root: string): string => path.join(root, "quiesce.sqlite")

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

/** The pid of the live process holding `<root>/<lockName>`, if one does (a stale lock has none). */
export const liveLockHolder = (root: string, lockName = "daemon.lock"): number | undefined => {
  const holder = readLock(path.join(root, lockName))
  return Option.isSome(holder) && holderAlive(holder.value) ? holder.value.pid : undefined
}

const isCode = (error: unknown, code: string) => error instanceof Error && "code" in error && error.code === code

/**
 * Takes `<home>/<lockName>` (`daemon.lock` for a daemon, `hub.lock` for a hub) atomically: the content is written to a private file first and then
 * hard-linked into place, so nobody ever reads a half-written lock. A lock whose holder is gone
 * (dead, or its pid reused) is moved aside with a rename that only one contender can win; a live
 * holder is named in the error. Released when the scope closes.
 */
export const acquireLock = (root: string, lockName = "daemon.lock", holderKind = "Quiesce daemon") => {
  const lockPath = path.join(root, lockName)
  const mine = path.join(root, `${lockName}.${process.pid}`)
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
              message: `${root} is in use by another ${holderKind} (pid ${current.value.pid})`
            })
          }
          // Stale: move it aside. If what we moved is not what we judged stale, put it back.
          const aside = path.join(root, `${lockName}.stale.${process.pid}`)
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

/**
 * Why the text of a token file cannot be the API token, or `undefined` when it can: it must be one
 * line of printable ASCII without spaces (what a `Bearer` header carries), and never empty.
 */
export const tokenProblem = (token: string): string | undefined =>
  token === ""
    ? "is empty"
    : /^[\x21-\x7e]+$/.test(token)
    ? undefined
    : "does not hold a usable token (one line of printable ASCII without spaces)"

/**
 * Reads `<home>/token`, creating it (mode 0600) on first start. A token file that is empty,
 * unreadable or otherwise unusable is an error: the API never runs without authentication.
 */
export const readOrCreateToken = Effect.fn("Home.readOrCreateToken")(function*(tokenFile: string, root: string) {
  const token = yield* Effect.try({
    try: () => {
      if (!fs.existsSync(tokenFile)) {
        fs.writeFileSync(tokenFile, randomBytes(32).toString("hex") + "\n", { flag: "wx", mode: 0o600 })
      }
      return fs.readFileSync(tokenFile, "utf8").trim()
    },
    catch: (error) =>
      new HomeUnavailable({
        home: root,
        message: `Cannot read the API token file ${tokenFile}: ${describe(error)}. ` +
          `Make it readable, or delete it to have a new one made at the next start`
      })
  })
  const problem = tokenProblem(token)
  if (problem !== undefined) {
    return yield* new HomeUnavailable({
      home: root,
      message: `The API token file ${tokenFile} ${problem}. Delete it to have a new one made at the next start`
    })
  }
  return token
})

/** Tightens `file` to `mode` unless it is already as strict; a symbolic link is left alone. */
const restrictMode = (file: string, mode: number) => {
  const stat = fs.lstatSync(file, { throwIfNoEntry: false })
  if (stat === undefined || stat.isSymbolicLink()) return
  if ((stat.mode & 0o777 & ~mode) !== 0) fs.chmodSync(file, mode)
}

/**
 * What the daemon keeps in its home is its owner's only, whatever the umask: `plugins/` is made
 * (or tightened to) 0700, so every plugin's state under it is private, and a database left by an
 * earlier version is tightened to 0600 (new ones are created so by the store). The home itself is
 * the user's to set, unless the daemon created it (0700).
 */
const securePrivateFiles = (root: string, databaseFile: string, pluginHome: string) =>
  Effect.try({
    try: () => {
      fs.mkdirSync(pluginHome, { recursive: true, mode: 0o700 })
      restrictMode(pluginHome, 0o700)
      for (const file of [databaseFile, `${databaseFile}-wal`, `${databaseFile}-shm`]) restrictMode(file, 0o600)
    },
    catch: (error) =>
      new HomeUnavailable({ home: root, message: `Cannot make ${root} private to its owner: ${describe(error)}` })
  })

/** What a start creates in a home, to take back if the start does not finish (H1). */
const createdByStart = (tokenFile: string, databaseFile: string, pluginHome: string) => {
  // The journal files go only with a database this start created: beside an existing one, a
  // `-wal` may hold committed pages another connection (a backup, an sqlite3 shell) still needs.
  const newDatabase = !fs.existsSync(databaseFile)
  const newFiles = [
    ...(fs.existsSync(tokenFile) ? [] : [tokenFile]),
    ...(newDatabase ? [databaseFile, `${databaseFile}-wal`, `${databaseFile}-shm`] : [])
  ]
  const newPlugins = !fs.existsSync(pluginHome)
  return () => {
    for (const file of newFiles) fs.rmSync(file, { force: true })
    // Only an empty one: a plugin that started wrote its own state, which is not ours to remove.
    if (newPlugins) {
      try {
        fs.rmdirSync(pluginHome)
      } catch {
        // not empty, or gone
      }
    }
  }
}

/**
 * Opens the home at `root`: creates it if missing (0700), takes its lock (released with the
 * layer), reads or creates the token and makes the private files private. What this start created
 * is removed again if the layer closes before `opened`.
 */
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
      const databaseFile = databaseFileOf(absolute)
      const pluginHome = path.join(absolute, "plugins")
      // Registered after the lock, so it runs before the lock is released, and after everything
      // built over the home (the database) has closed.
      const takeBack = createdByStart(tokenFile, databaseFile, pluginHome)
      let opened = false
      yield* Effect.addFinalizer(() => opened ? Effect.void : Effect.sync(takeBack))
      const token = yield* readOrCreateToken(tokenFile, absolute)
      yield* securePrivateFiles(absolute, databaseFile, pluginHome)
      return Home.of({
        root: absolute,
        databaseFile,
        configFile: path.join(absolute, "config.json"),
        tokenFile,
        pluginHome,
        token,
        opened: Effect.sync(() => {
          opened = true
        })
      })
    })
  )
