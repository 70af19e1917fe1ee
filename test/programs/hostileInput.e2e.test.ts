/**
 * The daemon against hostile or broken input, black-box: real daemon processes on loopback, an
 * unusable token file, oversized and endless request bodies, a permissive umask. Time is real,
 * so every wait polls with a bound.
 */
import { afterEach, describe, expect, it } from "vitest"
import { lstatSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import { join } from "node:path"
import {
  api,
  cleanUpDaemons,
  createShellAgent,
  type Daemon,
  exited,
  freePort,
  groupAlive,
  newHome,
  ready,
  runCli,
  startDaemon,
  until
} from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

const MiB = 1024 * 1024

/** The 413 problem body (the API's one error shape). */
const tooLarge = (limitBytes: number) => ({
  type: "urn:quiesce:error:RequestTooLarge",
  title: "Request too large",
  status: 413,
  detail: `Request body exceeds ${limitBytes} bytes`,
  _tag: "RequestTooLarge",
  message: `Request body exceeds ${limitBytes} bytes`,
  limitBytes
})

/** A create request whose body is `size` bytes: a shell agent with one label padding it out. */
const createBody = (cwd: string, size: number) => {
  const empty = JSON.stringify({ provider: "shell", cwd, labels: { padding: "" } })
  return JSON.stringify({ provider: "shell", cwd, labels: { padding: "x".repeat(size - empty.length) } })
}

interface Answer {
  readonly status: number
  readonly body: unknown
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * POSTs over node:http, which (unlike fetch) hands over the response as soon as it comes, while
 * the body is still being sent. `body` is sent with its Content-Length; `stream` without one
 * (chunked), `stream.total` bytes in 1 MiB chunks, until the response arrives.
 */
const post = (
  daemon: Daemon,
  path: string,
  send: { readonly body: string } | { readonly stream: { readonly head: string; readonly total: number } }
) =>
  new Promise<Answer & { readonly sentBytes: number }>((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${daemon.token()}`, "content-type": "application/json" }
    if ("body" in send) headers["content-length"] = String(Buffer.byteLength(send.body))
    const request = http.request({ host: "127.0.0.1", port: daemon.port, method: "POST", path, headers })
    let sentBytes = 0
    let answered = false
    request.on("response", (response) => {
      answered = true
      let text = ""
      response.on("data", (chunk) => (text += String(chunk)))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: parse(text), sentBytes }))
      response.on("error", reject)
    })
    // Once answered, the server may close the connection under a body still being written.
    request.on("error", (error) => answered || reject(error))
    if ("body" in send) {
      request.end(send.body)
      sentBytes = Buffer.byteLength(send.body)
      return
    }
    const chunk = Buffer.alloc(MiB, "x")
    request.write(send.stream.head)
    sentBytes = send.stream.head.length
    const pump = () => {
      while (!answered && sentBytes < send.stream.total) {
        // No more than the total: a small body past the limit is drained by the server, which keeps
        // the connection (a megabyte past it closes the connection, a race with the answer under load).
        const piece = chunk.subarray(0, Math.min(chunk.length, send.stream.total - sentBytes))
        sentBytes += piece.length
        if (!request.write(piece)) return void request.once("drain", pump)
      }
      if (!answered) request.end('"}}')
    }
    pump()
  })

/** The resident set of a live process, from procfs. */
const rssBytes = (pid: number): number => {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return match === null ? 0 : Number(match[1]) * 1024
}

const agentIdOf = (body: unknown): string =>
  typeof body === "object" && body !== null && "agentId" in body && typeof body.agentId === "string" ? body.agentId : ""

const agentIds = async (daemon: Daemon): Promise<ReadonlyArray<string>> => {
  const listed = await api(daemon, "GET", "/v1/agents")
  expect(listed.status).toBe(200)
  return Array.isArray(listed.body) ? listed.body.map((agent: { agentId: string }) => agent.agentId) : []
}

describe("the daemon on hostile input", () => {
  for (const [kind, content] of [["an empty", ""], ["a whitespace-only", " \n\t \n"]] as const) {
    it(`${kind} token file stops the daemon before it is ready, saying what to do`, async () => {
      const home = newHome()
      writeFileSync(join(home, "token"), content, { mode: 0o600 })
      const daemon = startDaemon(home, await freePort())
      expect(await exited(daemon.process)).toBe(1)
      expect(daemon.output()).toContain(
        `The API token file ${join(home, "token")} is empty. Delete it to have a new one made at the next start`
      )
      expect(daemon.output()).not.toContain("Quiesce ready")
    }, 30_000)
  }

  it("the CLI refuses an empty token instead of sending an empty bearer", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    expect(runCli(daemon, "agents", "list").status).toBe(0)
    writeFileSync(join(daemon.home, "token"), "\n")
    const refused = runCli(daemon, "agents", "list")
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain(`The API token file ${join(daemon.home, "token")} is empty`)
    expect(refused.stdout).toBe("")
  }, 30_000)

  it("a 10 MiB create body is a typed 413 and stores nothing; a body just under 1 MiB is served", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const before = await agentIds(daemon)

    const refused = await post(daemon, "/v1/agents", { body: createBody(daemon.home, 10 * MiB) })
    expect(refused.status).toBe(413)
    expect(refused.body).toEqual(tooLarge(MiB))
    expect(await agentIds(daemon)).toEqual(before)

    const underLimit = createBody(daemon.home, MiB - 1024)
    const fits = await post(daemon, "/v1/agents", { body: underLimit })
    expect(fits.status).toBe(201)
    const agentId = agentIdOf(fits.body)
    expect(await agentIds(daemon)).toEqual([...before, agentId])
    const shown = await api(daemon, "GET", `/v1/agents/${agentId}`)
    expect(shown.body.labels.padding).toBe(JSON.parse(underLimit).labels.padding)
  }, 60_000)

  it("a create that sets a quiesce.* label itself is a typed 400 naming it, over the API and the CLI; a parent given as such is kept", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const parent = await createShellAgent(daemon)
    const child = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: daemon.home, parentAgentId: parent })
    expect(child.status).toBe(201)
    const shown = await api(daemon, "GET", `/v1/agents/${agentIdOf(child.body)}`)
    expect(shown.body.parentAgentId).toBe(parent)
    expect(shown.body.labels).toEqual({ "quiesce.parentAgentId": parent })
    const before = await agentIds(daemon)

    // As a label, the parent would skip the check that it exists (and could name the child itself).
    const refused = await api(daemon, "POST", "/v1/agents", {
      provider: "shell",
      cwd: daemon.home,
      labels: { team: "web", "quiesce.parentAgentId": "agent-nobody" }
    })
    expect(refused.status).toBe(400)
    expect(refused.contentType).toContain("application/problem+json")
    expect(refused.body).toMatchObject({
      type: "urn:quiesce:error:ReservedLabel",
      status: 400,
      _tag: "ReservedLabel",
      label: "quiesce.parentAgentId"
    })
    expect(refused.body.detail).toContain(`"quiesce.parentAgentId" is reserved`)
    const cli = runCli(daemon, "agents", "create", "--cwd", daemon.home, "--label", `quiesce.internal=true`)
    expect(cli.status).toBe(1)
    expect(cli.stderr).toContain(`"quiesce.internal" is reserved`)
    expect(await agentIds(daemon)).toEqual(before)

    // Both runtimes end with the daemon: nothing this test started is left.
    const pids: Array<number> = await Promise.all(
      [parent, agentIdOf(child.body)].map(async (id) => (await api(daemon, "GET", `/v1/agents/${id}`)).body.pid)
    )
    expect(pids.every((pid) => Number.isInteger(pid) && pid > 0)).toBe(true)
    daemon.process.kill("SIGTERM")
    expect(await exited(daemon.process)).toBe(0)
    await until(() => pids.every((pid) => !groupAlive(pid)), "the agents' process groups are gone")
  }, 60_000)

  it("a ~200 MB chunked body is cut off at the limit: 413, bounded memory, and the daemon serves on", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const pid = daemon.process.pid!
    const baseline = rssBytes(pid)
    let peak = baseline
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 20)
    const head = JSON.stringify({ provider: "shell", cwd: daemon.home, labels: { padding: "" } }).slice(0, -3)
    const refused = await post(daemon, "/v1/agents", { stream: { head, total: 200 * 1000 * 1000 } })
      .finally(() => clearInterval(sampler))
    peak = Math.max(peak, rssBytes(pid))
    console.info(
      `hostile input: chunked body answered ${refused.status} after ${(refused.sentBytes / MiB).toFixed(0)} MiB sent; ` +
        `daemon RSS ${(baseline / MiB).toFixed(0)} MiB before, peak ${(peak / MiB).toFixed(0)} MiB`
    )
    // Reading the whole body would take hundreds of MB; what the limit lets in is a few MB.
    expect(peak - baseline).toBeLessThan(64 * MiB)
    expect(refused.status).toBe(413)
    expect(refused.body).toEqual(tooLarge(MiB))

    expect(await agentIds(daemon)).toEqual([])
    expect((await fetch(`http://127.0.0.1:${daemon.port}/v1/health`)).status).toBe(200)
    expect((await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: daemon.home })).status).toBe(201)
  }, 60_000)

  it("daemon.maxRequestBytes in config.json sets the limit", async () => {
    const home = newHome()
    writeFileSync(join(home, "config.json"), JSON.stringify({ daemon: { maxRequestBytes: 4096 } }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const refused = await post(daemon, "/v1/agents", { body: createBody(home, 8192) })
    expect(refused.status).toBe(413)
    expect(refused.body).toEqual(tooLarge(4096))
    const head = JSON.stringify({ provider: "shell", cwd: home, labels: { padding: "" } }).slice(0, -3)
    const chunked = await post(daemon, "/v1/agents", { stream: { head, total: 64 * 1024 } })
    expect(chunked.status).toBe(413)
    expect(chunked.body).toEqual(tooLarge(4096))
    expect(await agentIds(daemon)).toEqual([])
    expect((await post(daemon, "/v1/agents", { body: createBody(home, 4000) })).status).toBe(201)
  }, 30_000)

  it("under umask 000, every file in the home is its owner's only and every directory 0700", async () => {
    const home = join(newHome(), "home")
    const daemon = startDaemon(home, await freePort(), [], { umask: "000" })
    await ready(daemon)
    const created = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: home })
    expect(created.status).toBe(201)
    const { agentId, sessionId } = created.body
    const hi = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "echo hi", wait: true })
    expect(hi.body.output).toContain("hi")
    // The daemon's own files are private, but it leaves the umask its agents inherit alone.
    const umask = await api(daemon, "POST", `/v1/agents/${agentId}/prompts`, { text: "umask", wait: true })
    expect(umask.body.output.trim()).toBe("0000")

    const files: Array<string> = []
    const loose: Array<string> = []
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const entry = join(dir, name)
        const stat = lstatSync(entry)
        const mode = stat.mode & 0o777
        const relative = entry.slice(home.length + 1)
        if (stat.isDirectory()) {
          if (mode !== 0o700) loose.push(`${relative}/ ${mode.toString(8)}`)
          walk(entry)
        } else {
          files.push(relative)
          if ((mode & 0o077) !== 0) loose.push(`${relative} ${mode.toString(8)}`)
        }
      }
    }
    expect(lstatSync(home).mode & 0o777).toBe(0o700)
    walk(home)
    expect(files).toEqual(expect.arrayContaining([
      "token",
      "daemon.lock",
      "daemon.json",
      "quiesce.sqlite",
      "quiesce.sqlite-wal",
      "quiesce.sqlite-shm",
      join("plugins", "shell", `${sessionId}.json`)
    ]))
    expect(loose).toEqual([])
  }, 60_000)
})
