/**
 * An explicit close that asks first: the runtime is closed only when the collector's explanation
 * of it, its providers asked fresh, finds nothing a close would end, or when the caller forces
 * it. A forced close of a runtime with work is logged, naming the agent and what it ended.
 */
import { Effect, Layer } from "effect"
import type { Blocker, MemberBlocker } from "../../domain/blocker.ts"
import { type CheckedClose, type CloseOptions, type CloseStakes, closeStakes, endsNothing, RuntimeCloseRefused, stakesLines } from "../../domain/close.ts"
import { AgentClose } from "../../services/AgentClose.ts"
import { AgentRegistry } from "../../services/AgentRegistry.ts"
import { RuntimeCollector } from "../../services/RuntimeCollector.ts"

const nothing: CloseStakes = { blockers: [], veto: null }

/** The explained blockers, and those the agent's lane found that the explanation had not named. */
const withFound = (agentId: string, explained: ReadonlyArray<MemberBlocker>, found: ReadonlyArray<Blocker>): ReadonlyArray<MemberBlocker> => [
  ...explained,
  ...found
    .filter((each) => !explained.some((named) => named.agentId === agentId && named.kind === each.kind))
    .map((each) => ({ agentId, ...each }))
]

/** The checked close over this daemon's registry and collector. */
export const makeCheckedClose: Effect.Effect<CheckedClose, never, AgentRegistry | RuntimeCollector> = Effect.gen(function*() {
  const registry = yield* AgentRegistry
  const collector = yield* RuntimeCollector
  return Effect.fn("AgentRegistry.checkedClose")(function*(agentId: string, options: CloseOptions) {
    // No live runtime (released, never started, unknown): nothing to lose; the registry says which.
    const explained = yield* collector.explain(agentId, { probe: true }).pipe(
      Effect.map(closeStakes),
      Effect.catchTag("RuntimeNotFound", () => Effect.succeed(nothing))
    )
    if (!options.force && !endsNothing(explained)) return yield* RuntimeCloseRefused.of(agentId, explained)
    // Asking the provider took time: the agent's lane is read again right before the close, so
    // work admitted meanwhile (a prompt's turn, a permission) refuses an unforced close, and is
    // named among what a forced one ended.
    const found = yield* registry.close(agentId, { unlessBlocked: !options.force })
    if (!options.force) {
      if (found.length > 0) return yield* RuntimeCloseRefused.of(agentId, { blockers: withFound(agentId, [], found), veto: null })
      return { agentId, ended: nothing }
    }
    const ended: CloseStakes = { blockers: withFound(agentId, explained.blockers, found), veto: explained.veto }
    if (!endsNothing(ended)) {
      yield* Effect.logWarning(`Closed agent ${agentId} by force, ending: ${stakesLines(agentId, ended).join("; ")}`).pipe(
        Effect.annotateLogs({ agentId, blockers: ended.blockers.length, veto: ended.veto?.message ?? ended.veto?.outcome ?? "none" })
      )
    }
    return { agentId, ended }
  })
})

/** `AgentClose` on a lone daemon: checked by its own collector. */
export const layer: Layer.Layer<AgentClose, never, AgentRegistry | RuntimeCollector> = Layer.effect(
  AgentClose,
  Effect.map(makeCheckedClose, (close) => AgentClose.of({ close }))
)
