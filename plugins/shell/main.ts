/**
 * The reference provider plugin "shell" for the plugin provider protocol (versions 1 and 2).
 *
 * Run as `node plugins/shell/main.ts` (Node 24 strips the types), or built, as
 * `node dist/plugins/shell/main.cjs`. It speaks newline-delimited JSON over stdio: daemon → plugin
 * on stdin, plugin → daemon on stdout, one JSON object per line (at most 1 MiB), diagnostics on
 * stderr. One process hosts one session: each `turn` prompt is a
 * shell command run with `sh -c` in the session's cwd; a prompt ending in `&` (or `bg: <command>`)
 * starts a background job whose exit is reported as an autonomous `notification`. A shell command
 * reads no input while it runs, so the plugin does not offer steering: the daemon queues a prompt
 * that arrives during a turn and sends it as the next turn.
 *
 * Self-contained on purpose (only `node:` built-ins): the protocol is language-neutral and this
 * file is its example. See src/domain/pluginProtocol.ts for the message schemas.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"

/** The versions this plugin speaks; version 2 names each turn in its events. */
const supportedVersions: ReadonlyArray<number> = [1, 2]
const maxLineBytes = 1024 * 1024
/** Timeline chunks stay far below the line limit even when JSON escaping inflates them. */
const timelineChunkChars = 16 * 1024
const replyTailChars = 8000
const notificationTailChars = 2000
/** After a child exits, how long to wait for its pipes to close (a grandchild may hold them). */
const pipeGraceMs = 200
const killGraceMs = 2000

const allCapabilities = ["session.can_stop_runtime", "session.resume"]

// ---- testing hook ---------------------------------------------------------------------------

type CanStopOverride = "true" | "false" | "error" | "hang" | "wrong-session" | "none"
const canStopOverrides: ReadonlyArray<string> = ["true", "false", "error", "hang", "wrong-session", "none"]

const readCanStopOverride = (): CanStopOverride | undefined => {
  const value = process.env.QUIESCE_SHELL_CAN_STOP
  if (value === undefined || value === "") return undefined
  if (canStopOverrides.includes(value)) return value as CanStopOverride
  log(`ignoring unknown QUIESCE_SHELL_CAN_STOP=${JSON.stringify(value)}`)
  return undefined
}

// ---- output ---------------------------------------------------------------------------------

function log(text: string): void {
  process.stderr.write(`[shell-plugin ${process.pid}] ${text}\n`)
}

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

const send = (message: { readonly type: string; readonly [key: string]: Json | undefined }): void => {
  const line = JSON.stringify(message)
  if (Buffer.byteLength(line) > maxLineBytes) {
    log(`dropping an oversized ${message.type} message (${Buffer.byteLength(line)} bytes)`)
    return
  }
  process.stdout.write(line + "\n")
}

const completed = (requestId: string, result?: Json): void =>
  send(result === undefined ? { type: "request.completed", requestId } : { type: "request.completed", requestId, result })

const failed = (requestId: string, message: string): void => send({ type: "request.failed", requestId, message })

// The daemon went away: nothing left to talk to.
process.stdout.on("error", (error) => {
  log(`stdout failed (${error.message}); exiting`)
  shutdown(undefined)
})

const tail = (text: string, chars: number): string => (text.length > chars ? text.slice(text.length - chars) : text)

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error))

// ---- transcript -----------------------------------------------------------------------------

interface Entry {
  readonly role: "user" | "agent" | "notification"
  readonly text: string
  readonly at: string
}

interface Transcript {
  readonly sessionId: string
  readonly entries: Array<Entry>
}

/**
 * `bytes` random bytes as hex, read from the kernel's generator: node:crypto would cost an idle
 * runtime a few MiB more for the two ids this plugin ever mints.
 */
const randomHex = (bytes: number): string => {
  const buffer = Buffer.alloc(bytes)
  const descriptor = openSync("/dev/urandom", "r")
  try {
    readSync(descriptor, buffer, 0, bytes, null)
  } finally {
    closeSync(descriptor)
  }
  return buffer.toString("hex")
}

/** Session ids become file names: only the shape this plugin mints (or something as harmless) is accepted. */
const validSessionId = (id: string): boolean => /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(id)

const transcriptPath = (home: string, sessionId: string): string => join(home, "shell", `${sessionId}.json`)

const writeTranscript = (path: string, transcript: Transcript): void => {
  const temp = `${path}.${process.pid}.${randomHex(4)}.tmp`
  try {
    writeFileSync(temp, JSON.stringify(transcript, null, 2) + "\n", { mode: 0o600 })
    renameSync(temp, path)
  } catch (error) {
    rmSync(temp, { force: true })
    throw error
  }
}

const readTranscript = (path: string, sessionId: string): Transcript => {
  const parsed: unknown = JSON.parse(readFileSync(path, "utf8"))
  if (typeof parsed !== "object" || parsed === null) throw new Error("transcript is not an object")
  const record = parsed as { sessionId?: unknown; entries?: unknown }
  if (record.sessionId !== sessionId) throw new Error("transcript belongs to another session")
  if (!Array.isArray(record.entries)) throw new Error("transcript has no entries")
  const entries: Array<Entry> = []
  for (const entry of record.entries as Array<unknown>) {
    const e = entry as { role?: unknown; text?: unknown; at?: unknown } | null
    if (
      e !== null && typeof e === "object" && (e.role === "user" || e.role === "agent" || e.role === "notification") &&
      typeof e.text === "string" && typeof e.at === "string"
    ) entries.push({ role: e.role, text: e.text, at: e.at })
  }
  return { sessionId, entries }
}

// ---- process trees --------------------------------------------------------------------------

/**
 * The descendants of `pid`, from /proc (Linux). Children share the plugin's process group, so a
 * group signal would hit the plugin too; walking the tree reaches grandchildren that `sh` forked.
 * Elsewhere only the direct child is signalled; the daemon's group kill covers the rest.
 */
const descendants = (pid: number): Array<number> => {
  let names: Array<string>
  try {
    names = readdirSync("/proc")
  } catch {
    return []
  }
  const children = new Map<number, Array<number>>()
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8")
      // pid (comm) state ppid ...; comm may contain spaces and parentheses.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      const ppid = Number(fields[1])
      const list = children.get(ppid) ?? []
      list.push(Number(name))
      children.set(ppid, list)
    } catch {
      // The process ended while we looked.
    }
  }
  const result: Array<number> = []
  const queue = [pid]
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      result.push(child)
      queue.push(child)
    }
  }
  return result
}

const signalPid = (pid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(pid, signal)
  } catch {
    // Already gone.
  }
}

/** Signals a child and everything below it, deepest first (so no one respawns into the gap). */
const signalTree = (pid: number, signal: NodeJS.Signals): Array<number> => {
  const below = descendants(pid)
  for (const p of below.slice().reverse()) signalPid(p, signal)
  signalPid(pid, signal)
  return below
}

// ---- children -------------------------------------------------------------------------------

interface Run {
  readonly child: ChildProcess
  readonly command: string
  /** Resolves once the child has exited (and been reaped) and its pipes closed or the grace ran out. */
  readonly done: Promise<void>
  exited: boolean
  output: string
}

/**
 * Spawns `sh -c command` in `cwd`, in the plugin's own process group (never detached), draining
 * stdout and stderr. `onExit` gets the exit code, the signal, or the spawn error.
 */
const runShell = (
  command: string,
  cwd: string,
  keepChars: number,
  onOutput: (text: string) => void,
  onExit: (run: Run, code: number | null, signal: NodeJS.Signals | null, error: Error | undefined) => void
): Run => {
  // No input: a command that reads stdin sees end of file at once instead of waiting for ever.
  const child = spawn("sh", ["-c", command], { cwd, stdio: ["ignore", "pipe", "pipe"] })
  let resolveDone = (): void => {}
  const run: Run = { child, command, done: new Promise((resolve) => (resolveDone = resolve)), exited: false, output: "" }
  let finished = false
  let exitCode: number | null = null
  let exitSignal: NodeJS.Signals | null = null
  let openPipes = 2
  let graceTimer: NodeJS.Timeout | undefined
  const finish = (error: Error | undefined): void => {
    if (finished) return
    finished = true
    if (graceTimer !== undefined) clearTimeout(graceTimer)
    onExit(run, exitCode, exitSignal, error)
    resolveDone()
  }
  const onData = (chunk: string): void => {
    if (finished) return // a grandchild still writing after the turn ended: drained, not reported
    run.output = tail(run.output + chunk, keepChars)
    onOutput(chunk)
  }
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding("utf8")
    stream?.on("data", onData)
    stream?.on("close", () => {
      openPipes -= 1
      if (openPipes === 0 && run.exited) finish(undefined)
    })
  }
  child.once("exit", (code, signal) => {
    run.exited = true
    exitCode = code
    exitSignal = signal
    if (openPipes === 0) finish(undefined)
    else graceTimer = setTimeout(() => finish(undefined), pipeGraceMs)
  })
  child.once("error", (error) => {
    // Spawning failed (e.g. the cwd is gone): there is no process to wait for.
    if (child.pid === undefined) {
      run.exited = true
      finish(error)
    } else log(`child ${child.pid}: ${error.message}`)
  })
  return run
}

const describeExit = (code: number | null, signal: NodeJS.Signals | null, error: Error | undefined): string =>
  error !== undefined
    ? `failed to start: ${error.message}`
    : code !== null
    ? `exited with code ${code}`
    : `was killed by ${signal ?? "a signal"}`

// ---- session state --------------------------------------------------------------------------

interface Job {
  readonly n: number
  readonly command: string
  readonly run: Run
}

const canStopOverride = readCanStopOverride()
/** Testing hook: QUIESCE_SHELL_CAN_STOP_DELAY_MS delays the safety query's honest answer. */
const canStopDelayMs = Math.max(0, Number(process.env.QUIESCE_SHELL_CAN_STOP_DELAY_MS ?? "0") || 0)
const capabilities = canStopOverride === "none"
  ? allCapabilities.filter((c) => c !== "session.can_stop_runtime")
  : allCapabilities

let home: string | undefined
/** The negotiated protocol version. */
let version = 1
let session: { readonly id: string; readonly cwd: string; readonly path: string; readonly transcript: Transcript } | undefined
let foreground: Run | undefined
const jobs = new Map<number, Job>()
let nextJob = 1
/** Notifications sent but not yet acknowledged, by id. */
const undelivered = new Set<string>()
let closing = false

const append = (role: Entry["role"], text: string): void => {
  if (session === undefined) return
  session.transcript.entries.push({ role, text, at: new Date().toISOString() })
  flushTranscript()
}

const flushTranscript = (): void => {
  if (session === undefined) return
  try {
    writeTranscript(session.path, session.transcript)
  } catch (error) {
    log(`cannot write the transcript ${session.path}: ${errorMessage(error)}`)
  }
}

/**
 * Whether any process besides this plugin still lives in its process group: work a prompt put
 * in the background itself (`nohup … &`, `(cmd &)`) that is not one of our tracked jobs.
 */
const strayProcess = (): string | undefined => {
  let names: Array<string>
  try {
    names = readdirSync("/proc")
  } catch {
    // Without procfs we cannot see strays; answering "busy" keeps the runtime resident.
    return "cannot read /proc to look for background processes"
  }
  const group = process.pid
  for (const name of names) {
    if (!/^\d+$/.test(name) || Number(name) === group) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      // fields[0] is the state, fields[2] the process group; zombies hold no work.
      if (Number(fields[2]) === group && fields[0] !== "Z" && fields[0] !== "X") {
        return `background process ${name} (${stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))})`
      }
    } catch {
      // Gone while we looked.
    }
  }
  return undefined
}

const shown = (command: string) => command.length > 200 ? `${command.slice(0, 200)}…` : command

/** Why this runtime must not stop now, or `undefined` when nothing would be lost. */
const stopVeto = (): string | undefined => {
  if (foreground !== undefined) return "a command is running in the foreground"
  const job = jobs.values().next()
  if (!job.done) return `background job ${job.value.n} \`${shown(job.value.command)}\`${jobs.size > 1 ? ` and ${jobs.size - 1} more` : ""}`
  if (undelivered.size > 0) return `${undelivered.size} job report${undelivered.size === 1 ? "" : "s"} not yet delivered`
  return strayProcess()
}

/** The answer to `session.can_stop_runtime`: a veto says why. */
const stopAnswer = (sessionId: string): Json => {
  const veto = stopVeto()
  return veto === undefined ? { sessionId, canStop: true } : { sessionId, canStop: false, reason: veto }
}

// ---- requests -------------------------------------------------------------------------------

type Message = { readonly type: string; readonly [key: string]: unknown }

const stringField = (message: Message, field: string): string => {
  const value = message[field]
  if (typeof value !== "string") throw new Error(`${message.type}: field "${field}" must be a string`)
  return value
}

/** The session a session-scoped request names; throws when it is not ours. */
const ourSession = (message: Message): NonNullable<typeof session> => {
  const sessionId = stringField(message, "sessionId")
  if (session === undefined) throw new Error("no session is open")
  if (sessionId !== session.id) throw new Error(`unknown session ${sessionId}`)
  if (closing) throw new Error("the session is closing")
  return session
}

/** The highest version both sides speak: from the daemon's offer, or its single version (older daemons). */
const negotiate = (message: Message): number | undefined => {
  const offered = Array.isArray(message.protocolVersions) ? message.protocolVersions : [message.protocolVersion]
  const common = supportedVersions.filter((v) => offered.includes(v))
  return common.length === 0 ? undefined : Math.max(...common)
}

const handleConnect = (message: Message, requestId: string): void => {
  const chosen = negotiate(message)
  if (chosen === undefined) {
    failed(requestId, `no common protocol version; this plugin speaks ${supportedVersions.join(", ")}`)
    return
  }
  version = chosen
  home = stringField(message, "home")
  send({ type: "connected", requestId, protocolVersion: version, provider: "shell", capabilities })
}

/** The turn fields of an event: version 2 names the turn, version 1 does not. */
const turnField = (turnId: string | undefined): { readonly turnId?: string } =>
  version >= 2 && turnId !== undefined ? { turnId } : {}

const handleOpen = (message: Message, requestId: string): void => {
  const cwd = stringField(message, "cwd")
  const resume = message.resumeSessionId
  if (resume !== null && resume !== undefined && typeof resume !== "string") {
    throw new Error(`session.open: field "resumeSessionId" must be a string or null`)
  }
  if (home === undefined) throw new Error("session.open before connect")
  if (session !== undefined) throw new Error(`this process already hosts session ${session.id}`)
  mkdirSync(join(home, "shell"), { recursive: true, mode: 0o700 })
  if (typeof resume === "string") {
    if (!validSessionId(resume)) throw new Error(`invalid session id ${JSON.stringify(resume)}`)
    const path = transcriptPath(home, resume)
    let transcript: Transcript
    try {
      transcript = readTranscript(path, resume)
    } catch (error) {
      throw new Error(`cannot resume session ${resume}: ${errorMessage(error)}`)
    }
    session = { id: resume, cwd, path, transcript }
    // Job numbers continue across resumes, so notification ids stay unique within the session.
    for (const entry of transcript.entries) {
      const started = entry.role === "agent" ? /^started job (\d+) /.exec(entry.text) : null
      if (started !== null) nextJob = Math.max(nextJob, Number(started[1]) + 1)
    }
  } else {
    const id = `shell-${randomHex(8)}`
    const path = transcriptPath(home, id)
    const transcript: Transcript = { sessionId: id, entries: [] }
    writeTranscript(path, transcript)
    session = { id, cwd, path, transcript }
  }
  log(`session ${session.id} opened for agent ${String(message.agentId)} in ${cwd}`)
  send({ type: "session.opened", requestId, sessionId: session.id, capabilities })
}

/** A background command, if the prompt asks for one: `<command> &` or `bg: <command>`. */
const backgroundCommand = (prompt: string): string | undefined => {
  const trimmed = prompt.trim()
  if (trimmed.startsWith("bg:")) return trimmed.slice(3).trim()
  if (trimmed.endsWith("&") && !trimmed.endsWith("&&")) return trimmed.slice(0, -1).trim()
  return undefined
}

const handlePrompt = (message: Message, requestId: string): void => {
  const current = ourSession(message)
  const prompt = stringField(message, "prompt")
  const mode = message.mode
  // A running command reads no input: a steer would be dropped, so none is accepted.
  if (mode === "steer") {
    completed(requestId, { accepted: false })
    return
  }
  if (mode !== "turn") throw new Error(`session.prompt: unknown mode ${JSON.stringify(mode)}`)
  const turnId = typeof message.turnId === "string" ? message.turnId : undefined
  if (version >= 2 && turnId === undefined) throw new Error(`session.prompt: field "turnId" must be a string`)
  if (foreground !== undefined) throw new Error("a turn is already running")
  const background = backgroundCommand(prompt)
  if (background === "") throw new Error("empty background command")
  completed(requestId, { accepted: true })
  append("user", prompt)
  if (background !== undefined) startJob(current, background, turnId)
  else startTurn(current, prompt, turnId)
}

const startTurn = (current: NonNullable<typeof session>, command: string, turnId: string | undefined): void => {
  foreground = runShell(command, current.cwd, replyTailChars, (text) => {
    for (let i = 0; i < text.length; i += timelineChunkChars) {
      send({ type: "timeline", sessionId: current.id, ...turnField(turnId), text: text.slice(i, i + timelineChunkChars) })
    }
  }, (run, code, signal, error) => {
    if (foreground === run) foreground = undefined
    const reply = run.output
    if (code === 0) {
      append("agent", reply)
      if (!closing) send({ type: "turn.completed", sessionId: current.id, ...turnField(turnId), reply })
    } else {
      const message = `command ${describeExit(code, signal, error)}${reply === "" ? "" : `: ${tail(reply, 2000)}`}`
      append("agent", message)
      if (!closing) send({ type: "turn.failed", sessionId: current.id, ...turnField(turnId), message })
    }
  })
}

const startJob = (current: NonNullable<typeof session>, command: string, turnId: string | undefined): void => {
  const n = nextJob++
  const run = runShell(command, current.cwd, notificationTailChars, () => {}, (run, code, signal, error) => {
    jobs.delete(n)
    const notificationId = `job-${n}`
    // Bounded, so the report always fits in one protocol line and can be delivered.
    const text = `job ${n} (${shown(command)}) ${describeExit(code, signal, error)}: ${run.output}`
    append("notification", text)
    if (closing) return
    undelivered.add(notificationId)
    send({ type: "notification", sessionId: current.id, notificationId, text })
  })
  jobs.set(n, { n, command, run })
  // A job that could not even start reports that in its notification.
  const reply = run.child.pid === undefined ? `job ${n} could not start` : `started job ${n} (pid ${run.child.pid})`
  append("agent", reply)
  send({ type: "turn.completed", sessionId: current.id, ...turnField(turnId), reply })
}

const handleInterrupt = (message: Message, requestId: string): void => {
  ourSession(message)
  const run = foreground
  if (run !== undefined && !run.exited && run.child.pid !== undefined) signalTree(run.child.pid, "SIGINT")
  completed(requestId, { interrupted: run !== undefined })
}

const handleCanStop = (message: Message, requestId: string): void => {
  const current = ourSession(message)
  switch (canStopOverride) {
    case "none":
      failed(requestId, "session.can_stop_runtime is not supported")
      return
    case "error":
      failed(requestId, "can_stop_runtime failed (QUIESCE_SHELL_CAN_STOP=error)")
      return
    case "hang":
      log(`not answering ${requestId} (QUIESCE_SHELL_CAN_STOP=hang)`)
      return
    case "wrong-session":
      // The dangerous lie: a yes for somebody else's session.
      completed(requestId, { sessionId: `${current.id}-other`, canStop: true })
      return
    case "true":
      completed(requestId, { sessionId: current.id, canStop: true })
      return
    case "false":
      completed(requestId, { sessionId: current.id, canStop: false, reason: "QUIESCE_SHELL_CAN_STOP=false" })
      return
    case undefined:
      // Testing hook: a slow answer (decided when it is given), as a provider busy inspecting itself.
      if (canStopDelayMs > 0) {
        setTimeout(() => completed(requestId, stopAnswer(current.id)), canStopDelayMs)
      } else completed(requestId, stopAnswer(current.id))
      return
  }
}

const handleAck = (message: Message): void => {
  const notificationId = stringField(message, "notificationId")
  if (session !== undefined && message.sessionId !== session.id) {
    log(`notification.ack for unknown session ${String(message.sessionId)}`)
    return
  }
  if (!undelivered.delete(notificationId)) log(`notification.ack for unknown notification ${notificationId}`)
}

/** Testing hook: QUIESCE_SHELL_CLOSE_DELAY_MS delays a requested close (a slow release). */
const closeDelayMs = Math.max(0, Number(process.env.QUIESCE_SHELL_CLOSE_DELAY_MS ?? "0") || 0)

const handleClose = (message: Message, requestId: string): void => {
  ourSession(message)
  if (closeDelayMs === 0) shutdown(requestId)
  else setTimeout(() => shutdown(requestId), closeDelayMs)
}

// ---- shutdown -------------------------------------------------------------------------------

/**
 * Ends every child (SIGTERM, SIGKILL after the grace), flushes the transcript, answers the close
 * request if there is one and exits 0. Idempotent.
 */
function shutdown(requestId: string | undefined): void {
  if (closing) {
    if (requestId !== undefined) failed(requestId, "the session is already closing")
    return
  }
  closing = true
  const runs = [...(foreground === undefined ? [] : [foreground]), ...[...jobs.values()].map((job) => job.run)]
  const signalled = new Set<number>()
  for (const run of runs) {
    if (run.exited || run.child.pid === undefined) continue
    signalled.add(run.child.pid)
    for (const pid of signalTree(run.child.pid, "SIGTERM")) signalled.add(pid)
  }
  const killTimer = setTimeout(() => {
    for (const pid of signalled) signalPid(pid, "SIGKILL")
    // Anything forked after the first pass.
    for (const run of runs) if (!run.exited && run.child.pid !== undefined) signalTree(run.child.pid, "SIGKILL")
  }, killGraceMs)
  // If even SIGKILL is not reaped in time (it should be), do not wait forever.
  const deadline = new Promise<void>((resolve) => setTimeout(resolve, killGraceMs + 1000).unref())
  void Promise.race([Promise.all(runs.map((run) => run.done)), deadline]).then(() => {
    clearTimeout(killTimer)
    flushTranscript()
    const exit = (): void => process.exit(0)
    if (requestId !== undefined && process.stdout.writable) {
      completed(requestId)
      process.stdout.write("", exit)
    } else exit()
  })
}

// ---- main loop ------------------------------------------------------------------------------

const handleLine = (line: string): void => {
  if (line.trim() === "") return
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch (error) {
    log(`ignoring a malformed line: ${errorMessage(error)}`)
    return
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    log("ignoring a line that is not a JSON object")
    return
  }
  const message = parsed as Message
  const requestId = typeof message.requestId === "string" ? message.requestId : undefined
  if (Buffer.byteLength(line) > maxLineBytes) {
    log(`ignoring an oversized ${String(message.type)} line (${Buffer.byteLength(line)} bytes)`)
    if (requestId !== undefined) failed(requestId, `line exceeds ${maxLineBytes} bytes`)
    return
  }
  try {
    if (message.type === "notification.ack") {
      handleAck(message)
      return
    }
    if (requestId === undefined) {
      log(`ignoring a ${JSON.stringify(message.type)} message without a requestId`)
      return
    }
    switch (message.type) {
      case "connect":
        return handleConnect(message, requestId)
      case "session.open":
        return handleOpen(message, requestId)
      case "session.prompt":
        return handlePrompt(message, requestId)
      case "session.interrupt":
        return handleInterrupt(message, requestId)
      case "session.can_stop_runtime":
        return handleCanStop(message, requestId)
      case "session.close":
        return handleClose(message, requestId)
      default:
        log(`ignoring unknown message type ${JSON.stringify(message.type)}`)
        failed(requestId, `unknown message type ${JSON.stringify(message.type)}`)
    }
  } catch (error) {
    log(`${String(message.type)} failed: ${errorMessage(error)}`)
    if (requestId !== undefined) failed(requestId, errorMessage(error))
  }
}

const input = createInterface({ input: process.stdin, crlfDelay: Infinity })
input.on("line", handleLine)
input.on("close", () => shutdown(undefined))
