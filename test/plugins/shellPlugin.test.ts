import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"

const pluginPath = fileURLToPath(new URL("../../plugins/shell/main.ts", import.meta.url))

type Message = { readonly type: string; readonly [key: string]: unknown }

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Polls `check` every 25 ms until it holds, failing after `timeoutMs`. */
const pollUntil = async (what: string, check: () => boolean, timeoutMs = 5000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await delay(25)
  }
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    if (error instanceof Error && "code" in error && error.code === "ESRCH") return false
    throw error
  }
}

/** One plugin process driven over the protocol, in a process group of its own. */
class Plugin {
  readonly child: ChildProcess
  readonly messages: Array<Message> = []
  stderr = ""
  exitCode: number | null | undefined = undefined
  private nextId = 1
  private seen = 0

  constructor(env: Readonly<Record<string, string>> = {}) {
    this.child = spawn(process.execPath, [pluginPath], {
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...env }
    })
    this.child.on("exit", (code) => (this.exitCode = code))
    this.child.stdin!.on("error", () => {})
    this.child.stderr!.setEncoding("utf8")
    this.child.stderr!.on("data", (text: string) => (this.stderr += text))
    createInterface({ input: this.child.stdout! }).on("line", (line) => this.messages.push(JSON.parse(line)))
  }

  send(message: Message): void {
    this.child.stdin!.write(JSON.stringify(message) + "\n")
  }

  /** The next message (after those already taken) that matches, within the timeout. */
  async next(what: string, match: (m: Message) => boolean, timeoutMs = 5000): Promise<Message> {
    let found: Message | undefined
    await pollUntil(`${what} (stderr: ${this.stderr})`, () => {
      const index = this.messages.findIndex((m, i) => i >= this.seen && match(m))
      if (index === -1) return false
      found = this.messages[index]
      this.seen = index + 1
      return true
    }, timeoutMs)
    return found!
  }

  async request(message: Message, timeoutMs = 5000): Promise<Message> {
    const requestId = `r${this.nextId++}`
    this.send({ ...message, requestId })
    return this.next(`reply to ${message.type}`, (m) => m.requestId === requestId, timeoutMs)
  }

  async open(home: string, resumeSessionId: string | null = null): Promise<string> {
    const connected = await this.request({ type: "connect", protocolVersion: 1, home })
    assert.strictEqual(connected.type, "connected")
    const opened = await this.request({ type: "session.open", agentId: "agent-1", cwd: home, resumeSessionId })
    assert.strictEqual(opened.type, "session.opened", JSON.stringify(opened))
    return opened.sessionId as string
  }

  async canStop(sessionId: string): Promise<boolean> {
    const reply = await this.request({ type: "session.can_stop_runtime", sessionId })
    assert.strictEqual(reply.type, "request.completed", JSON.stringify(reply))
    const result = reply.result as { sessionId: string; canStop: boolean }
    assert.strictEqual(result.sessionId, sessionId)
    return result.canStop
  }

  kill(): void {
    try {
      if (this.child.pid !== undefined) process.kill(-this.child.pid, "SIGKILL")
    } catch {
      // The group is already gone.
    }
  }
}

/** Runs `body` with a fresh home directory and plugin processes that are killed afterwards. */
const withPlugins = async (body: (home: string, start: (env?: Record<string, string>) => Plugin) => Promise<void>) => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-shell-"))
  const plugins: Array<Plugin> = []
  try {
    await body(home, (env) => {
      const plugin = new Plugin(env)
      plugins.push(plugin)
      return plugin
    })
  } finally {
    for (const plugin of plugins) plugin.kill()
    rmSync(home, { recursive: true, force: true })
  }
}

describe("shell plugin", () => {
  it("connects, opens a session and runs a turn (protocol 1: no turn ids)", async () => {
    await withPlugins(async (home, start) => {
      const plugin = start()
      const connected = await plugin.request({ type: "connect", protocolVersion: 1, home })
      assert.deepStrictEqual(connected.capabilities, ["session.can_stop_runtime", "session.resume"])
      assert.strictEqual(connected.protocolVersion, 1)
      assert.strictEqual(connected.provider, "shell")
      const opened = await plugin.request({ type: "session.open", agentId: "a", cwd: home, resumeSessionId: null })
      const sessionId = opened.sessionId as string
      assert.match(sessionId, /^shell-[0-9a-f]+$/)

      // Garbage and unknown messages are ignored, the latter answered when they carry a requestId.
      plugin.send({ type: "bogus" })
      plugin.child.stdin!.write("not json\n")
      const unknown = await plugin.request({ type: "bogus" })
      assert.strictEqual(unknown.type, "request.failed")

      const accepted = await plugin.request({ type: "session.prompt", sessionId, prompt: "echo hi", mode: "turn" })
      assert.deepStrictEqual(accepted.result, { accepted: true })
      const timeline = await plugin.next("timeline", (m) => m.type === "timeline")
      assert.include(timeline.text as string, "hi")
      assert.notProperty(timeline, "turnId")
      const done = await plugin.next("turn end", (m) => m.type === "turn.completed" || m.type === "turn.failed")
      assert.strictEqual(done.type, "turn.completed")
      assert.strictEqual(done.sessionId, sessionId)
      assert.notProperty(done, "turnId")
      assert.strictEqual((done.reply as string).trim(), "hi")

      await plugin.request({ type: "session.prompt", sessionId, prompt: "exit 3", mode: "turn" })
      const failed = await plugin.next("turn end", (m) => m.type === "turn.completed" || m.type === "turn.failed")
      assert.strictEqual(failed.type, "turn.failed")
      assert.include(failed.message as string, "code 3")
    })
  })

  it("negotiates protocol 2 and names every turn in its events; refuses versions it does not speak", async () => {
    await withPlugins(async (home, start) => {
      const plugin = start()
      const connected = await plugin.request({ type: "connect", protocolVersion: 1, protocolVersions: [1, 2, 3], home })
      assert.strictEqual(connected.protocolVersion, 2)
      const opened = await plugin.request({ type: "session.open", agentId: "a", cwd: home, resumeSessionId: null })
      const sessionId = opened.sessionId as string
      const missing = await plugin.request({ type: "session.prompt", sessionId, prompt: "echo x", mode: "turn" })
      assert.strictEqual(missing.type, "request.failed", "protocol 2 needs the turn id")
      await plugin.request({ type: "session.prompt", sessionId, prompt: "echo two", mode: "turn", turnId: "turn-a" })
      const timeline = await plugin.next("timeline", (m) => m.type === "timeline")
      assert.strictEqual(timeline.turnId, "turn-a")
      const done = await plugin.next("turn end", (m) => m.type === "turn.completed")
      assert.strictEqual(done.turnId, "turn-a")
      await plugin.request({ type: "session.prompt", sessionId, prompt: "sleep 1 &", mode: "turn", turnId: "turn-b" })
      const started = await plugin.next("job turn end", (m) => m.type === "turn.completed")
      assert.strictEqual(started.turnId, "turn-b")

      const other = start()
      const refused = await other.request({ type: "connect", protocolVersion: 3, protocolVersions: [3, 4], home })
      assert.strictEqual(refused.type, "request.failed")
      assert.include(refused.message as string, "1, 2")
    })
  })

  it("never pretends to steer; interrupts the running turn; refuses a second turn", async () => {
    await withPlugins(async (home, start) => {
      const plugin = start()
      const sessionId = await plugin.open(home)
      const steerIdle = await plugin.request({ type: "session.prompt", sessionId, prompt: "x", mode: "steer" })
      assert.deepStrictEqual(steerIdle.result, { accepted: false })

      // A command reads no input: stdin is closed, so `read` sees end of file instead of waiting.
      await plugin.request({ type: "session.prompt", sessionId, prompt: "read line; echo got:$line", mode: "turn" })
      const read = await plugin.next("turn end", (m) => m.type === "turn.completed" || m.type === "turn.failed")
      assert.strictEqual((read.reply as string).trim(), "got:")

      await plugin.request({ type: "session.prompt", sessionId, prompt: "sleep 30", mode: "turn" })
      assert.isFalse(await plugin.canStop(sessionId))
      const second = await plugin.request({ type: "session.prompt", sessionId, prompt: "echo 2", mode: "turn" })
      assert.strictEqual(second.type, "request.failed")
      const steer = await plugin.request({ type: "session.prompt", sessionId, prompt: "more", mode: "steer" })
      assert.deepStrictEqual(steer.result, { accepted: false }, "a running command cannot take input")

      const interrupted = await plugin.request({ type: "session.interrupt", sessionId })
      assert.strictEqual(interrupted.type, "request.completed")
      const ended = await plugin.next("turn end", (m) => m.type === "turn.completed" || m.type === "turn.failed")
      assert.strictEqual(ended.type, "turn.failed")
      assert.isTrue(await plugin.canStop(sessionId))
    })
  })

  it("persists the transcript and resumes it in a second process", async () => {
    await withPlugins(async (home, start) => {
      const first = start()
      const sessionId = await first.open(home)
      await first.request({ type: "session.prompt", sessionId, prompt: "echo remembered", mode: "turn" })
      await first.next("turn end", (m) => m.type === "turn.completed")
      const closed = await first.request({ type: "session.close", sessionId })
      assert.strictEqual(closed.type, "request.completed")
      await pollUntil("first plugin exit", () => first.exitCode !== undefined)
      assert.strictEqual(first.exitCode, 0)

      const path = join(home, "shell", `${sessionId}.json`)
      const saved = JSON.parse(readFileSync(path, "utf8"))
      assert.strictEqual(saved.sessionId, sessionId)
      assert.deepStrictEqual(saved.entries.map((e: { role: string }) => e.role), ["user", "agent"])
      assert.strictEqual(saved.entries[0].text, "echo remembered")

      const second = start()
      assert.strictEqual(await second.open(home, sessionId), sessionId)
      await second.request({ type: "session.prompt", sessionId, prompt: "echo again", mode: "turn" })
      await second.next("turn end", (m) => m.type === "turn.completed")
      const resumed = JSON.parse(readFileSync(path, "utf8"))
      assert.deepStrictEqual(resumed.entries.map((e: { text: string }) => e.text.trim()), [
        "echo remembered",
        "remembered",
        "echo again",
        "again"
      ])

      const third = start()
      await third.request({ type: "connect", protocolVersion: 1, home })
      const missing = await third.request({
        type: "session.open",
        agentId: "a",
        cwd: home,
        resumeSessionId: "shell-0000"
      })
      assert.strictEqual(missing.type, "request.failed")
      assert.isFalse(existsSync(join(home, "shell", "shell-0000.json")))
    })
  })

  it("vetoes release while a job runs or its notification is unacknowledged", async () => {
    await withPlugins(async (home, start) => {
      const plugin = start()
      const sessionId = await plugin.open(home)
      assert.isTrue(await plugin.canStop(sessionId))
      await plugin.request({ type: "session.prompt", sessionId, prompt: "sleep 1; echo done &", mode: "turn" })
      const started = await plugin.next("job start", (m) => m.type === "turn.completed")
      assert.match(started.reply as string, /^started job 1 \(pid \d+\)$/)
      assert.isFalse(await plugin.canStop(sessionId))

      const notification = await plugin.next("notification", (m) => m.type === "notification", 5000)
      assert.strictEqual(notification.notificationId, "job-1")
      assert.strictEqual(notification.sessionId, sessionId)
      assert.include(notification.text as string, "exited with code 0")
      assert.include(notification.text as string, "done")
      assert.isFalse(await plugin.canStop(sessionId))

      plugin.send({ type: "notification.ack", sessionId, notificationId: "job-1" })
      assert.isTrue(await plugin.canStop(sessionId))
      const saved = JSON.parse(readFileSync(join(home, "shell", `${sessionId}.json`), "utf8"))
      assert.strictEqual(saved.entries.at(-1).role, "notification")
    })
  })

  it("close kills running jobs and exits", async () => {
    await withPlugins(async (home, start) => {
      const plugin = start()
      const sessionId = await plugin.open(home)
      await plugin.request({ type: "session.prompt", sessionId, prompt: "sleep 30 &", mode: "turn" })
      const started = await plugin.next("job start", (m) => m.type === "turn.completed")
      const pid = Number(/pid (\d+)/.exec(started.reply as string)![1])
      assert.isTrue(isAlive(pid))
      const closed = await plugin.request({ type: "session.close", sessionId })
      assert.strictEqual(closed.type, "request.completed")
      await pollUntil("the job to die", () => !isAlive(pid), 5000)
      await pollUntil("the plugin to exit", () => plugin.exitCode !== undefined, 5000)
      assert.strictEqual(plugin.exitCode, 0)
      assert.isUndefined(plugin.messages.find((m) => m.type === "notification"))
    })
  })

  it("honours the QUIESCE_SHELL_CAN_STOP testing hook", async () => {
    await withPlugins(async (home, start) => {
      const none = start({ QUIESCE_SHELL_CAN_STOP: "none" })
      const connected = await none.request({ type: "connect", protocolVersion: 1, home })
      assert.notInclude(connected.capabilities as Array<string>, "session.can_stop_runtime")
      const opened = await none.request({ type: "session.open", agentId: "a", cwd: home, resumeSessionId: null })
      assert.notInclude(opened.capabilities as Array<string>, "session.can_stop_runtime")
      const asked = await none.request({ type: "session.can_stop_runtime", sessionId: opened.sessionId })
      assert.strictEqual(asked.type, "request.failed")

      const wrong = start({ QUIESCE_SHELL_CAN_STOP: "wrong-session" })
      const wrongSession = await wrong.open(home)
      const lie = await wrong.request({ type: "session.can_stop_runtime", sessionId: wrongSession })
      assert.notStrictEqual((lie.result as { sessionId: string }).sessionId, wrongSession)

      const error = start({ QUIESCE_SHELL_CAN_STOP: "error" })
      const errorSession = await error.open(home)
      const refused = await error.request({ type: "session.can_stop_runtime", sessionId: errorSession })
      assert.strictEqual(refused.type, "request.failed")

      const forced = start({ QUIESCE_SHELL_CAN_STOP: "false" })
      assert.isFalse(await forced.canStop(await forced.open(home)))
    })
  })
})
