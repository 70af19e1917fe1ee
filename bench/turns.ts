/**
 * Turns through the durable journal: how long a prompt takes to be accepted (journaled, marked
 * running, handed to the provider) on a real SQLite file, how many waiting prompts per second the
 * registry carries over 50 agents, and the same shape through a real daemon process with the
 * reference shell provider over HTTP. Every answer is checked; failures are counted, not timed.
 */
import { ActivityClock } from "../src/services/ActivityClock.ts"
import { Context, Deferred, Effect, Exit, Layer, Predicate, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { MemoryProvider, providerRegistryWith } from "../src/testing/MemoryProvider.ts"
import * as AgentRegistryLive from "../src/layers/registry/AgentRegistryLive.ts"
import * as SqliteDatabase from "../src/layers/store/SqliteDatabase.ts"
import { AgentRegistry } from "../src/services/AgentRegistry.ts"
import { createShellAgent, freePort, groupAlive, ready, startDaemon, until } from "../test/support/daemonProcess.ts"
import { type BenchRow, run } from "./table.ts"

/** Nearest-rank percentile (`q` in 0..1) of the samples. */
const percentile = (samples: ReadonlyArray<number>, q: number): number => {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN
}

const ms = (value: number) => `${value.toFixed(value < 10 ? 3 : 1)} ms`
const spread = (samples: ReadonlyArray<number>) => `p50 ${ms(percentile(samples, 0.5))}, p99 ${ms(percentile(samples, 0.99))}`
const failed = (failures: number) => (failures === 0 ? "0 failed" : `${failures} FAILED`)

const synchronousNames = ["OFF", "NORMAL", "FULL", "EXTRA"]

/**
 * The durability settings of the journal's file. `synchronous` is per connection, and the project's
 * client sets none (only busy_timeout, foreign_keys and journal_mode=WAL), so a second connection on
 * the same WAL file reads the value the journal's connection runs with: node:sqlite's built-in
 * default for WAL databases.
 */
const durability = (file: string): string => {
  const db = new DatabaseSync(file, { readOnly: true })
  try {
    const synchronous = db.prepare("PRAGMA synchronous").get()?.["synchronous"]
    const mode = db.prepare("PRAGMA journal_mode").get()?.["journal_mode"]
    const name = typeof synchronous === "number" ? synchronousNames[synchronous] ?? "?" : "?"
    return `synchronous = ${name} (${String(synchronous)}), journal_mode = ${String(mode)}`
  } finally {
    db.close()
  }
}

/** The registry over one SQLite state file (in a temp dir, removed afterwards) and the in-memory provider. */
const withJournal = async <A>(
  use: (env: { readonly registry: AgentRegistry["Service"]; readonly provider: MemoryProvider; readonly file: string }) => Promise<A>,
  configure: (provider: MemoryProvider) => void = () => {},
  /** With the daemon idle timer's bookkeeping (every activity noted), as a daemon runs the registry. */
  idleTimer = false
): Promise<A> => {
  const dir = mkdtempSync(join(tmpdir(), "quiesce-bench-turns-"))
  const file = join(dir, "state.db")
  const provider = new MemoryProvider("bench")
  configure(provider)
  const layer = AgentRegistryLive.layer.pipe(
    Layer.provide([SqliteDatabase.layerStores(file), providerRegistryWith(provider), idleTimer ? ActivityClock.layer : Layer.empty])
  )
  const scope = Effect.runSync(Scope.make())
  try {
    const context = await run(Layer.buildWithScope(layer, scope))
    return await use({ registry: Context.get(context, AgentRegistry), provider, file })
  } finally {
    // Turns are never left gated here: the registry's shutdown waits for the ones a provider runs.
    provider.turnGate = undefined
    await run(Scope.close(scope, Exit.void))
    rmSync(dir, { recursive: true, force: true })
  }
}

const createAgents = (registry: AgentRegistry["Service"], count: number) =>
  Effect.forEach(Array.from({ length: count }), () => registry.create({ provider: "bench", cwd: "/bench" })).pipe(
    Effect.map((records) => records.map((record) => record.agentId))
  )

/**
 * Acceptance of a no-wait prompt with a client message id: the journal's accept transaction, its
 * `running` write, and the provider taking the turn. Each prompt goes to an idle resident agent
 * whose turn then stays open (gated), so nothing else writes to the journal while one is timed: a
 * turn that ended at once would record its end concurrently with the next acceptance, and a second
 * prompt to a busy agent would be steered rather than started. 100 agents, one prompt each per
 * round; between rounds (untimed) the gate opens and every turn ends.
 */
/** Times `rounds` of no-wait prompts to idle agents, then repeats of their ids; every answer checked. */
const acceptanceRun = (agents: number, rounds: number, warmupRounds: number, idleTimer = false) =>
  withJournal(async ({ registry, provider, file }) => {
    const ids = await run(createAgents(registry, agents))
    const accepted: Array<number> = []
    const repeated: Array<number> = []
    const turnOf = new Map<string, { readonly agentId: string; readonly turnId: string }>()
    let acceptFailures = 0
    let repeatFailures = 0
    const round = (r: number, timed: boolean) =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        provider.turnGate = Deferred.await(gate)
        for (const agentId of ids) {
          const clientMessageId = `round-${r}-${agentId}`
          const start = performance.now()
          const exit = yield* Effect.exit(registry.prompt(agentId, `prompt ${r}`, { clientMessageId }))
          const elapsed = performance.now() - start
          if (!timed) continue
          if (Exit.isFailure(exit) || exit.value.state !== "running" || exit.value.disposition !== "turn") {
            acceptFailures++
            continue
          }
          accepted.push(elapsed)
          turnOf.set(clientMessageId, { agentId, turnId: exit.value.turnId })
        }
        yield* Deferred.succeed(gate, undefined)
        yield* Effect.forEach(ids, registry.awaitIdle, { discard: true })
      })
    await run(Effect.gen(function*() {
      for (let r = 0; r < warmupRounds; r++) yield* round(r, false)
      globalThis.gc?.()
      for (let r = warmupRounds; r < warmupRounds + rounds; r++) yield* round(r, true)
      // Every timed turn has ended, so a repeat of its id is answered from the journal (a lookup).
      globalThis.gc?.()
      for (const [clientMessageId, { agentId, turnId }] of turnOf) {
        const start = performance.now()
        const exit = yield* Effect.exit(registry.prompt(agentId, "again", { clientMessageId }))
        const elapsed = performance.now() - start
        if (Exit.isFailure(exit) || exit.value.turnId !== turnId || exit.value.state !== "completed") repeatFailures++
        else repeated.push(elapsed)
      }
    }))
    return {
      accepted,
      repeated,
      acceptFailures,
      repeatFailures,
      delivered: provider.deliveries.length,
      expected: agents * (rounds + warmupRounds),
      durability: durability(file)
    }
  }, () => {}, idleTimer)

const acceptance = async (agents: number, rounds: number, warmupRounds: number) => {
  const { accepted, acceptFailures, delivered, durability: journal, expected, repeated, repeatFailures } = await acceptanceRun(
    agents,
    rounds,
    warmupRounds
  )
  const p50 = percentile(accepted, 0.5)
  const total = agents * rounds
  return [
    {
      name: `prompt acceptance, SQLite journal, idle agent, no wait (${total.toLocaleString("en")} prompts)`,
      value: `${spread(accepted)}, ${failed(acceptFailures)}${delivered === expected ? "" : `, ${delivered}/${expected} DELIVERED`}`,
      target: "p50 < 2 ms",
      ok: p50 < 2 && acceptFailures === 0 && delivered === expected
    },
    {
      name: `repeat of an ended prompt's client message id (answered from the journal)`,
      value: `${spread(repeated)}, ${failed(repeatFailures)}`,
      target: "",
      ok: repeatFailures > 0 ? false : undefined
    },
    { name: "journal durability (PRAGMA on its file)", value: journal, target: "", ok: undefined }
  ] satisfies ReadonlyArray<BenchRow>
}

/**
 * What the daemon idle timer's bookkeeping (every activity noted) costs a prompt: acceptance p50
 * with and without it, runs interleaved so that the disk's drift falls on both.
 */
const idleTimerCost = async (agents: number, rounds: number): Promise<BenchRow> => {
  const without: Array<number> = []
  const withTimer: Array<number> = []
  let failures = 0
  for (let i = 0; i < 3; i++) {
    for (const timer of [false, true]) {
      const result = await acceptanceRun(agents, rounds, 1, timer)
      failures += result.acceptFailures
      ;(timer ? withTimer : without).push(...result.accepted)
    }
  }
  const a = percentile(without, 0.5)
  const b = percentile(withTimer, 0.5)
  const change = b - a
  return {
    name: "idle timer bookkeeping on the prompt path: acceptance p50 with the timer vs without",
    value: `${ms(b)} vs ${ms(a)} (${change >= 0 ? "+" : ""}${ms(change)}), ${failed(failures)}`,
    // One-sided: the timer being faster is noise, not a cost.
    target: "no measurable cost (at most +0.1 ms or +15%)",
    ok: failures === 0 && (change <= 0.1 || change <= 0.15 * a)
  }
}

interface Throughput {
  readonly wallMs: number
  readonly latencies: ReadonlyArray<number>
  readonly failures: number
  /** The first few failures, for the report. */
  readonly problems: ReadonlyArray<string>
}

const throughputRow = (name: string, prompts: number, result: Throughput, extra = ""): BenchRow => ({
  name,
  value: `${(result.wallMs / 1000).toFixed(2)} s, ${Math.round(prompts / (result.wallMs / 1000))} prompts/s, ${
    spread(result.latencies)
  }, ${failed(result.failures)}${extra}${result.problems.length > 0 ? ` (${result.problems.join("; ")})` : ""}`,
  target: "",
  ok: result.failures > 0 ? false : undefined
})

/**
 * `perAgent` concurrent waiting prompts to each of `agents` resident agents through the registry on
 * the SQLite journal. Turns end at once; the provider does not steer (as the shell provider does
 * not), so every prompt is a turn of its own, queued behind its agent's running one.
 */
const registryThroughput = (agents: number, perAgent: number) =>
  withJournal(async ({ registry, provider }) => {
    const ids = await run(createAgents(registry, agents))
    // One untimed turn per agent first.
    await run(Effect.forEach(ids, (agentId) => registry.prompt(agentId, "warm", { wait: true }), { discard: true }))
    const before = provider.deliveries.length
    const jobs = ids.flatMap((agentId) => Array.from({ length: perAgent }, (_, n) => ({ agentId, text: `prompt ${n}` })))
    const latencies: Array<number> = []
    const problems: Array<string> = []
    let failures = 0
    globalThis.gc?.()
    const start = performance.now()
    await run(Effect.forEach(jobs, ({ agentId, text }) =>
      Effect.gen(function*() {
        const sent = performance.now()
        const exit = yield* Effect.exit(registry.prompt(agentId, text, { wait: true }))
        latencies.push(performance.now() - sent)
        if (Exit.isSuccess(exit) && exit.value.state === "completed") return
        failures++
        if (problems.length < 3) problems.push(Exit.isSuccess(exit) ? `state ${exit.value.state}` : "prompt failed")
      }), { concurrency: "unbounded", discard: true }))
    const wallMs = performance.now() - start
    const turns = provider.deliveries.slice(before).filter((delivery) => delivery.via === "turn").length
    const result = { wallMs, latencies, failures, problems }
    return throughputRow(
      `${jobs.length.toLocaleString("en")} concurrent waiting prompts, ${agents} agents x ${perAgent}, registry + SQLite journal`,
      jobs.length,
      turns === jobs.length ? result : { ...result, failures: failures + Math.abs(jobs.length - turns) },
      turns === jobs.length ? "" : `, ${turns} TURNS for ${jobs.length} prompts`
    )
  }, (provider) => {
    provider.steers = false
  })

/** The state of a prompt answer from the HTTP API, or why it is not one. */
const answerState = (status: number, body: unknown): string =>
  status !== 200
    ? `HTTP ${status}${Predicate.hasProperty(body, "_tag") ? ` ${String(body._tag)}` : ""}`
    : Predicate.hasProperty(body, "state") && typeof body.state === "string"
    ? body.state
    : "no state"

/**
 * The same shape through a real daemon process (its own temp home, a free loopback port) with the
 * reference shell provider: each prompt `true` runs `sh -c true` in its agent's shell runtime. The
 * daemon is stopped with SIGTERM; the bench waits until its process group and every runtime's
 * (they run in groups of their own) are gone, and kills only those if they outstay the bound.
 */
const daemonThroughput = async (agents: number, perAgent: number): Promise<BenchRow> => {
  const home = mkdtempSync(join(tmpdir(), "quiesce-bench-daemon-"))
  const daemon = startDaemon(home, await freePort())
  const runtimeGroups: Array<number> = []
  let leftovers = 0
  let stopMs = Number.NaN
  let row: BenchRow
  try {
    await ready(daemon)
    const token = daemon.token()
    const post = async (route: string, body: unknown) => {
      const response = await fetch(`http://127.0.0.1:${daemon.port}${route}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      const text = await response.text()
      const parsed: unknown = text === "" ? undefined : JSON.parse(text)
      return { status: response.status, body: parsed }
    }
    // Runtimes start (a plugin process each) a few at a time, then each runs one untimed turn.
    const ids: Array<string> = []
    while (ids.length < agents) {
      ids.push(...await Promise.all(Array.from({ length: Math.min(10, agents - ids.length) }, () => createShellAgent(daemon))))
    }
    for (const agentId of ids) {
      const warm = await post(`/v1/agents/${agentId}/prompts`, { text: "true", wait: true })
      if (answerState(warm.status, warm.body) !== "completed") throw new Error(`warm-up prompt: ${JSON.stringify(warm.body)}`)
    }
    const listed = await fetch(`http://127.0.0.1:${daemon.port}/v1/agents`, { headers: { authorization: `Bearer ${token}` } })
    const views: unknown = await listed.json()
    if (Array.isArray(views)) {
      for (const view of views) {
        if (Predicate.hasProperty(view, "pid") && typeof view.pid === "number") runtimeGroups.push(view.pid)
      }
    }
    const latencies: Array<number> = []
    const problems = new Map<string, number>()
    let failures = 0
    const start = performance.now()
    await Promise.all(ids.flatMap((agentId) =>
      Array.from({ length: perAgent }, async () => {
        const sent = performance.now()
        const state = await post(`/v1/agents/${agentId}/prompts`, { text: "true", wait: true }).then(
          (answer) => answerState(answer.status, answer.body),
          (error: unknown) => `fetch: ${error instanceof Error ? error.message : String(error)}`
        )
        latencies.push(performance.now() - sent)
        if (state === "completed") return
        failures++
        problems.set(state, (problems.get(state) ?? 0) + 1)
      })
    ))
    const wallMs = performance.now() - start
    const result = {
      wallMs,
      latencies,
      failures,
      problems: [...problems].slice(0, 3).map(([state, count]) => `${count} x ${state}`)
    }
    row = throughputRow(
      `${(agents * perAgent).toLocaleString("en")} concurrent waiting prompts, ${agents} agents x ${perAgent}, real daemon + shell over HTTP`,
      agents * perAgent,
      result,
      runtimeGroups.length === agents ? "" : `, ${runtimeGroups.length}/${agents} runtimes listed`
    )
  } finally {
    const pid = daemon.process.pid
    if (pid !== undefined && groupAlive(pid)) {
      const stopping = performance.now()
      process.kill(-pid, "SIGTERM")
      await until(() => !groupAlive(pid), "the daemon stops on SIGTERM", 20_000).catch(() => {
        leftovers++
        if (groupAlive(pid)) process.kill(-pid, "SIGKILL")
      })
      stopMs = performance.now() - stopping
    }
    // A clean shutdown ends every runtime; one still there is a leftover of this daemon.
    for (const group of runtimeGroups) {
      await until(() => !groupAlive(group), "a runtime ends with its daemon", 5_000).catch(() => {
        leftovers++
        if (groupAlive(group)) process.kill(-group, "SIGKILL")
      })
    }
    rmSync(home, { recursive: true, force: true })
  }
  // Stop time is to within the 100 ms poll of the process group.
  const stopped = `, SIGTERM to gone ${(stopMs / 1000).toFixed(1)} s`
  return leftovers === 0
    ? { ...row, value: row.value + stopped }
    : { ...row, value: `${row.value}${stopped}, ${leftovers} GROUP(S) OUTLIVED SIGTERM (killed)`, ok: false }
}

export const turnsBench = async (): Promise<ReadonlyArray<BenchRow>> => [
  ...await acceptance(100, 20, 2),
  await idleTimerCost(100, 5),
  await registryThroughput(50, 20),
  await daemonThroughput(50, 20)
]
