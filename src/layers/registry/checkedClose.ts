/**
 * An explicit close, or delete, that asks first: the runtime is ended only when the collector's
 * explanation of it, its providers asked fresh, finds nothing ending it would lose, or when the
 * caller forces it. A forced close or delete of a runtime with work is logged, naming the agent
 * and what it ended. Both go through one check (`checked`); they differ only in what is done in
 * the agent's lane at the end (the registry's `close` or `delete`) and in the refusal's name.
 */
import { Effect, Layer } from "effect"
import type { Blocker, MemberBlocker } from "../../domain/blocker.ts"
import {
  AgentDeleteRefused,
  type CheckedClose,
  type CheckedDelete,
  type ClosedRuntime,
  type CloseOptions,
  type CloseStakes,
  closeStakes,
  endsNothing,
  RuntimeCloseRefused,
  stakesLines
} from "../../domain/close.ts"
import type { AgentNotFound } from "../../domain/errors.ts"
import { AgentClose } from "../../services/AgentClose.ts"
import { type AgentEndings, AgentRegistry } from "../../services/AgentRegistry.ts"
import { RuntimeCollector } from "../../services/RuntimeCollector.ts"

const nothing: CloseStakes = { blockers: [], veto: null }

/** The explained blockers, and those the agent's lane found that the explanation had not named. */
const withFound = (agentId: string, explained: ReadonlyArray<MemberBlocker>, found: ReadonlyArray<Blocker>): ReadonlyArray<MemberBlocker> => [
  ...explained,
  ...found
    .filter((each) => !explained.some((named) => named.agentId === agentId && named.kind === each.kind))
    .map((each) => ({ agentId, ...each }))
]

/** What a checked ending does in the agent's lane, and how it is named when refused or forced. */
interface Ending<E, Refused> {
  /** Ends the runtime (and, for a delete, the agent), unless `unlessBlocked` and its lane finds work: answers that work. */
  readonly end: (agentId: string, unlessBlocked: boolean) => Effect.Effect<ReadonlyArray<Blocker>, E>
  readonly refused: (agentId: string, stakes: CloseStakes) => Refused
  /** The forced ending's log line begins `${done} agent ${agentId} by force`. */
  readonly done: string
}

/** The one check of what ending a runtime loses, shared by the close and the delete; `span` names its span. */
const checked = <E, Refused>(
  span: string,
  collector: RuntimeCollector["Service"],
  ending: Ending<E, Refused>
) =>
  Effect.fn(span)(function*(agentId: string, options: CloseOptions): Effect.fn.Return<ClosedRuntime, E | Refused | AgentNotFound> {
    // No live runtime (released, never started, unknown): nothing to lose; the registry says which.
    const explained = yield* collector.explain(agentId, { probe: true }).pipe(
      Effect.map(closeStakes),
      Effect.catchTag("RuntimeNotFound", () => Effect.succeed(nothing))
    )
    if (!options.force && !endsNothing(explained)) return yield* Effect.fail(ending.refused(agentId, explained))
    // Asking the provider took time: the agent's lane is read again right before the ending, so
    // work admitted meanwhile (a prompt's turn, a permission) refuses an unforced one, and is
    // named among what a forced one ended.
    const found = yield* ending.end(agentId, !options.force)
    if (!options.force) {
      if (found.length > 0) return yield* Effect.fail(ending.refused(agentId, { blockers: withFound(agentId, [], found), veto: null }))
      return { agentId, ended: nothing }
    }
    const ended: CloseStakes = { blockers: withFound(agentId, explained.blockers, found), veto: explained.veto }
    if (!endsNothing(ended)) {
      yield* Effect.logWarning(`${ending.done} agent ${agentId} by force, ending: ${stakesLines(agentId, ended).join("; ")}`).pipe(
        Effect.annotateLogs({ agentId, blockers: ended.blockers.length, veto: ended.veto?.message ?? ended.veto?.outcome ?? "none" })
      )
    }
    return { agentId, ended }
  })

/** The checked close and delete over this daemon's registry and collector. */
export const makeCheckedEndings: Effect.Effect<
  { readonly close: CheckedClose; readonly delete: CheckedDelete },
  never,
  AgentRegistry | RuntimeCollector
> = Effect.gen(function*() {
  const registry: AgentEndings = yield* AgentRegistry
  const collector = yield* RuntimeCollector
  const close: CheckedClose = checked("AgentRegistry.checkedClose", collector, {
    end: (id, unlessBlocked) => registry.close(id, { unlessBlocked }),
    refused: RuntimeCloseRefused.of,
    done: "Closed"
  })
  const remove: CheckedDelete = checked("AgentRegistry.checkedDelete", collector, {
    end: (id, unlessBlocked) => registry.delete(id, { unlessBlocked }),
    refused: AgentDeleteRefused.of,
    done: "Deleted"
  })
  return { close, delete: remove }
})

/** The checked close over this daemon's registry and collector. */
export const makeCheckedClose: Effect.Effect<CheckedClose, never, AgentRegistry | RuntimeCollector> = Effect.map(
  makeCheckedEndings,
  (endings) => endings.close
)

/** `AgentClose` on a lone daemon: checked by its own collector. */
export const layer: Layer.Layer<AgentClose, never, AgentRegistry | RuntimeCollector> = Layer.effect(
  AgentClose,
  Effect.map(makeCheckedEndings, (endings) => AgentClose.of(endings))
)
