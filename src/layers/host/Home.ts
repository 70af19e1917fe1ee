import { Context, Effect, Layer, Schema } from "effect"
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

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it exists but belongs to someone else; it still holds the lock.
    return error instanceof Error && "code" in error && error.code === "EPERM"
  }
}

/** Homes this process holds: a lock file naming our own pid is ours only if we took it. */
const heldHere = new Set<string>()

const LockFile = Schema.fromJsonString(Schema.Struct({ pid: Schema.Number, startedAt: Schema.Number }))
const decodeLock = Schema.decodeUnknownOption(LockFile)

/**
 * Takes `<home>/daemon.lock` with an exclusive create. A lock whose holder is dead is stale and
 * taken over; a live holder is named in the error. Released when the scope closes.
 */
const acquireLock = (root: string) => {
  const lockPath = path.join(root, "daemon.lock")
  const content = JSON.stringify({ pid: process.pid, startedAt: Date.now() })
  const take = Effect.try({
    try: () => {
      for (let attempt = 0; attempt < 2; attempt++) {
        try {
          fs.writeFileSync(lockPath, content, { flag: "wx", mode: 0o600 })
          heldHere.add(lockPath)
          return
        } catch (error) {
          if (!(error instanceof Error && "code" in error && error.code === "EEXIST")) throw error
          const holder = decodeLock(fs.readFileSync(lockPath, "utf8"))
          const ours = holder._tag === "Some" && holder.value.pid === process.pid
          if (holder._tag === "Some" && (ours ? heldHere.has(lockPath) : isAlive(holder.value.pid))) {
            throw new HomeUnavailable({
              home: root,
              message: `${root} is in use by another Quiesce daemon (pid ${holder.value.pid})`
            })
          }
          fs.rmSync(lockPath, { force: true })
        }
      }
      throw new Error("the lock file keeps reappearing")
    },
    catch: (error) =>
      error instanceof HomeUnavailable
        ? error
        : new HomeUnavailable({ home: root, message: `Cannot lock ${root}: ${describe(error)}` })
  })
  const release = Effect.sync(() => {
    const holder = decodeLock(fs.existsSync(lockPath) ? fs.readFileSync(lockPath, "utf8") : "")
    if (holder._tag === "Some" && holder.value.pid === process.pid) fs.rmSync(lockPath, { force: true })
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
