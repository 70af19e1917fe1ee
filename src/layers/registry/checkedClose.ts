/**
 * An explicit close that asks first: the runtime is closed only when the collector's explanation
 * of it, its providers asked fresh, finds nothing a close would end, or when the caller forces
 * it. A forced close of a runtime with work is logged, naming the agent and what it ended.
 */
import { Effect, Layer, Option } from "effect"
import { type CheckedClose, type CloseOptions, type CloseStakes, closeStakes, endsNothing, RuntimeCloseRefused, stakesLines } from "../../domain/close.ts"
import { AgentClose } from "../../services/AgentClose.ts"
import { AgentRegistry } from "../../services/AgentRegistry.ts"
import { RuntimeCollector } from "../../services/RuntimeCollector.ts"

const nothing: CloseStakes = { blockers: [], veto: null }

/** The checked close over this daemon's registry and collector. */
export const makeCheckedClose: Effect.Effect<CheckedClose, never, AgentRegistry | RuntimeCollector> = Effect.gen(function*() {
  const registry = yield* AgentRegistry
  const collector = yield* RuntimeCollector
  return Effect.fn("AgentRegistry.checkedClose")(function*(agentId: string, options: CloseOptions) {
    // No live runtime (released, never started, unknown): nothing to lose; the registry says which.
    const residency = yield* collector.explain(agentId, { probe: true }).pipe(Effect.option)
    const stakes = Option.match(residency, { onNone: () => nothing, onSome: closeStakes })
    if (endsNothing(stakes)) {
      // Asking the provider took time: work admitted meanwhile (a prompt's turn) still refuses it.
      const kept = yield* registry.close(agentId, { unlessBlocked: !options.force })
      if (kept.length > 0) {
        return yield* RuntimeCloseRefused.of(agentId, { blockers: kept.map((found) => ({ agentId, ...found })), veto: null })
      }
      return { agentId, ended: stakes }
    }
    if (!options.force) return yield* RuntimeCloseRefused.of(agentId, stakes)
    yield* registry.close(agentId)
    yield* Effect.logWarning(`Closed agent ${agentId} by force, ending: ${stakesLines(agentId, stakes).join("; ")}`).pipe(
      Effect.annotateLogs({ agentId, blockers: stakes.blockers.length, veto: stakes.veto?.message ?? stakes.veto?.outcome ?? "none" })
    )
    return { agentId, ended: stakes }
  })
})

/** `AgentClose` on a lone daemon: checked by its own collector. */
export const layer: Layer.Layer<AgentClose, never, AgentRegistry | RuntimeCollector> = Layer.effect(
  AgentClose,
  Effect.map(makeCheckedClose, (close) => AgentClose.of({ close }))
)
