/**
 * An agent's live events through the hub, as users meet them: a real `quiesce hub`, the daemons it
 * launches, the reference shell agent, real HTTP (server-sent events read with fetch) and the CLI
 * with `--hub`. Time is real, so every wait polls with a bound; every process is stopped by group.
 */
import { spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { get, type IncomingMessage } from "node:http"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { liveLockHolder } from "../../src/layers/host/Home.ts"
import { exited, until } from "../support/daemonProcess.ts"
import { endedTurn, readEvents, type Seen } from "../support/sseReader.ts"
import {
  cleanUpHubs,
  daemonRecord,
  type Hub,
  hubApi,
  processAlive,
  runHubCli,
  startHub,
  setUpWorkHome as setUp,
  createWorkAgent as createAgent
} from "../support/hubProcess.ts"

afterEach(cleanUpHubs)

const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")


const promptVia = (hub: Hub, agentId: string, body: { readonly text: string; readonly wait?: boolean }) =>
  hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, body)

/** A reader of the agent's events relayed by the hub. */
const follow = (hub: Hub, agentId: string, lastEventId?: number | string) =>
  readEvents(`http://127.0.0.1:${hub.port}/v1/homes/work/agents/${agentId}/events`, hub.token, lastEventId)

/** How many daemons became ready for the home: each start appends to the hub's log of it. */
const daemonStarts = (hubHome: string) => {
  const log = join(hubHome, "logs", "work.log")
  return existsSync(log) ? readFileSync(log, "utf8").split("\n").filter((l) => l.includes("Quiesce ready")).length : 0
}

const outputOf = (seen: ReadonlyArray<Seen>, turnId: string) =>
  seen.flatMap((e) => e.event._tag === "output" && e.event.turnId === turnId ? [e.event.text] : []).join("")

/** How many connections to `port` on loopback are open (established), from /proc/net/tcp: the clients' ends. */
const connectionsTo = (port: number) => {
  const remote = `0100007F:${port.toString(16).toUpperCase().padStart(4, "0")}`
  return readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1).filter((line) => {
    const fields = line.trim().split(/\s+/)
    return fields[2] === remote && fields[3] === "01"
  }).length
}

const rssBytes = (pid: number): number => {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return Number(match?.[1] ?? 0) * 1024
}

/** Whether no id came twice (a reader resuming from any of them resumes from one place). */
const distinctIds = (seen: ReadonlyArray<Seen>) => new Set(seen.map((e) => String(e.id))).size === seen.length

describe("live events through the hub", () => {
  it("relays a turn's output line by line before it ends, resumes with Last-Event-ID, refuses as other routes, ends when the hub stops", async () => {
    const { dir, hubHome, root } = setUp()
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    const daemonPort = daemonRecord(dir)!.port
    const reader = follow(hub, agentId)
    await reader.connected()
    expect(reader.status()).toBe(200)
    expect(reader.contentType()).toContain("text/event-stream")

    const sent = await promptVia(hub, agentId, { text: "for i in 1 2 3 4 5; do echo $i; sleep 1; done" })
    const turnId: string = sent.body.turnId
    await until(() => endedTurn(reader.seen, turnId) !== undefined, "the turn's end is relayed", 20_000)
    const ended = endedTurn(reader.seen, turnId)!
    expect(ended.event).toMatchObject({ state: "completed", reply: "1\n2\n3\n4\n5\n" })
    expect(outputOf(reader.seen, turnId)).toBe("1\n2\n3\n4\n5\n")
    const outputs = reader.seen.filter((e) => e.event._tag === "output")
    // Line by line as it came: nothing held back until the turn ended.
    expect(outputs.length).toBeGreaterThanOrEqual(4)
    expect(ended.at - outputs[0]!.at).toBeGreaterThan(2_500)
    expect(reader.seen.map((e) => e.event._tag)).not.toContain("gap")
    expect(distinctIds(reader.seen)).toBe(true)

    // A reconnect after the second event: the rest, exactly, without a gap.
    const again = follow(hub, agentId, reader.seen[1]!.id)
    await until(() => again.seen.length >= reader.seen.length - 2, "the reconnect reads the rest")
    expect(again.seen.map((e) => e.id)).toEqual(reader.seen.slice(2).map((e) => e.id))
    again.close()

    // Each reader holds one connection to the daemon, which closes when the reader goes away (the
    // hub's kept-alive connections for other requests only ever close meanwhile).
    const readers = Array.from({ length: 5 }, () => follow(hub, agentId))
    await Promise.all(readers.map((r) => r.connected()))
    await until(() => connectionsTo(daemonPort) >= 6, "a connection to the daemon for each reader")
    const withReaders = connectionsTo(daemonPort)
    for (const r of readers) r.close()
    await until(() => connectionsTo(daemonPort) <= withReaders - 5, "the readers' connections to the daemon close with them")

    // The home's page, served by the hub, reads it with its session (cookie and key), as it reads the rest.
    const link = await hubApi(hub, "POST", "/v1/login-links")
    const started = await fetch(`http://127.0.0.1:${hub.port}/v1/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: `http://127.0.0.1:${hub.port}` },
      body: JSON.stringify({ code: link.body.path.split("#")[1] })
    })
    expect(started.status).toBe(201)
    const cookie = started.headers.get("set-cookie")!.split(";")[0]!
    const { key } = await started.json()
    const pageRead = new AbortController()
    const asPage = await fetch(`http://127.0.0.1:${hub.port}/v1/homes/work/agents/${agentId}/events`, {
      headers: { cookie, "quiesce-session-key": key, "sec-fetch-site": "same-origin" },
      signal: pageRead.signal
    })
    expect(asPage.status).toBe(200)
    expect(asPage.headers.get("content-type")).toContain("text/event-stream")
    let pageStreamEnded = false
    void (async () => {
      const chunks = asPage.body!.getReader()
      while (!(await chunks.read()).done);
      pageStreamEnded = true
    })().catch(() => {})
    // Signed out: the page's open stream ends too, as its next read would be refused.
    const signedOut = await fetch(`http://127.0.0.1:${hub.port}/v1/session`, {
      method: "DELETE",
      headers: { cookie, "quiesce-session-key": key, origin: `http://127.0.0.1:${hub.port}` }
    })
    expect(signedOut.status).toBe(204)
    await until(() => pageStreamEnded, "the signed-out page's stream ends", 6_000)
    pageRead.abort()
    const cookieOnly = await fetch(`http://127.0.0.1:${hub.port}/v1/homes/work/agents/${agentId}/events`, { headers: { cookie } })
    expect(cookieOnly.status).toBe(401)
    await cookieOnly.body?.cancel()

    // Refusals as the hub's other routes answer them: problems, not streams.
    const unknownAgent = follow(hub, "agent-nope")
    await until(() => unknownAgent.ended(), "the unknown agent is answered")
    expect(unknownAgent.status()).toBe(404)
    expect(unknownAgent.contentType()).toContain("application/problem+json")
    expect(JSON.parse(unknownAgent.body())._tag).toBe("AgentNotFound")
    const unknownHome = await hubApi(hub, "GET", `/v1/homes/nowhere/agents/${agentId}/events`)
    expect(unknownHome.status).toBe(404)
    expect(unknownHome.body._tag).toBe("HomeNotManaged")
    const anonymous = await fetch(`http://127.0.0.1:${hub.port}/v1/homes/work/agents/${agentId}/events`)
    expect(anonymous.status).toBe(401)
    await anonymous.body?.cancel()

    // The hub stopping ends its open relays at once (its daemons run on).
    const stoppedAt = Date.now()
    process.kill(-hub.process.pid!, "SIGTERM")
    await until(() => reader.ended(), "the open relay ends with the hub", 10_000)
    expect(Date.now() - stoppedAt).toBeLessThan(5_000)
    await exited(hub.process)
  }, 90_000)

  it("a stream on a retired home starts nothing; it waits, follows the daemon a prompt starts (a gap marks the change), and does not keep it from retiring", async () => {
    const { dir, hubHome, root } = setUp("3s")
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    const first = daemonRecord(dir)!
    await until(() => !processAlive(first.pid), "the idle daemon retires itself", 30_000)

    const reader = follow(hub, agentId)
    await reader.connected()
    expect(reader.status()).toBe(200)
    // Longer than the relay's look for a daemon, many times over: nothing is started.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    expect(daemonRecord(dir)).toBeUndefined()
    expect(liveLockHolder(dir)).toBeUndefined()
    expect(daemonStarts(hubHome)).toBe(1)
    expect(reader.ended()).toBe(false)
    // Told once that the home has no daemon (a notice without an id, which typed readers skip).
    expect(reader.raw().split("event: no-daemon\n").length - 1).toBe(1)
    expect(reader.seen).toEqual([])

    // A prompt starts the daemon; the open stream follows it from its start, the change first.
    const resumed = await promptVia(hub, agentId, { text: "echo again", wait: true })
    expect(resumed.body).toMatchObject({ state: "completed", output: "again\n" })
    const second = daemonRecord(dir)!
    await until(() => endedTurn(reader.seen, resumed.body.turnId) !== undefined, "the new daemon's turn is relayed", 15_000)
    const change = reader.seen[0]!.event
    expect(change._tag).toBe("gap")
    expect(change._tag === "gap" && String(change.after)).toBe("0")
    const tags = reader.seen.map((e) => e.event._tag)
    expect(tags).toContain("turn-accepted")
    expect(outputOf(reader.seen, resumed.body.turnId)).toBe("again\n")

    // An open relay is no activity: the daemon retires at its idle timeout all the same, and the relay goes on.
    await until(() => !processAlive(second.pid), "the daemon retires with a relay open", 30_000)
    await until(() => reader.raw().split("event: no-daemon\n").length - 1 === 2, "the reader is told the home has no daemon again")
    expect(reader.ended()).toBe(false)
    const before = reader.seen.length
    const lastId = reader.seen.at(-1)!.id

    // The next daemon: a gap after the last id read, then its events; ids never go backwards.
    const third = await promptVia(hub, agentId, { text: "echo third", wait: true })
    expect(third.body).toMatchObject({ state: "completed", output: "third\n" })
    const thirdPid = daemonRecord(dir)!.pid
    await until(() => endedTurn(reader.seen, third.body.turnId) !== undefined, "the third daemon's turn is relayed", 15_000)
    const later = reader.seen.slice(before)
    expect(later[0]!.event).toMatchObject({ _tag: "gap", after: lastId })
    expect(later[0]!.id).not.toBe(lastId)
    expect(outputOf(later, third.body.turnId)).toBe("third\n")
    expect(distinctIds(reader.seen)).toBe(true)
    expect(daemonStarts(hubHome)).toBe(3)
    reader.close()

    // The CLI on the retired home: its prompt starts the daemon, and --follow prints the turn as it runs.
    await until(() => !processAlive(thirdPid), "the third daemon retires", 30_000)
    const followed = runHubCli(hubHome, "--hub", "work", "prompt", agentId, "--follow", "echo fourth")
    expect(followed).toMatchObject({ status: 0, stdout: "fourth\n" })
    expect(followed.stderr).not.toContain("missed events")
    expect(daemonStarts(hubHome)).toBe(4)
  }, 120_000)

  it("a reader that stops reading slows its own connection to the daemon, the hub buffers nothing for it; reading again, it gets a gap", async () => {
    const { dir, hubHome, root } = setUp()
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    // The turn's end, seen on the daemon itself (keeping nothing of what it read).
    const watching = new AbortController()
    const direct = await fetch(`http://127.0.0.1:${daemonRecord(dir)!.port}/v1/agents/${agentId}/events`, {
      headers: { authorization: `Bearer ${readFileSync(join(dir, "token"), "utf8").trim()}` },
      signal: watching.signal
    })
    const turnEnded = (async () => {
      const chunks = direct.body!.getReader()
      const decoder = new TextDecoder()
      let tail = ""
      for (;;) {
        const { done, value } = await chunks.read()
        if (done) return
        const text = tail + decoder.decode(value, { stream: true })
        if (text.includes("event: turn-ended")) return
        tail = text.slice(-200)
      }
    })()
    // A reader over node:http, paused: what the hub sends waits in the sockets, then in the hub's
    // connection to the daemon, which the hub stops reading.
    let received = ""
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const request = get(`http://127.0.0.1:${hub.port}/v1/homes/work/agents/${agentId}/events`, {
        headers: { authorization: `Bearer ${hub.token}` }
      }, resolve)
      request.on("error", reject)
    })
    expect(response.statusCode).toBe(200)
    response.pause()
    response.on("data", (chunk) => (received += String(chunk)))
    const before = rssBytes(hub.process.pid!)

    // 30 MB of output, in events of at most a few KiB: far more than the sockets and the window hold.
    // (Not waiting for it through the hub, whose answer would be the whole 30 MB reply.)
    const sent = await promptVia(hub, agentId, { text: "head -c 30000000 /dev/zero | tr '\\0' x | fold -w 100" })
    expect(sent.status).toBe(200)
    await turnEnded
    watching.abort()
    const after = rssBytes(hub.process.pid!)
    // What passed through the hub is what the sockets took (some MB, and its garbage not yet
    // collected); a hub that buffered would hold the 30 MB and more (over 100 MB measured).
    expect(after - before).toBeLessThan(50 * 1024 * 1024)

    // Reading again: what the sockets held, a gap where the daemon's window passed the reader, then the turn's end.
    response.resume()
    await until(() => received.includes("event: turn-ended"), "the paused reader reads the turn's end", 30_000)
    expect(received).toContain("event: gap")
    expect(received.length).toBeLessThan(20_000_000)
    response.destroy()
  }, 120_000)

  it("the CLI follows through the hub: prompt --follow exits with the turn's outcome, watch prints each event and follows on across a hub restart", async () => {
    const { hubHome, root } = setUp()
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)

    const run = (...args: Array<string>) => {
      const child = spawn(process.execPath, [cli, "--home", hubHome, "--hub", "work", ...args], {
        stdio: ["ignore", "pipe", "pipe"],
        detached: true
      })
      const chunks: Array<{ readonly text: string; readonly at: number }> = []
      let stderr = ""
      child.stdout.on("data", (chunk) => chunks.push({ text: String(chunk), at: Date.now() }))
      child.stderr.on("data", (chunk) => (stderr += String(chunk)))
      return { child, chunks, stdout: () => chunks.map((c) => c.text).join(""), stderr: () => stderr }
    }

    const watcher = run("watch", agentId)
    // Following once it sees a turn (the CLI takes a moment to start).
    await until(async () => {
      await promptVia(hub, agentId, { text: "true", wait: true })
      return /turn \S+ completed/.test(watcher.stdout())
    }, "watch follows the agent through the hub", 30_000)
    const followed = run("prompt", agentId, "--follow", "for i in 1 2 3; do echo line $i; sleep 1; done")
    expect(await exited(followed.child)).toBe(0)
    expect(followed.stdout()).toBe("line 1\nline 2\nline 3\n")
    expect(followed.chunks.at(-1)!.at - followed.chunks[0]!.at).toBeGreaterThan(1_500)

    const failed = runHubCli(hubHome, "--hub", "work", "prompt", agentId, "--follow", "echo partial; exit 3")
    expect(failed.status).toBe(1)
    expect(failed.stdout).toBe("partial\n")
    expect(failed.stderr).toContain("failed")

    await until(() => watcher.stdout().includes("line 3") && /turn \S+ failed/.test(watcher.stdout()), "watch prints both turns")
    expect(watcher.stdout()).toContain("partial")

    // The hub restarts (on another port): watch opens the stream again, after the last event it read.
    process.kill(-hub.process.pid!, "SIGTERM")
    await exited(hub.process)
    const restarted = await startHub(hubHome)
    expect((await promptVia(restarted, agentId, { text: "echo after the restart", wait: true })).body.state).toBe("completed")
    await until(() => watcher.stdout().includes("after the restart"), "watch follows on through the restarted hub", 30_000)
    expect(watcher.child.exitCode).toBeNull()
    process.kill(-watcher.child.pid!, "SIGINT")
    await exited(watcher.child)
  }, 90_000)
})
