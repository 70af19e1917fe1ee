/**
 * The hub as a user meets it: a real `quiesce hub` process, the daemons it launches (real
 * processes, detached), the reference shell provider, the CLI. Time is real, so every wait polls
 * with a bound; every process started is stopped by group after each test.
 */
import { afterEach, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { groupAlive, until } from "../support/daemonProcess.ts"
import { readEvents } from "../support/sseReader.ts"
import {
  cleanUpHubs,
  daemonRecord,
  type Hub,
  hubApi,
  inventoryRow,
  newHubRoot,
  processAlive,
  runHubCli,
  startHub,
  writeHubConfig,
  setUpWorkHome as setUp,
  createWorkAgent as createAgent
} from "../support/hubProcess.ts"
import { daemonProtocolVersion } from "../../src/domain/retirement.ts"
import { pluginPath as shellPluginPath } from "../../src/layers/providers/shell/ShellProvider.ts"

const misbehavingPlugin = join(import.meta.dirname, "../fixtures/misbehavingPlugin.mjs")

afterEach(cleanUpHubs)


const promptVia = (hub: Hub, agentId: string, body: { readonly text: string; readonly wait?: boolean; readonly clientMessageId?: string }) =>
  hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, body)

const linesOf = (file: string) => existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((line) => line !== "") : []

/** How many daemons became ready for the home: each start appends to the hub's log of it. */
const daemonStarts = (hubHome: string) => linesOf(join(hubHome, "logs", "work.log")).filter((l) => l.includes("Quiesce ready")).length

/** The process's start time (procfs stat field 22), as a daemon records it. */
const startTimeOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19])
}

/** A process of the test's own that stands in for a daemon in a hand-written record. */
const stranger = () => {
  const child = spawn("sleep", ["300"], { detached: true, stdio: "ignore" })
  const pid = child.pid!
  return { pid, stop: () => process.kill(-pid, "SIGKILL") }
}

const handWrittenRecord = (
  dir: string,
  fields: { readonly pid: number; readonly startTime: number | null; readonly protocolVersion: number }
) => {
  writeFileSync(join(dir, "daemon.json"), JSON.stringify({
    ...fields,
    instanceId: "hand-written",
    host: "127.0.0.1",
    port: 9,
    packageVersion: "0.0.1",
    idleTimeout: { value: null, millis: null, source: "omitted" }
  }))
}

const shellWithDelays = (dir: string, env: Record<string, string>) => {
  // Written before the daemon's first start, which would make the directory itself.
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "config.json"), JSON.stringify({
    providers: { shell: { kind: "plugin", command: process.execPath, args: [shellPluginPath], env } }
  }))
}

describe("the hub with real daemons", () => {
  it("an idle home's daemon retires after the hub default; reads never start it; the next prompt resumes the same session", async () => {
    const { dir, hubHome, root } = setUp("3s")
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    const first = daemonRecord(dir)!
    const inventory = (await hubApi(hub, "GET", "/v1/daemons")).body
    expect(inventory.hubDefaultIdleTimeout).toEqual({ value: "3s", source: "hub.json" })
    expect(inventory.daemons[0]).toMatchObject({
      name: "work",
      state: "running",
      pid: first.pid,
      startTime: first.startTime,
      instanceId: first.instanceId,
      compatible: true,
      canRetire: true,
      idleTimeout: { value: "3s", source: "hub" }
    })
    expect(inventory.daemons[0].memoryBytes).toBeGreaterThan(0)
    // Never a token.
    const daemonToken = readFileSync(join(dir, "token"), "utf8").trim()
    expect(JSON.stringify(inventory)).not.toContain(daemonToken)
    expect(JSON.stringify(inventory)).not.toContain(hub.token)

    // A prompt without a client message id gets one at the hub, named in the answer.
    const sent = await fetch(`http://127.0.0.1:${hub.port}/v1/homes/work/agents/${agentId}/prompts`, {
      method: "POST",
      headers: { authorization: `Bearer ${hub.token}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "echo remembered", wait: true })
    })
    const answered = { status: sent.status, body: await sent.json() }
    expect(answered.body).toMatchObject({ state: "completed", output: "remembered\n" })
    const givenId = sent.headers.get("quiesce-client-message-id") ?? ""
    expect(givenId).toMatch(/^hub-/)
    // Its repeat is the same turn.
    expect((await promptVia(hub, agentId, { text: "echo remembered", wait: true, clientMessageId: givenId })).body.turnId)
      .toBe(answered.body.turnId)
    const { pid: runtimePid, sessionId } = (await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).body

    await until(() => !processAlive(first.pid), "the daemon retires itself", 30_000)
    await until(() => !groupAlive(runtimePid), "its runtime's process group is gone")
    expect(daemonRecord(dir)).toBeUndefined()
    expect(await inventoryRow(hub, "work")).toMatchObject({ state: "retired", pid: null, canRetire: false })

    // Reads, listings, status, the inventory, sweeps and retire now: none brings it back. The
    // agents and their turns are read from the home's saved store; what only a daemon knows is not.
    for (let i = 0; i < 10; i++) {
      for (const route of ["/v1/homes/work/agents", `/v1/homes/work/agents/${agentId}`, `/v1/homes/work/agents/${agentId}/turns`]) {
        const read = await hubApi(hub, "GET", route)
        expect(read.status, route).toBe(200)
      }
      for (const route of ["/v1/homes/work/daemon", "/v1/homes/work/runtimes"]) {
        const read = await hubApi(hub, "GET", route)
        expect(read.status, route).toBe(409)
        expect(read.body._tag).toBe("HomeRetired")
      }
      for (const route of ["/v1/homes/work/daemon/retire", "/v1/homes/work/sweep", `/v1/homes/work/runtimes/${agentId}/collect`]) {
        expect((await hubApi(hub, "POST", route)).body._tag, route).toBe("HomeRetired")
      }
      expect((await hubApi(hub, "GET", "/v1/daemons")).status).toBe(200)
      // Live events: the relay answers and waits for a daemon, starting none.
      const events = readEvents(`http://127.0.0.1:${hub.port}/v1/homes/work/agents/${agentId}/events`, hub.token)
      await events.connected()
      expect(events.status()).toBe(200)
      events.close()
    }
    expect(daemonRecord(dir)).toBeUndefined()
    expect(daemonStarts(hubHome)).toBe(1)

    const resumed = await promptVia(hub, agentId, { text: "echo back", wait: true })
    expect(resumed.body).toMatchObject({ state: "completed", output: "back\n", resumed: true, sessionId })
    const second = daemonRecord(dir)!
    expect(second.pid).not.toBe(first.pid)
    expect(daemonStarts(hubHome)).toBe(2)
    const transcript = readFileSync(join(dir, "plugins", "shell", `${sessionId}.json`), "utf8")
    expect(transcript).toContain("echo remembered")
    expect(transcript).toContain("echo back")
  }, 90_000)

  it("a close through the hub carries force: refused naming the veto, an invalid force a typed 400, force=true ends the job", async () => {
    const { hubHome, root } = setUp("0s")
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    expect((await promptVia(hub, agentId, { text: "sleep 301 &", wait: true })).body).toMatchObject({ state: "completed" })
    const { pid: runtimePid } = (await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).body
    const close = (query: string) => hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/close${query}`)

    const refused = await close("")
    expect(refused.status).toBe(409)
    expect(refused.body).toMatchObject({ _tag: "RuntimeCloseRefused", veto: { agentId, outcome: "vetoed", message: expect.stringContaining("sleep 301") } })
    const invalid = await close("?force=yes")
    expect(invalid.status).toBe(400)
    expect(invalid.body).toMatchObject({ _tag: "InvalidRequest", errors: [{ path: ["query", "force"] }] })
    expect((await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).body.resident).toBe(true)

    const forced = await close("?force=true")
    expect(forced.status, JSON.stringify(forced.body)).toBe(200)
    expect(forced.body).toMatchObject({ agentId, ended: { veto: { outcome: "vetoed", message: expect.stringContaining("sleep 301") } } })
    expect((await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).body.resident).toBe(false)
    await until(() => !groupAlive(runtimePid), "the closed runtime's group, its job with it, is gone")
  }, 60_000)

  it("a delete through the hub carries force: refused naming the veto, force=true deletes it and ends the job", async () => {
    const { hubHome, root } = setUp("0s")
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    expect((await promptVia(hub, agentId, { text: "sleep 301 &", wait: true })).body).toMatchObject({ state: "completed" })
    const { pid: runtimePid } = (await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).body
    const remove = (query: string) => hubApi(hub, "DELETE", `/v1/homes/work/agents/${agentId}${query}`)

    const refused = await remove("")
    expect(refused.status).toBe(409)
    expect(refused.body).toMatchObject({ _tag: "AgentDeleteRefused", veto: { agentId, outcome: "vetoed", message: expect.stringContaining("sleep 301") } })
    expect((await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).body.resident).toBe(true)

    const forced = await remove("?force=true")
    expect(forced.status, JSON.stringify(forced.body)).toBe(200)
    expect(forced.body).toMatchObject({ agentId, ended: { veto: { outcome: "vetoed", message: expect.stringContaining("sleep 301") } } })
    expect((await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).status).toBe(404)
    await until(() => !groupAlive(runtimePid), "the deleted agent's runtime group, its job with it, is gone")
  }, 60_000)

  it("one client message id sent to the old daemon, during the retirement wait and to the replacement: one turn, one turn id", async () => {
    const { dir, hubHome, root } = setUp("2s")
    // The shell runtime is slow to answer the safety query and slower to close: a long retirement.
    shellWithDelays(dir, { QUIESCE_SHELL_CAN_STOP_DELAY_MS: "1500", QUIESCE_SHELL_CLOSE_DELAY_MS: "1500" })
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    const old = daemonRecord(dir)!
    const once = { text: "echo once >> runs.log; echo done", wait: true, clientMessageId: "the-same" }
    const atOld = await promptVia(hub, agentId, once)
    expect(atOld.body).toMatchObject({ state: "completed", output: "done\n" })

    await until(async () => (await hubApi(hub, "GET", "/v1/homes/work/daemon")).body?.phase === "retiring", "the daemon retires", 20_000)
    // During the retirement wait: the repeat, and a fresh prompt that must wait for the replacement.
    const [duringRepeat, duringFresh] = await Promise.all([
      promptVia(hub, agentId, once),
      promptVia(hub, agentId, { text: "echo fresh >> runs.log; echo new", wait: true, clientMessageId: "fresh" })
    ])
    expect(duringRepeat.body.turnId).toBe(atOld.body.turnId)
    expect(duringFresh.body).toMatchObject({ state: "completed", output: "new\n", resumed: true })
    expect(processAlive(old.pid)).toBe(false)
    const replacement = daemonRecord(dir)!
    expect(replacement.pid).not.toBe(old.pid)

    const atReplacement = await promptVia(hub, agentId, once)
    expect(atReplacement.body).toMatchObject({ turnId: atOld.body.turnId, state: "completed", output: "done\n" })
    expect(linesOf(join(root, "runs.log")).sort()).toEqual(["fresh", "once"])
    expect(daemonStarts(hubHome)).toBe(2)
  }, 90_000)

  it("20 concurrent prompts to a retired home start one daemon and run once each; 20 copies of one id run once", async () => {
    const { hubHome, root } = setUp("0s")
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    const retireNow = async () => {
      const row = await inventoryRow(hub, "work")
      const identity = { pid: row.pid, startTime: row.startTime, instanceId: row.instanceId }
      const retired = await hubApi(hub, "POST", "/v1/daemons/work/retire", identity)
      expect(retired.status, JSON.stringify(retired.body)).toBe(202)
      await until(() => !processAlive(row.pid), "the retired daemon exits")
      expect((await inventoryRow(hub, "work")).state).toBe("retired")
    }
    // "0s": no timer; retire now still works (R6).
    expect((await inventoryRow(hub, "work")).idleTimeout).toEqual({ value: "0s", millis: null, source: "hub" })
    await retireNow()

    const distinct = await Promise.all(Array.from({ length: 20 }, (_, n) =>
      promptVia(hub, agentId, { text: `echo ${n} >> runs.log; echo out-${n}`, wait: true, clientMessageId: `distinct-${n}` })))
    for (const [n, answer] of distinct.entries()) {
      expect(answer.body, JSON.stringify(answer.body)).toMatchObject({ state: "completed", output: `out-${n}\n` })
    }
    expect(new Set(distinct.map((answer) => answer.body.turnId)).size).toBe(20)
    expect(linesOf(join(root, "runs.log")).map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, n) => n))
    expect(daemonStarts(hubHome)).toBe(2)

    // A change to hub.json counts for daemons started after it, never for a running one.
    writeHubConfig(hubHome, [{ name: "work", dir: join(root, "work") }], "1h")
    expect(await inventoryRow(hub, "work")).toMatchObject({ state: "running", idleTimeout: { value: "0s", source: "hub" } })
    expect((await hubApi(hub, "GET", "/v1/daemons")).body.hubDefaultIdleTimeout).toEqual({ value: "1h0m0s", source: "hub.json" })
    await retireNow()
    const copies = await Promise.all(Array.from({ length: 20 }, () =>
      promptVia(hub, agentId, { text: "echo copy >> copies.log; echo copied", wait: true, clientMessageId: "one-id" })))
    expect(new Set(copies.map((answer) => answer.body.turnId)).size).toBe(1)
    for (const answer of copies) expect(answer.body).toMatchObject({ state: "completed", output: "copied\n" })
    expect(linesOf(join(root, "copies.log"))).toEqual(["copy"])
    expect(daemonStarts(hubHome)).toBe(3)
    expect((await inventoryRow(hub, "work")).idleTimeout).toEqual({ value: "1h0m0s", millis: 3_600_000, source: "hub" })
  }, 120_000)

  it("a record whose pid is alive but reused is neither adopted nor signalled; actions on it are refused as stale", async () => {
    const { dir, hubHome, root } = setUp()
    const other = stranger()
    try {
      mkdirSync(dir, { recursive: true })
      handWrittenRecord(dir, { pid: other.pid, startTime: startTimeOf(other.pid) + 12345, protocolVersion: daemonProtocolVersion })
      const hub = await startHub(hubHome)
      const row = await inventoryRow(hub, "work")
      expect(row).toMatchObject({ state: "retired", pid: null })
      expect(row.note).toContain("stale")
      const identity = { pid: other.pid, startTime: startTimeOf(other.pid) + 12345, instanceId: "hand-written" }
      const stop = await hubApi(hub, "POST", "/v1/daemons/work/stop", { identity, confirm: `work:${other.pid}` })
      expect(stop.status).toBe(409)
      expect(stop.body._tag).toBe("StaleIdentity")
      expect((await hubApi(hub, "POST", "/v1/daemons/work/retire", identity)).body._tag).toBe("StaleIdentity")
      // A record without a start time cannot be verified: it is stale too, never signalled.
      handWrittenRecord(dir, { pid: other.pid, startTime: null, protocolVersion: daemonProtocolVersion })
      expect((await inventoryRow(hub, "work")).note).toContain("cannot be verified")
      const unverifiable = { pid: other.pid, startTime: null, instanceId: "hand-written" }
      expect((await hubApi(hub, "POST", "/v1/daemons/work/stop", { identity: unverifiable, confirm: `work:${other.pid}` })).body._tag)
        .toBe("StaleIdentity")
      expect(processAlive(other.pid)).toBe(true)
      // A mutation starts a real daemon, which takes the home over; the stranger is left alone.
      await createAgent(hub, root)
      const record = daemonRecord(dir)!
      expect(record.pid).not.toBe(other.pid)
      expect(processAlive(other.pid)).toBe(true)
    } finally {
      other.stop()
    }
  }, 60_000)

  it("a daemon of another protocol version is listed with canRetire false, never routed to, retired or stopped on its own", async () => {
    const { dir, hubHome } = setUp("1s")
    const other = stranger()
    try {
      mkdirSync(dir, { recursive: true })
      handWrittenRecord(dir, { pid: other.pid, startTime: startTimeOf(other.pid), protocolVersion: 99 })
      const hub = await startHub(hubHome)
      const row = await inventoryRow(hub, "work")
      expect(row).toMatchObject({ state: "incompatible", pid: other.pid, protocolVersion: 99, compatible: false, canRetire: false })
      const create = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "shell", cwd: dir })
      expect(create.status).toBe(409)
      expect(create.body._tag).toBe("DaemonIncompatible")
      const identity = { pid: other.pid, startTime: row.startTime, instanceId: "hand-written" }
      expect((await hubApi(hub, "POST", "/v1/daemons/work/retire", identity)).body._tag).toBe("DaemonIncompatible")
      await new Promise((resolve) => setTimeout(resolve, 2_000))
      expect(processAlive(other.pid)).toBe(true)
      expect(existsSync(join(hubHome, "logs", "work.log"))).toBe(false)
    } finally {
      other.stop()
    }
  }, 60_000)

  it("a force stop waits out the daemon's own shutdown deadline before it kills, so a slow orderly shutdown ends in order", async () => {
    const { dir, hubHome, root } = setUp()
    // A runtime that neither answers its close nor heeds SIGTERM: closing it takes its 6 s close
    // grace twice, longer than the hub's 10 s floor (the daemon's deadline is 2 x 6 s + 13 s = 25 s).
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, "config.json"), JSON.stringify({
      providers: {
        slow: { kind: "plugin", command: process.execPath, args: [misbehavingPlugin], env: { MISBEHAVING_SLOW_CLOSE: "1" }, closeGrace: "6s" }
      }
    }))
    const hub = await startHub(hubHome)
    const created = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "slow", cwd: root })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const daemon = daemonRecord(dir)!
    expect(daemon.shutdownDeadlineMillis).toBe(25_000)
    const identity = { pid: daemon.pid, startTime: daemon.startTime, instanceId: daemon.instanceId }
    const began = Date.now()
    const stopped = await hubApi(hub, "POST", "/v1/daemons/work/stop", { identity, confirm: `work:${daemon.pid}` })
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200)
    // Not killed: it released its runtime in order, after the close grace, and exited by itself.
    expect(stopped.body).toMatchObject({ killed: false, exited: true })
    expect(Date.now() - began).toBeGreaterThan(11_000)
    expect(Date.now() - began).toBeLessThan(25_000)
    expect(linesOf(join(hubHome, "logs", "work.log")).some((line) => line.includes("Shutdown released 1 runtime"))).toBe(true)
  }, 90_000)

  it("force stop through the CLI: needs NAME:PID, then the home answers stopped until resumed; a stale identity is refused", async () => {
    const { dir, hubHome, root } = setUp()
    const hub = await startHub(hubHome)
    const created = runHubCli(hubHome, "--hub", "work", "agents", "create", "--cwd", root, "--json")
    expect(created.status, created.stderr).toBe(0)
    const agentId = JSON.parse(created.stdout).agentId
    const first = daemonRecord(dir)!
    const listed = runHubCli(hubHome, "daemons")
    expect(listed.stdout).toMatch(new RegExp(`work\\s+running\\s+${first.pid}`))
    const json = runHubCli(hubHome, "daemons", "--json")
    expect(JSON.parse(json.stdout).daemons[0].pid).toBe(first.pid)

    const unconfirmed = runHubCli(hubHome, "daemons", "stop", "work")
    expect(unconfirmed.status).toBe(1)
    expect(unconfirmed.stderr).toContain(`--confirm work:${first.pid}`)
    expect(processAlive(first.pid)).toBe(true)
    const stopped = runHubCli(hubHome, "daemons", "stop", "work", "--confirm", `work:${first.pid}`)
    expect(stopped.status, stopped.stderr).toBe(0)
    expect(processAlive(first.pid)).toBe(false)

    const refused = runHubCli(hubHome, "--hub", "work", "prompt", agentId, "echo hello", "--wait")
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain("force-stopped")
    expect(runHubCli(hubHome, "daemons", "--json").stdout).toContain(`"state": "stopped"`)

    const resumed = runHubCli(hubHome, "daemons", "resume", "work")
    expect(resumed.status, resumed.stderr).toBe(0)
    const answered = runHubCli(hubHome, "--hub", "work", "prompt", agentId, "echo hello", "--wait")
    expect(answered.status, answered.stderr).toBe(0)
    expect(answered.stdout).toContain("hello")
    const second = daemonRecord(dir)!
    expect(second.pid).not.toBe(first.pid)

    // The identity the operator saw before is gone: an action on it stops nothing.
    const stale = await fetch(`http://127.0.0.1:${hub.port}/v1/daemons/work/stop`, {
      method: "POST",
      headers: { authorization: `Bearer ${hub.token}`, "content-type": "application/json" },
      body: JSON.stringify({ identity: { pid: first.pid, startTime: first.startTime, instanceId: first.instanceId }, confirm: `work:${first.pid}` })
    })
    expect(stale.status).toBe(409)
    expect(processAlive(second.pid)).toBe(true)

    // Prompts racing a stop: each ran before it or is refused as stopped; no replacement starts.
    const starts = daemonStarts(hubHome)
    const identity = { pid: second.pid, startTime: second.startTime, instanceId: second.instanceId }
    const [stopAnswer, ...racing] = await Promise.all([
      hubApi(hub, "POST", "/v1/daemons/work/stop", { identity, confirm: `work:${second.pid}` }),
      ...Array.from({ length: 8 }, (_, n) =>
        new Promise((resolve) => setTimeout(resolve, n * 150)).then(() =>
          promptVia(hub, agentId, { text: `echo race-${n}`, wait: true, clientMessageId: `race-${n}` })))
    ])
    expect(stopAnswer.status, JSON.stringify(stopAnswer.body)).toBe(200)
    for (const answer of racing) {
      expect(answer.body.state === "completed" || answer.body._tag === "HomeStopped", JSON.stringify(answer.body)).toBe(true)
    }
    expect(racing.some((answer) => answer.body._tag === "HomeStopped")).toBe(true)
    expect(daemonRecord(dir)).toBeUndefined()
    expect(daemonStarts(hubHome)).toBe(starts)
  }, 90_000)

  it("a hub SIGKILLed leaves its daemons serving; a new hub adopts them", async () => {
    const { dir, hubHome, root } = setUp()
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    const daemon = daemonRecord(dir)!
    process.kill(-hub.process.pid!, "SIGKILL")
    await until(() => !processAlive(hub.process.pid!), "the hub is gone")
    expect(processAlive(daemon.pid)).toBe(true)

    const again = await startHub(hubHome)
    expect(await inventoryRow(again, "work")).toMatchObject({ state: "running", pid: daemon.pid, instanceId: daemon.instanceId })
    const answered = await promptVia(again, agentId, { text: "echo adopted", wait: true })
    expect(answered.body).toMatchObject({ state: "completed", output: "adopted\n", resumed: false })
    expect(daemonRecord(dir)!.pid).toBe(daemon.pid)
    expect(daemonStarts(hubHome)).toBe(1)
  }, 60_000)

  it("a hub whose terminal closes (SIGHUP) stops in order, removing its address; its daemons keep serving", async () => {
    const { dir, hubHome, root } = setUp()
    const hub = await startHub(hubHome)
    await createAgent(hub, root)
    const daemon = daemonRecord(dir)!
    expect(existsSync(join(hubHome, "hub.address.json"))).toBe(true)
    hub.process.kill("SIGHUP")
    const code = await new Promise<number | null>((resolve) =>
      hub.process.exitCode !== null ? resolve(hub.process.exitCode) : hub.process.once("exit", (exit) => resolve(exit)))
    expect(code).toBe(0)
    expect(hub.process.signalCode).toBeNull()
    expect(existsSync(join(hubHome, "hub.address.json"))).toBe(false)
    expect(existsSync(join(hubHome, "hub.lock"))).toBe(false)
    expect(processAlive(daemon.pid)).toBe(true)
  }, 60_000)

  it("two hubs managing one home start one daemon between them (the home lock); every prompt runs once", async () => {
    const { dir, hubHome, root } = setUp("0s")
    const otherHome = join(root, "other-hub")
    writeHubConfig(otherHome, [{ name: "work", dir }], "0s")
    const [one, two] = await Promise.all([startHub(hubHome), startHub(otherHome)])
    const agentId = await createAgent(one, root)
    const row = await inventoryRow(one, "work")
    expect((await hubApi(one, "POST", "/v1/daemons/work/retire", { pid: row.pid, startTime: row.startTime, instanceId: row.instanceId })).status).toBe(202)
    await until(() => !processAlive(row.pid), "the retired daemon exits")

    const answers = await Promise.all(Array.from({ length: 10 }, (_, n) =>
      promptVia(n % 2 === 0 ? one : two, agentId, { text: `echo ${n} >> runs.log; echo out-${n}`, wait: true, clientMessageId: `two-${n}` })))
    for (const [n, answer] of answers.entries()) {
      expect(answer.body, JSON.stringify(answer.body)).toMatchObject({ state: "completed", output: `out-${n}\n` })
    }
    expect(linesOf(join(root, "runs.log")).map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, n) => n))
    const serving = daemonRecord(dir)!
    expect((await inventoryRow(one, "work")).pid).toBe(serving.pid)
    expect((await inventoryRow(two, "work")).pid).toBe(serving.pid)
    const ready = [hubHome, otherHome].map((home) =>
      linesOf(join(home, "logs", "work.log")).filter((l) => l.includes("Quiesce ready")).length)
    // The first daemon (started by the first hub) and exactly one replacement, by either hub.
    expect(ready[0]! + ready[1]!).toBe(2)
  }, 120_000)

  it("an archived home keeps its data readable and refuses new work; hub add, list and archive edit hub.json", async () => {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    const dir = join(root, "work")
    expect(runHubCli(hubHome, "hub", "add", "work", dir).status).toBe(0)
    expect(runHubCli(hubHome, "hub", "add", "work", dir).stderr).toContain("already has a home named")
    expect(runHubCli(hubHome, "hub", "add", "bad name", dir).stderr).toContain("name")
    writeHubConfig(hubHome, [{ name: "work", dir }])
    const hub = await startHub(hubHome)
    const agentId = await createAgent(hub, root)
    daemonRecord(dir)
    expect(runHubCli(hubHome, "hub", "archive", "work").status).toBe(0)
    expect(runHubCli(hubHome, "hub", "list").stdout).toMatch(/work .*\(archived\)/)
    expect(JSON.parse(runHubCli(hubHome, "hub", "list", "--json").stdout)).toEqual({
      daemonIdleTimeout: { value: "1h", source: "default" },
      homes: [{ name: "work", dir, archived: true }]
    })
    const refused = await promptVia(hub, agentId, { text: "echo no", wait: true })
    expect(refused.status).toBe(409)
    expect(refused.body._tag).toBe("HomeArchived")
    const read = await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)
    expect(read.status).toBe(200)
    expect(await inventoryRow(hub, "work")).toMatchObject({ archived: true, canRetire: false, state: "running" })
    expect(runHubCli(hubHome, "hub", "unarchive", "work").status).toBe(0)
    expect((await promptVia(hub, agentId, { text: "echo yes", wait: true })).body).toMatchObject({ state: "completed" })
    expect(runHubCli(hubHome, "hub", "remove", "work").status).toBe(0)
    expect((await hubApi(hub, "GET", "/v1/homes/work/agents")).body._tag).toBe("HomeNotManaged")
  }, 60_000)

  it("a bad hub.json stops the hub before it listens, naming the path; a second hub on one hub home is refused", async () => {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    mkdirSync(hubHome, { recursive: true })
    writeFileSync(join(hubHome, "hub.json"), JSON.stringify({ daemonIdleTimeout: "-5m", homes: [] }))
    await expect(startHub(hubHome)).rejects.toThrow(/daemonIdleTimeout/)
    expect(existsSync(join(hubHome, "hub.address.json"))).toBe(false)
    writeFileSync(join(hubHome, "hub.json"), JSON.stringify({ homes: [{ name: "a", dir: "relative" }] }))
    await expect(startHub(hubHome)).rejects.toThrow(/absolute/)
    writeFileSync(join(hubHome, "hub.json"), JSON.stringify({ homes: [], extra: true }))
    await expect(startHub(hubHome)).rejects.toThrow(/extra/)
    writeFileSync(join(hubHome, "hub.json"), JSON.stringify({ homes: [] }))
    const hub = await startHub(hubHome)
    await expect(startHub(hubHome)).rejects.toThrow(/in use by another Quiesce hub/)
    expect((await hubApi(hub, "GET", "/v1/daemons")).status).toBe(200)
    const unauthorized = await fetch(`http://127.0.0.1:${hub.port}/v1/homes/work/agents`)
    expect(unauthorized.status).toBe(401)
    expect((await fetch(`http://127.0.0.1:${hub.port}/v1/daemons`)).status).toBe(401)
  }, 60_000)
})
