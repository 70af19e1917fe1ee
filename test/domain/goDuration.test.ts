import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import { formatGoDuration, GoDuration, parseGoDurationNanos } from "../../src/domain/goDuration.ts"

describe("GoDuration", () => {
  it("parses Go-style durations", () => {
    assert.strictEqual(parseGoDurationNanos("1h"), 3600e9)
    assert.strictEqual(parseGoDurationNanos("1h30m"), 5400e9)
    assert.strictEqual(parseGoDurationNanos("1.5s"), 1.5e9)
    assert.strictEqual(parseGoDurationNanos("250ms"), 250e6)
    assert.strictEqual(parseGoDurationNanos("0s"), 0)
    assert.strictEqual(parseGoDurationNanos("0"), 0)
    assert.strictEqual(parseGoDurationNanos("-5m"), -300e9)
    for (const bad of ["", "1", "h", "1d", "1h 30m", "1hh", "abc", "-"]) {
      assert.isUndefined(parseGoDurationNanos(bad), bad)
    }
  })

  it.effect("decodes to a Duration and rejects negative or malformed values with a clear message", () =>
    Effect.gen(function*() {
      const decode = Schema.decodeUnknownEffect(GoDuration)
      assert.strictEqual(Duration.toMillis(yield* decode("30m")), 1_800_000)
      assert.strictEqual(Duration.toMillis(yield* decode("0s")), 0)
      const negative = yield* Effect.flip(decode("-1h"))
      assert.include(negative.message, "must not be negative")
      const malformed = yield* Effect.flip(decode("an hour"))
      assert.include(malformed.message, "Go-style duration")
    }))

  it("formats like Go", () => {
    assert.strictEqual(formatGoDuration(Duration.hours(1)), "1h0m0s")
    assert.strictEqual(formatGoDuration(Duration.seconds(90)), "1m30s")
    assert.strictEqual(formatGoDuration(Duration.millis(250)), "250ms")
    assert.strictEqual(formatGoDuration(Duration.zero), "0s")
  })
})
