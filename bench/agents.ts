/**
 * Per provider, against the pinned real CLI driven by the fake model on loopback: the latency of
 * the runtime safety probe (median of 50), the memory of an idle runtime's whole process tree,
 * which is what Quiesce gives back when it releases one, and what a resume of a released runtime
 * costs (median of 20: until the session is ready, and until its first turn's answer), which is
 * what a warm reserve saves (H4): the same resume on a process started beforehand, for the
 * providers that can start one. `npm run bench:agents`; CLIs that are not installed
 * (`npm run install:agents`) are reported, not measured.
 */
import { Context, Effect, Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { agentCliBinary } from "../scripts/agentClis.ts"
import { stopVetoed } from "../src/domain/provider.ts"
import * as ProcessInspectionProcfs from "../src/layers/host/ProcessInspectionProcfs.ts"
import { ProcessInspection } from "../src/services/ProcessInspection.ts"
import { ProviderRegistry } from "../src/services/ProviderRegistry.ts"
import { scriptedPolicy } from "../test/agents/support/fakeModel/policy.ts"
import { fakeModelServer } from "../test/agents/support/fakeModel/server.ts"
import { realClis } from "../test/agents/support/clis.ts"
import { type RealCli, sessionConfig } from "../test/agents/support/realAgent.ts"
import { type BenchRow, median, printTable, run } from "./table.ts"

const probes = 50
const resumes = 20
/** How long a warm process sits ready before it is taken, as in a reserve (a process just started is still settling). */
const warmSettle = "1 second"

const measure = <E>(cli: RealCli<E>, binary: string) =>
  Effect.scoped(Effect.gen(function*() {
    const home = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), `quiesce-bench-${cli.cli}-`))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const model = yield* fakeModelServer(scriptedPolicy(cli.shell), cli.dialects)
    const context = yield* Layer.build(
      cli.layer(cli.launch({ binary, home, model }), () => {}).pipe(
        Layer.provideMerge(ProviderRegistry.layer),
        Layer.provideMerge(ProcessInspectionProcfs.layer())
      )
    )
    const client = yield* Context.get(context, ProviderRegistry).get(cli.provider)
    const session = yield* client.create(sessionConfig(home))
    const turn = yield* session.startTurn("hello", "turn-bench")
    yield* turn
    const probe = session.canStopRuntime
    const latencies: Array<number> = []
    const answers = { permitted: 0, vetoed: 0, failed: 0 }
    if (probe !== undefined) {
      // Right after a turn some CLIs still settle (bookkeeping, a title request) and the adapter
      // vetoes without asking the CLI; measure the settled runtime, where the probe asks. A CLI
      // whose probe never permits is measured after the bound.
      for (let i = 0; i < 50; i++) {
        if ((yield* Effect.orElseSucceed(probe, () => stopVetoed("the probe failed"))).canStop) break
        yield* Effect.sleep("100 millis")
      }
      for (let i = 0; i < probes; i++) {
        const start = performance.now()
        const answer = yield* Effect.exit(probe)
        latencies.push(performance.now() - start)
        if (answer._tag === "Failure") answers.failed++
        else if (answer.value.canStop) answers.permitted++
        else answers.vetoed++
      }
    }
    const tree = session.pid === undefined
      ? Option.none()
      : yield* Context.get(context, ProcessInspection).sample(session.pid)
    const handle = yield* session.persistence
    yield* session.close
    // A released runtime resumed: the process start, the CLI's handshake and its session loaded.
    const ready: Array<number> = []
    const answered: Array<number> = []
    if (handle !== null) {
      for (let i = 0; i < resumes; i++) {
        const start = performance.now()
        const resumed = yield* client.resume(handle, sessionConfig(home))
        ready.push(performance.now() - start)
        yield* Effect.flatten(resumed.startTurn("hello again", `turn-resume-${i}`))
        answered.push(performance.now() - start)
        yield* resumed.close
      }
    }
    // The same resume on a process started beforehand (untimed), as a warm reserve hands it out.
    const warmReady: Array<number> = []
    const warmAnswered: Array<number> = []
    const startWarm = client.startWarm
    if (handle !== null && startWarm !== undefined) {
      for (let i = 0; i < resumes; i++) {
        const config = sessionConfig(home)
        const warm = yield* startWarm(config.runtimeMarker)
        // A reserve's process has sat ready for a while when it is taken: let it settle.
        yield* Effect.sleep(warmSettle)
        const start = performance.now()
        const resumed = yield* warm.resume(handle, config)
        warmReady.push(performance.now() - start)
        yield* Effect.flatten(resumed.startTurn("hello again", `turn-warm-${i}`))
        warmAnswered.push(performance.now() - start)
        yield* resumed.close
      }
    }
    return {
      warm: startWarm === undefined
        ? undefined
        : { ready: median(warmReady), answered: median(warmAnswered), ratio: median(warmReady) / median(ready) },
      resume: handle === null
        ? "no persistence handle"
        : `${median(ready).toFixed(0)} ms ready, ${median(answered).toFixed(0)} ms to the first answer`,
      probe: probe === undefined
        ? "no probe"
        : `${median(latencies).toFixed(2)} ms (${answers.permitted} permitted, ${answers.vetoed} vetoed, ${answers.failed} failed)`,
      rss: Option.match(tree, {
        onNone: () => "not sampled",
        onSome: (s) => `${(s.rssBytes / 1024 / 1024).toFixed(1)} MiB (${s.measuredProcesses} processes)`
      })
    }
  }))

export const agentsBench = async (clis: ReadonlyArray<RealCli<unknown>>): Promise<ReadonlyArray<BenchRow>> => {
  const rows: Array<BenchRow> = []
  for (const cli of clis) {
    const binary = agentCliBinary(cli.cli)
    if ("missing" in binary) {
      rows.push({ name: `${cli.provider}: not measured`, value: binary.missing, target: "", ok: undefined })
      continue
    }
    const result = await run(Effect.exit(measure(cli, binary.path)))
    if (result._tag === "Failure") {
      rows.push({ name: `${cli.provider}: failed`, value: String(result.cause), target: "", ok: false })
      continue
    }
    rows.push(
      { name: `${cli.provider}: safety probe latency, median of ${probes}`, value: result.value.probe, target: "", ok: undefined },
      { name: `${cli.provider}: RSS of an idle runtime's process tree`, value: result.value.rss, target: "", ok: undefined },
      { name: `${cli.provider}: cold resume, median of ${resumes}`, value: result.value.resume, target: "", ok: undefined },
      result.value.warm === undefined
        ? { name: `${cli.provider}: warm resume`, value: "no warm reserve: its process takes its session when it starts", target: "", ok: undefined }
        : {
          name: `${cli.provider}: warm resume, median of ${resumes}`,
          value: `${result.value.warm.ready.toFixed(0)} ms ready (${(result.value.warm.ratio * 100).toFixed(0)} % of cold), ${
            result.value.warm.answered.toFixed(0)
          } ms to the first answer`,
          target: "< 25 % of cold",
          ok: result.value.warm.ratio < 0.25
        }
    )
  }
  return rows
}

// `node bench/agents.ts codex` measures the named CLIs only.
const only = process.argv.slice(2)
if (import.meta.main) printTable(await agentsBench(only.length === 0 ? realClis : realClis.filter((cli) => only.includes(cli.cli))))
