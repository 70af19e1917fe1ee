import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Metric } from "effect"
import { TestClock } from "effect/testing"
import { RuntimeCloseFailed, RuntimeProbeFailed } from "../../../src/domain/errors.ts"
import { stopVetoed } from "../../../src/domain/provider.ts"
import { FakeCallerProtection, FakeRuntimes } from "../../../src/testing/FakeRuntimes.ts"
import { makeRuntimeCollector } from "../../../src/layers/collector/RuntimeCollectorLive.ts"
import * as Metrics from "../../../src/layers/metrics/Metrics.ts"
import { CallerProtection } from "../../../src/services/CallerProtection.ts"
import { RuntimeCandidates } from "../../../src/services/RuntimeCandidates.ts"

/** Each test reads and writes a registry of its own. */
const isolated = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, Metric.MetricRegistry, new Map())

const linesOf = (text: string) => text.split("\n")

describe("Metrics.renderPrometheus", () => {
  it.effect("renders counters with labels, gauges and histograms in the text format", () =>
    isolated(Effect.gen(function*() {
      yield* Metrics.recordSweep
      yield* Metrics.recordSweep
      yield* Metrics.recordCollection("acp")
      yield* Metrics.recordCollection("acp")
      yield* Metrics.recordCollection("plugin")
      yield* Metrics.recordRetention("foreground-turn")
      yield* Metrics.recordRetention("veto")
      yield* Metrics.recordRetention("veto")
      yield* Metrics.recordRetention("probe-failure")
      yield* Metrics.recordRetention("close-declined")
      yield* Metrics.setResidentRuntimes(7)
      yield* Metrics.setResidentRuntimes(5)
      yield* Metrics.recordReleasedBytes(4096)
      yield* Metrics.recordReleasedBytes(-1) // ignored
      for (const seconds of [0.002, 0.02, 0.3, 12]) yield* Metrics.recordProbeDuration(seconds)
      // Not ours: left out.
      yield* Metric.update(Metric.counter("other_total"), 1)

      const text = yield* Metrics.renderPrometheus
      assert.isTrue(text.endsWith("\n"))
      assert.notInclude(text, "other_total")
      const lines = linesOf(text)
      const expected = [
        "# HELP quiesce_collections_total Idle runtimes collected, by provider.",
        "# TYPE quiesce_collections_total counter",
        "quiesce_collections_total{provider=\"acp\"} 2",
        "quiesce_collections_total{provider=\"plugin\"} 1",
        "# HELP quiesce_probe_duration_seconds Duration of provider canStopRuntime probes in seconds.",
        "# TYPE quiesce_probe_duration_seconds histogram",
        "quiesce_probe_duration_seconds_bucket{le=\"0.001\"} 0",
        "quiesce_probe_duration_seconds_bucket{le=\"0.005\"} 1",
        "quiesce_probe_duration_seconds_bucket{le=\"0.01\"} 1",
        "quiesce_probe_duration_seconds_bucket{le=\"0.025\"} 2",
        "quiesce_probe_duration_seconds_bucket{le=\"0.05\"} 2",
        "quiesce_probe_duration_seconds_bucket{le=\"0.1\"} 2",
        "quiesce_probe_duration_seconds_bucket{le=\"0.25\"} 2",
        "quiesce_probe_duration_seconds_bucket{le=\"0.5\"} 3",
        "quiesce_probe_duration_seconds_bucket{le=\"1\"} 3",
        "quiesce_probe_duration_seconds_bucket{le=\"2.5\"} 3",
        "quiesce_probe_duration_seconds_bucket{le=\"5\"} 3",
        "quiesce_probe_duration_seconds_bucket{le=\"10\"} 3",
        "quiesce_probe_duration_seconds_bucket{le=\"+Inf\"} 4",
        "quiesce_probe_duration_seconds_sum 12.322",
        "quiesce_probe_duration_seconds_count 4",
        "# HELP quiesce_released_bytes_total Bytes of resident memory (RSS) released by collecting runtimes.",
        "# TYPE quiesce_released_bytes_total counter",
        "quiesce_released_bytes_total 4096",
        "# HELP quiesce_resident_runtimes Live runtimes resident after the last sweep.",
        "# TYPE quiesce_resident_runtimes gauge",
        "quiesce_resident_runtimes 5",
        "# HELP quiesce_retentions_total Idle runtimes retained by a decision, by reason.",
        "# TYPE quiesce_retentions_total counter",
        "quiesce_retentions_total{reason=\"close-declined\"} 1",
        "quiesce_retentions_total{reason=\"foreground-turn\"} 1",
        "quiesce_retentions_total{reason=\"probe-failure\"} 1",
        "quiesce_retentions_total{reason=\"veto\"} 2",
        "# HELP quiesce_sweeps_total Sweeps of idle runtimes that ran to completion.",
        "# TYPE quiesce_sweeps_total counter",
        "quiesce_sweeps_total 2",
        ""
      ]
      assert.deepStrictEqual(lines, expected)
    })))

  it.effect("shows the unlabelled series at zero before any update", () =>
    isolated(Effect.gen(function*() {
      const lines = linesOf(yield* Metrics.renderPrometheus)
      assert.include(lines, "quiesce_sweeps_total 0")
      assert.include(lines, "quiesce_resident_runtimes 0")
      assert.include(lines, "quiesce_released_bytes_total 0")
      assert.include(lines, "quiesce_probe_duration_seconds_bucket{le=\"+Inf\"} 0")
      assert.include(lines, "quiesce_probe_duration_seconds_count 0")
      assert.notInclude(lines.join("\n"), "quiesce_collections_total{")
    })))

  it.effect("escapes label values and help text", () =>
    isolated(Effect.gen(function*() {
      const odd = Metric.counter("quiesce_test_total", { description: "a \\ back\nslash", incremental: true })
      yield* Metric.update(Metric.withAttributes(odd, { "bad-name": "say \"hi\"\\\nbye" }), 3)
      const text = yield* Metrics.renderPrometheus
      const family = linesOf(text).filter((line) => line.includes("quiesce_test_total"))
      assert.deepStrictEqual(family, [
        "# HELP quiesce_test_total a \\\\ back\\nslash",
        "# TYPE quiesce_test_total counter",
        "quiesce_test_total{bad_name=\"say \\\"hi\\\"\\\\\\nbye\"} 3"
      ])
    })))
})

describe("collector instrumentation", () => {
  it.effect("a sweep counts itself, its collections, its retentions by reason and its probe durations", () =>
    isolated(Effect.gen(function*() {
      const runtimes = new FakeRuntimes()
      runtimes.add("busy", { busy: true })
      const probing = yield* Deferred.make<void>()
      runtimes.add("vetoing").probe = Deferred.succeed(probing, undefined).pipe(
        Effect.andThen(Effect.sleep("2 seconds")),
        Effect.as(stopVetoed("test veto"))
      )
      runtimes.add("failing").probe = Effect.fail(new RuntimeProbeFailed({ agentId: "failing", message: "no" }))
      runtimes.add("idle")
      runtimes.add("broken").closeFailure = new RuntimeCloseFailed({ agentId: "broken", message: "stuck" })
      const collector = yield* makeRuntimeCollector({ tickInterval: "3650 days" }).pipe(
        Effect.provideService(RuntimeCandidates, runtimes.service),
        Effect.provideService(CallerProtection, new FakeCallerProtection().service)
      )
      yield* TestClock.setTime(60 * 60_000)
      const sweep = yield* Effect.forkChild(collector.sweep)
      yield* Deferred.await(probing)
      yield* TestClock.adjust("2 seconds")
      const report = yield* Fiber.join(sweep)
      assert.deepStrictEqual(report.collected.map((entry) => entry.agentId), ["idle"])

      const lines = linesOf(yield* Metrics.renderPrometheus)
      for (
        const line of [
          "quiesce_sweeps_total 1",
          "quiesce_collections_total{provider=\"test\"} 1",
          "quiesce_retentions_total{reason=\"close-failure\"} 1",
          "quiesce_retentions_total{reason=\"foreground-turn\"} 1",
          "quiesce_retentions_total{reason=\"probe-failure\"} 1",
          "quiesce_retentions_total{reason=\"veto\"} 1",
          "quiesce_resident_runtimes 4",
          "quiesce_probe_duration_seconds_bucket{le=\"1\"} 1",
          "quiesce_probe_duration_seconds_bucket{le=\"2.5\"} 2",
          "quiesce_probe_duration_seconds_sum 2",
          "quiesce_probe_duration_seconds_count 2"
        ]
      ) assert.include(lines, line)
    })))
})
