/**
 * OpenTelemetry as an operator sees it: a real daemon started with OTEL_EXPORTER_OTLP_ENDPOINT
 * pointing at a receiver inside the test sends its traces, logs and metrics there. A prompt to a
 * released agent is one trace holding its resume and its turn; a sweep's trace shows the veto
 * that kept a runtime. With the variable unset nothing is sent; a malformed value stops the start
 * with a message naming the variable. Time is real, so every wait polls with a bound.
 */
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
import { cleanUpHubs, hubApi, newHubRoot, startHub, writeHubConfig } from "../support/hubProcess.ts"
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../support/otlpReceiver.ts"

const receivers: Array<OtlpReceiver> = []
afterEach(async () => {
  await cleanUpHubs()
  await cleanUpDaemons()
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()))
})

const receiver = async (port?: number) => {
  const started = await startOtlpReceiver(port)
  receivers.push(started)
  return started
}

/** Exports every 200 ms, so the test waits little. */
const exportingTo = (endpoint: string) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
  OTEL_BSP_SCHEDULE_DELAY: "200",
  OTEL_BLRP_SCHEDULE_DELAY: "200",
  OTEL_METRIC_EXPORT_INTERVAL: "500"
})

const named = (spans: ReadonlyArray<ReceivedSpan>, name: string) => spans.filter((span) => span.name === name)

describe("OpenTelemetry", () => {
  it("a prompt to a released agent is one trace with its resume and turn; a sweep's spans show its veto; logs and metrics arrive", async () => {
    const otlp = await receiver()
    const daemon = startDaemon(newHome(), await freePort(), ["--idle-period", "1s", "--sweep-interval", "300ms"], {
      env: exportingTo(otlp.endpoint)
    })
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    await until(async () => (await api(daemon, "GET", `/v1/agents/${agentId}`)).body?.resident === false, "the agent is released", 10_000)

    // The released agent is resumed for this prompt, which runs its turn.
    const answered = await prompt(daemon, agentId, { text: "echo traced", wait: true })
    expect(answered.status).toBe(200)
    const turnId: string = answered.body.turnId
    let promptTrace: ReadonlyArray<ReceivedSpan> = []
    await until(() => {
      const run = named(otlp.spans(), "Turn.run").find((span) => span.attributes["quiesce.turn.id"] === turnId)
      promptTrace = run === undefined ? [] : otlp.spans().filter((span) => span.traceId === run.traceId)
      return named(promptTrace, "Agent.resume").length > 0
    }, "the prompt's trace with its resume and turn", 10_000)
    const byName = (name: string) => {
      const found = named(promptTrace, name)
      expect(found.length, `${name} in the prompt's trace`).toBe(1)
      return found[0]!
    }
    const server = promptTrace.find((span) => span.parentSpanId === undefined)
    // Named by method and route, as OpenTelemetry names server spans.
    expect(server?.name).toBe("POST /v1/agents/:id/prompts")
    const promptSpan = byName("AgentRegistry.prompt")
    const carry = byName("Turn.carry")
    const resume = byName("Agent.resume")
    const run = byName("Turn.run")
    byName("Turn.accept")
    byName("Turn.start")
    for (const span of [promptSpan, carry, resume, run]) {
      expect(span.attributes).toMatchObject({ "quiesce.agent.id": agentId, "quiesce.provider": "shell" })
    }
    expect(resume.parentSpanId).toBe(carry.spanId)
    expect(run.attributes["quiesce.turn.state"]).toBe("completed")
    expect(named(promptTrace, "SqlTurnJournal.update").length).toBeGreaterThan(0)
    // A journal write is one span: not one more per statement and transaction inside it.
    expect(promptTrace.filter((span) => span.name === "sqlite" || span.name === "sql.transaction")).toEqual([])
    expect(server?.resource["service.name"]).toBe("quiesce-daemon")

    // A background job vetoes the release: a sweep's trace says so, with the provider's reason.
    expect((await prompt(daemon, agentId, { text: "sleep 300 &", wait: true })).status).toBe(200)
    const reason = "background job 1 `sleep 300`"
    let vetoed: ReceivedSpan | undefined
    await until(() => {
      vetoed = named(otlp.spans(), "RuntimeCollector.family").find((span) =>
        span.attributes["quiesce.agent.id"] === agentId && span.attributes["quiesce.family.outcome"] === "vetoed"
      )
      return vetoed !== undefined
    }, "a sweep's family span with the veto", 10_000)
    expect(vetoed?.attributes).toMatchObject({ "quiesce.provider": "shell", "quiesce.veto.reason": reason })
    const sweepTrace = otlp.spans().filter((span) => span.traceId === vetoed?.traceId)
    expect(sweepTrace.find((span) => span.parentSpanId === undefined)?.name).toBe("RuntimeCollector.sweep")
    const probe = named(sweepTrace, "RuntimeCollector.probe")
    expect(probe.map((span) => span.attributes)).toContainEqual(expect.objectContaining({
      "quiesce.agent.id": agentId,
      "quiesce.probe.outcome": "vetoed",
      "quiesce.probe.reason": reason
    }))
    expect(named(sweepTrace, "Provider.request").length).toBeGreaterThan(0)

    // Logs and metrics go beside the traces.
    await until(() => JSON.stringify(otlp.bodies("/v1/logs")).includes("Resumed agent runtime"), "the resume's log line", 10_000)
    await until(() => JSON.stringify(otlp.bodies("/v1/metrics")).includes("quiesce_sweeps_total"), "the sweep counter", 10_000)
  }, 60_000)

  it("through the hub: the hub's start of the daemon and its route, and the daemon's spans, are one trace", async () => {
    const otlp = await receiver()
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    writeHubConfig(hubHome, [{ name: "work", dir: join(root, "work") }])
    const hub = await startHub(hubHome, undefined, exportingTo(otlp.endpoint))
    const created = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "shell", cwd: root })
    expect(created.status).toBe(201)
    let trace: ReadonlyArray<ReceivedSpan> = []
    await until(() => {
      const create = named(otlp.spans(), "AgentRegistry.create")[0]
      trace = create === undefined ? [] : otlp.spans().filter((span) => span.traceId === create.traceId)
      return named(trace, "Hub.route").length > 0 && named(trace, "Hub.startDaemon").length > 0
    }, "the create's trace from the hub to the daemon", 15_000)
    const route = named(trace, "Hub.route")[0]!
    expect(route.attributes).toMatchObject({ "quiesce.home": "work", "http.request.method": "POST" })
    expect(route.resource["service.name"]).toBe("quiesce-hub")
    expect(trace.find((span) => span.spanId === route.parentSpanId)?.name).toBe("POST /v1/homes/:home/agents")
    expect(named(trace, "Hub.startDaemon")[0]?.attributes).toMatchObject({ "quiesce.home": "work", "quiesce.start.outcome": "started" })
    // The daemon's server span is the hub's route's child: the traceparent went along.
    const daemonServer = trace.find((span) => span.resource["service.name"] === "quiesce-daemon" && span.name === "POST /v1/agents")
    expect(daemonServer?.parentSpanId).toBe(route.spanId)
    expect(named(trace, "AgentRegistry.create")[0]?.resource["service.name"]).toBe("quiesce-daemon")
  }, 60_000)

  it("with no endpoint set nothing is sent", async () => {
    // On OTLP/HTTP's default port, where an exporter with no endpoint of its own would send: only
    // the variables naming where to send are left out (blank), every other is set.
    const otlp = await receiver(4318)
    const daemon = startDaemon(newHome(), await freePort(), ["--sweep-interval", "300ms"], {
      env: {
        ...exportingTo(""),
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "",
        OTEL_SERVICE_NAME: "quiesce-test",
        OTEL_TRACES_EXPORTER: "otlp",
        OTEL_LOGS_EXPORTER: "otlp",
        OTEL_METRICS_EXPORTER: "otlp"
      }
    })
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    expect((await prompt(daemon, agentId, { text: "echo untraced", wait: true })).status).toBe(200)
    // Longer than every export interval a daemon would use here (the tracer's default is 5 s: its
    // spans would be flushed at the stop below at the latest).
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    daemon.process.kill("SIGTERM")
    await exited(daemon.process)
    expect(otlp.requests()).toEqual([])
  }, 30_000)

  it("a sampler of always_off sends no span, and the logs still go; OTEL_METRICS_EXPORTER=none sends no metrics", async () => {
    const otlp = await receiver()
    const daemon = startDaemon(newHome(), await freePort(), [], {
      env: { ...exportingTo(otlp.endpoint), OTEL_TRACES_SAMPLER: "always_off", OTEL_METRICS_EXPORTER: "none" }
    })
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    expect((await prompt(daemon, agentId, { text: "echo unsampled", wait: true })).status).toBe(200)
    await until(() => otlp.requests().includes("/v1/logs"), "the logs", 10_000)
    daemon.process.kill("SIGTERM")
    await exited(daemon.process)
    expect(otlp.spans()).toEqual([])
    expect(otlp.requests().filter((path) => path !== "/v1/logs")).toEqual([])
  }, 30_000)

  it("a malformed endpoint stops the start with a message naming the variable", async () => {
    const daemon = startDaemon(newHome(), await freePort(), [], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" } })
    const code = await exited(daemon.process)
    expect(code).not.toBe(0)
    expect(daemon.output()).toContain("OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, not \"localhost:4318\"")
    expect(daemon.output()).not.toContain("Quiesce ready")
  }, 30_000)
})
