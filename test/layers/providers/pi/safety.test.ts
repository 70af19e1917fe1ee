/** The Pi / OMP runtime safety decision (P5): every field that matters, and missing fields retain. */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { SessionState } from "../../../../src/layers/providers/pi/rpcTypes.ts"
import {
  canStop,
  type LocalState,
  missingSettlement,
  type PiVariant,
  verdict
} from "../../../../src/layers/providers/pi/safety.ts"

const idleLocal = (variant: PiVariant): LocalState => ({
  variant,
  turnInFlight: false,
  commandsInFlight: 0,
  unsentMessages: 0,
  continuationPending: false,
  autonomousRun: false
})

const piIdle: SessionState = { isStreaming: false, isCompacting: false, pendingMessageCount: 0, sessionId: "s" }
const ompIdle: SessionState = {
  isStreaming: false,
  isCompacting: false,
  queuedMessageCount: 0,
  isSettled: true,
  hasPendingAsyncWork: false
}

const decodeState = Schema.decodeUnknownSync(SessionState)
const without = (state: SessionState, key: keyof SessionState): SessionState =>
  decodeState(Object.fromEntries(Object.entries(state).filter(([name]) => name !== key)))

describe("pi safety (P5)", () => {
  it("an idle Pi session may stop", () => {
    assert.isTrue(canStop(piIdle, idleLocal("pi")))
  })

  for (const count of [1, 3]) {
    it(`pendingMessageCount ${count} retains`, () => {
      assert.isFalse(canStop({ ...piIdle, pendingMessageCount: count }, idleLocal("pi")))
    })
  }

  it("streaming retains", () => {
    assert.isFalse(canStop({ ...piIdle, isStreaming: true }, idleLocal("pi")))
  })

  it("compacting retains", () => {
    assert.isFalse(canStop({ ...piIdle, isCompacting: true }, idleLocal("pi")))
  })

  it("OMP's queuedMessageCount is honoured for Pi too", () => {
    assert.isFalse(canStop({ ...piIdle, queuedMessageCount: 2 }, idleLocal("pi")))
    assert.isTrue(canStop(without({ ...piIdle, queuedMessageCount: 0 }, "pendingMessageCount"), idleLocal("pi")))
  })

  for (const key of ["isStreaming", "isCompacting", "pendingMessageCount"] as const) {
    it(`a missing ${key} retains`, () => {
      assert.isFalse(canStop(without(piIdle, key), idleLocal("pi")))
    })
  }

  it("Pi does not need the OMP-only fields", () => {
    assert.isTrue(canStop({ ...piIdle, isSettled: false, hasPendingAsyncWork: true }, idleLocal("pi")))
  })

  for (
    const [name, local] of [
      ["a turn in flight", { turnInFlight: true }],
      ["a command in flight", { commandsInFlight: 1 }],
      ["an unsent steer", { unsentMessages: 1 }],
      ["a continuation OMP scheduled (agent_end isTerminal: false)", { continuationPending: true }],
      ["a run the CLI started on its own", { autonomousRun: true }]
    ] as const
  ) {
    it(`${name} retains, whatever the CLI says`, () => {
      assert.isFalse(canStop(piIdle, { ...idleLocal("pi"), ...local }))
      assert.isFalse(canStop(ompIdle, { ...idleLocal("omp"), ...local }))
    })
  }
})

describe("omp safety (P5)", () => {
  const cases: ReadonlyArray<readonly [boolean | undefined, boolean | undefined, boolean]> = [
    [true, false, true],
    [true, true, false],
    [true, undefined, false],
    [false, false, false],
    [false, true, false],
    [undefined, false, false],
    // Beyond the six: both missing (an older OMP release) retains too.
    [undefined, undefined, false],
    [false, undefined, false],
    [undefined, true, false]
  ]
  for (const [isSettled, hasPendingAsyncWork, expected] of cases) {
    it(`isSettled ${isSettled} × hasPendingAsyncWork ${hasPendingAsyncWork} → ${expected}`, () => {
      let state = ompIdle
      state = isSettled === undefined ? without(state, "isSettled") : { ...state, isSettled }
      state = hasPendingAsyncWork === undefined
        ? without(state, "hasPendingAsyncWork")
        : { ...state, hasPendingAsyncWork }
      assert.strictEqual(canStop(state, idleLocal("omp")), expected)
    })
  }

  it("a settled OMP session still retains while streaming, compacting or queued", () => {
    assert.isFalse(canStop({ ...ompIdle, isStreaming: true }, idleLocal("omp")))
    assert.isFalse(canStop({ ...ompIdle, isCompacting: true }, idleLocal("omp")))
    assert.isFalse(canStop({ ...ompIdle, queuedMessageCount: 1 }, idleLocal("omp")))
  })

  it("OMP 18.2's get_state (no settlement fields, as the real CLI answers) retains, saying why", () => {
    const omp182 = without(without(ompIdle, "isSettled"), "hasPendingAsyncWork")
    assert.deepStrictEqual(verdict(omp182, idleLocal("omp")), { permit: false, reason: missingSettlement })
    // The same answer is enough for Pi, which has no such fields.
    assert.isTrue(canStop({ ...omp182, pendingMessageCount: 0 }, idleLocal("pi")))
  })

  it("every veto names its reason", () => {
    assert.deepStrictEqual(verdict(ompIdle, { ...idleLocal("omp"), continuationPending: true }), {
      permit: false,
      reason: "the last run ended non-terminal: a continuation is scheduled"
    })
    assert.deepStrictEqual(verdict({ ...ompIdle, isStreaming: true }, idleLocal("omp")), {
      permit: false,
      reason: "isStreaming is true"
    })
    assert.deepStrictEqual(verdict(ompIdle, idleLocal("omp")), { permit: true })
    assert.deepStrictEqual(verdict(piIdle, { ...idleLocal("pi"), turnInFlight: true, turnId: "turn-3" }), {
      permit: false,
      reason: "turn turn-3 is in flight"
    })
    assert.deepStrictEqual(verdict(piIdle, { ...idleLocal("pi"), turnInFlight: true }), {
      permit: false,
      reason: "a turn is in flight"
    })
    assert.deepStrictEqual(verdict(without(ompIdle, "isSettled"), idleLocal("omp")), {
      permit: false,
      reason: "isSettled is undefined"
    })
  })

  it("a missing queue count retains", () => {
    assert.isFalse(canStop(without(ompIdle, "queuedMessageCount"), idleLocal("omp")))
  })
})
