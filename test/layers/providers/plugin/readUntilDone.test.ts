import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readUntilDone } from "../../../../src/layers/providers/plugin/PluginProcess.ts"

describe("readUntilDone", () => {
  it.effect("stops once the reader reports the process is done", () =>
    Effect.gen(function*() {
      const answers = [true, true, false, true]
      let calls = 0
      yield* readUntilDone(Effect.sync(() => answers[calls++]!))
      assert.strictEqual(calls, 3)
    }))
})
