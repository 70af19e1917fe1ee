/**
 * An agent's live events as users meet them: a real daemon, the reference shell agent, real HTTP
 * (server-sent events read with fetch), the CLI. Time is real, so every wait polls with a bound.
 */
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import {
  api,
  cleanUpDaemons,
  createShellAgent,
  exited,
  freePort,
  newHome,
  prompt,
  ready,
  startDaemon,
  until
} from "../support/daemonProcess.ts"
import { endedTurn, followEvents as follow, followEventsAt as followPath } from "../support/eventReader.ts"

afterEach(cleanUpDaemons)

const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")

const rssBytes = (pid: number): number => {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return Number(match?.[1] ?? 0) * 1024
}

describe("live events with real processes", () => {
  it("shows a turn's output line by line before it ends; a reconnect with Last-Event-ID misses nothing", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const reader = follow(daemon, agentId)
    await reader.connected()
    expect(reader.status()).toBe(200)
    expect(reader.contentType()).toContain("text/event-stream")

    const sent = await prompt(daemon, agentId, { text: "for i in 1 2 3 4 5; do echo $i; sleep 1; done" })
    const turnId: string = sent.body.turnId
    await until(() => endedTurn(reader.seen, turnId) !== undefined, "the turn's end is streamed", 20_000)
    const ended = endedTurn(reader.seen, turnId)!
    expect(ended.event).toMatchObject({ state: "completed", reply: "1\n2\n3\n4\n5\n", error: null })
    const tags = reader.seen.map((e) => e.event._tag)
    expect(tags.indexOf("turn-accepted")).toBeLessThan(tags.indexOf("turn-running"))
    const outputs = reader.seen.filter((e) => e.event._tag === "output")
    expect(outputs.map((e) => e.event._tag === "output" ? e.event.text : "").join("")).toBe("1\n2\n3\n4\n5\n")
    // Line by line as it came: the first line arrived seconds before the turn ended, in several events.
    expect(outputs.length).toBeGreaterThanOrEqual(4)
    expect(ended.at - outputs[0]!.at).toBeGreaterThan(2_500)
    // Ids are `<epoch>-<n>`: one epoch for the daemon, n increasing.
    const [epoch] = reader.seen[0]!.id.split("-")
    const numbers = reader.seen.map((e) => {
      const [idEpoch, n] = e.id.split("-")
      expect(idEpoch).toBe(epoch)
      return Number(n)
    })
    for (let i = 1; i < numbers.length; i++) expect(numbers[i]).toBeGreaterThan(numbers[i - 1]!)

    // Reconnect after the second event: the rest, exactly, without a gap.
    const again = follow(daemon, agentId, reader.seen[1]!.id)
    await until(() => again.seen.length >= reader.seen.length - 2, "the reconnect reads the rest")
    expect(again.seen.map((e) => e.id)).toEqual(reader.seen.slice(2).map((e) => e.id))
    reader.close()
    again.close()

    const unknown = await api(daemon, "GET", "/v1/agents/agent-nope/events")
    expect(unknown.status).toBe(404)
    expect(unknown.contentType).toContain("application/problem+json")
    expect(unknown.body._tag).toBe("AgentNotFound")
  }, 60_000)

  it("the daemon-wide stream has every agent's events, each naming its agent; it resumes with Last-Event-ID and does not keep the daemon", async () => {
    const daemon = startDaemon(newHome(), await freePort(), ["--daemon-idle-timeout", "4s"])
    await ready(daemon)
    const first = await createShellAgent(daemon)
    const second = await createShellAgent(daemon)
    const reader = followPath(daemon, "/v1/events")
    await reader.connected()
    expect(reader.status()).toBe(200)
    expect(reader.contentType()).toContain("text/event-stream")
    const one = await prompt(daemon, first, { text: "echo one" })
    const two = await prompt(daemon, second, { text: "echo two" })
    await until(
      () => endedTurn(reader.seen, one.body.turnId) !== undefined && endedTurn(reader.seen, two.body.turnId) !== undefined,
      "both agents' turns end on the daemon-wide stream",
      20_000
    )
    expect(endedTurn(reader.seen, one.body.turnId)!.agentId).toBe(first)
    expect(endedTurn(reader.seen, two.body.turnId)!.agentId).toBe(second)
    expect(reader.seen.every((e) => e.agentId === first || e.agentId === second)).toBe(true)
    // Ids are `<epoch>-<n>`: one epoch, numbers increasing.
    const numberOf = (id: string) => Number(id.slice(id.lastIndexOf("-") + 1))
    for (let i = 1; i < reader.seen.length; i++) expect(numberOf(reader.seen[i]!.id)).toBeGreaterThan(numberOf(reader.seen[i - 1]!.id))

    const again = followPath(daemon, "/v1/events", reader.seen[1]!.id)
    await until(() => again.seen.length >= reader.seen.length - 2, "the reconnect reads the rest")
    expect(again.seen.map((e) => e.id)).toEqual(reader.seen.slice(2).map((e) => e.id))
    again.close()

    // Reading is not activity: with the reader still connected, the daemon retires on its timer and the stream ends.
    expect(await exited(daemon.process)).toBe(75)
    await until(() => reader.ended(), "the reader's stream ends with the daemon")
  }, 60_000)

  it("100 concurrent readers of one agent cost bounded memory, and each reads the whole turn", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    await prompt(daemon, agentId, { text: "true", wait: true })
    const before = rssBytes(daemon.process.pid!)
    const readers = Array.from({ length: 100 }, () => follow(daemon, agentId))
    await Promise.all(readers.map((r) => r.connected()))
    const sent = await prompt(daemon, agentId, { text: "seq 1 20000" })
    const turnId: string = sent.body.turnId
    await until(() => readers.every((r) => endedTurn(r.seen, turnId) !== undefined), "every reader reads the turn's end", 30_000)
    const after = rssBytes(daemon.process.pid!)
    for (const r of readers) {
      const text = r.seen.flatMap((e) => e.event._tag === "output" ? [e.event.text] : []).join("")
      expect(text.split("\n").length).toBe(20_001)
    }
    // Generous: the window is at most 1 MiB per agent; readers keep only a position.
    expect(after - before).toBeLessThan(80 * 1024 * 1024)
    for (const r of readers) r.close()
  }, 60_000)

  it("a reader connected longer than the idle timeout does not keep the daemon from retiring; its stream ends", async () => {
    const daemon = startDaemon(newHome(), await freePort(), ["--daemon-idle-timeout", "3s"])
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const reader = follow(daemon, agentId)
    await reader.connected()
    expect(await exited(daemon.process)).toBe(75)
    await until(() => reader.ended(), "the reader's stream ends with the daemon")
    // Ended in order when the shutdown began, not cut when the listener gave up waiting for it.
    expect(reader.failure()).toBeUndefined()
  }, 60_000)

  it("prompt --follow streams the turn and exits with its outcome; watch prints each event; Ctrl-C stops following, not the turn", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)

    const run = (...args: Array<string>) => {
      const child = spawn(process.execPath, [cli, "--home", daemon.home, ...args], { stdio: ["ignore", "pipe", "pipe"], detached: true })
      const chunks: Array<{ readonly text: string; readonly at: number }> = []
      let stderr = ""
      child.stdout.on("data", (chunk) => chunks.push({ text: String(chunk), at: Date.now() }))
      child.stderr.on("data", (chunk) => (stderr += String(chunk)))
      return { child, chunks, stdout: () => chunks.map((c) => c.text).join(""), stderr: () => stderr }
    }

    const watcher = run("watch", agentId, "--json")
    const ends = () => watcher.stdout().split("\n").filter((l) => l.includes("\"turn-ended\"")).length
    // Following once it sees a turn (the CLI takes a moment to start).
    await until(async () => {
      await prompt(daemon, agentId, { text: "true", wait: true })
      return ends() > 0
    }, "watch follows the agent", 30_000)
    const endsBefore = ends()
    const followed = run("prompt", agentId, "--follow", "for i in 1 2 3; do echo line $i; sleep 1; done")
    expect(await exited(followed.child)).toBe(0)
    expect(followed.stdout()).toBe("line 1\nline 2\nline 3\n")
    expect(followed.chunks.at(-1)!.at - followed.chunks[0]!.at).toBeGreaterThan(1_500)

    const failed = run("prompt", agentId, "--follow", "echo partial; exit 3")
    expect(await exited(failed.child)).toBe(1)
    expect(failed.stdout()).toBe("partial\n")
    expect(failed.stderr()).toContain("failed")

    await until(() => ends() >= endsBefore + 2, "watch prints both turns' ends")
    const events = watcher.stdout().trim().split("\n").map((line) => JSON.parse(line))
    expect(events.map((e) => e.event._tag)).toContain("output")
    process.kill(-watcher.child.pid!, "SIGINT")
    await exited(watcher.child)

    // Ctrl-C while following: the turn runs on.
    const interrupted = run("prompt", agentId, "--follow", "sleep 2; echo done")
    // Once its turn runs (a CLI that starts slowly under load has not sent it yet after a fixed pause).
    await until(async () => {
      const turns = await api(daemon, "GET", `/v1/agents/${agentId}/turns`)
      return turns.body.some((turn: { text: string; state: string }) => turn.text === "sleep 2; echo done" && turn.state === "running")
    }, "the followed turn runs", 15_000)
    process.kill(-interrupted.child.pid!, "SIGINT")
    await exited(interrupted.child)
    await until(async () => {
      const turns = await api(daemon, "GET", `/v1/agents/${agentId}/turns`)
      return JSON.stringify(turns.body).includes("done\\n")
    }, "the turn ran to its end", 15_000)
  }, 90_000)
})
