/**
 * Exactly once, tried from outside: a real daemon, the reference shell provider, many concurrent
 * callers, duplicated and aborted-then-retried client message ids. Every command appends its
 * number to a file, so "ran once" is counted, not assumed.
 */
import { afterEach, describe, expect, it } from "vitest"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import {
  api,
  cleanUpDaemons,
  createShellAgent,
  type Daemon,
  freePort,
  groupAlive,
  newHome,
  prompt,
  ready,
  startDaemon
} from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

/** How many times each number was written to the run log. */
const runs = (daemon: Daemon, log: string): Map<number, number> => {
  const path = join(daemon.home, log)
  const counts = new Map<number, number>()
  if (!existsSync(path)) return counts
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line === "") continue
    counts.set(Number(line), (counts.get(Number(line)) ?? 0) + 1)
  }
  return counts
}

/** A command that records that it ran, then answers with its own number. */
const command = (log: string, n: number) => `echo ${n} >> ${log}; echo out-${n}`

const collect = (daemon: Daemon, agentId: string) => api(daemon, "POST", `/v1/runtimes/${agentId}/collect`)

const concurrentPrompts = async (daemon: Daemon, agentId: string, count: number) => {
  const log = `runs-${agentId}.log`
  const answers = await Promise.all(
    Array.from({ length: count }, (_, n) => prompt(daemon, agentId, { text: command(log, n), wait: true }))
  )
  for (const [n, answer] of answers.entries()) {
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    expect(answer.body).toMatchObject({ state: "completed", output: `out-${n}\n` })
  }
  expect(new Set(answers.map((answer) => answer.body.turnId)).size).toBe(count)
  const counted = runs(daemon, log)
  expect([...counted.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: count }, (_, n) => n))
  expect([...counted.values()].every((times) => times === 1)).toBe(true)
  // Nothing keeps the runtime: it can be released.
  expect((await collect(daemon, agentId)).body).toMatchObject({ outcome: "collected" })
}

describe("exactly once, with real processes", () => {
  for (const count of [20, 100]) {
    it(`${count} concurrent waiting prompts to a resident agent: each answered with its own output, each run once`, async () => {
      const daemon = startDaemon(newHome(), await freePort())
      await ready(daemon)
      const agentId = await createShellAgent(daemon)
      await concurrentPrompts(daemon, agentId, count)
    }, 120_000)

    it(`${count} concurrent waiting prompts to a released agent: one resume, each answered and run once`, async () => {
      const daemon = startDaemon(newHome(), await freePort())
      await ready(daemon)
      const agentId = await createShellAgent(daemon)
      await prompt(daemon, agentId, { text: "true", wait: true })
      const { pid } = (await api(daemon, "GET", `/v1/agents/${agentId}`)).body
      expect((await collect(daemon, agentId)).body).toMatchObject({ outcome: "collected" })
      expect(groupAlive(pid)).toBe(false)
      await concurrentPrompts(daemon, agentId, count)
      expect(daemon.output().match(/Resumed agent runtime/g)?.length).toBe(1)
    }, 120_000)
  }

  it("duplicated and aborted-then-retried client message ids: one turn per id, run once, every retry gets it", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const log = "runs-ids.log"
    const ids = Array.from({ length: 20 }, (_, n) => n)
    // Every third id: its first caller gives up almost at once.
    const aborted = await Promise.all(ids.filter((n) => n % 3 === 0).map(async (n) => {
      const controller = new AbortController()
      const sent = prompt(daemon, agentId, { text: command(log, n), wait: true, clientMessageId: `id-${n}` }, controller.signal)
      setTimeout(() => controller.abort(), 5)
      return sent.then(() => "answered", () => "aborted")
    }))
    expect(aborted.length).toBeGreaterThan(0)
    // Then two concurrent callers for every id (the aborted ones included).
    const answers = await Promise.all(ids.flatMap((n) => [0, 1].map(() =>
      prompt(daemon, agentId, { text: command(log, n), wait: true, clientMessageId: `id-${n}` })
    )))
    for (const [i, answer] of answers.entries()) {
      const n = ids[Math.floor(i / 2)]!
      expect(answer.status, JSON.stringify(answer.body)).toBe(200)
      expect(answer.body).toMatchObject({ state: "completed", output: `out-${n}\n` })
    }
    for (const n of ids) expect(answers[2 * n]!.body.turnId).toBe(answers[2 * n + 1]!.body.turnId)
    // A retry after the end is the same turn, read back from the journal.
    const late = await prompt(daemon, agentId, { text: command(log, 0), wait: true, clientMessageId: "id-0" })
    expect(late.body.turnId).toBe(answers[0]!.body.turnId)
    const counted = runs(daemon, log)
    expect(ids.map((n) => counted.get(n))).toEqual(ids.map(() => 1))
    expect((await collect(daemon, agentId)).body).toMatchObject({ outcome: "collected" })
  }, 120_000)
})
