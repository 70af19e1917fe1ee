import { Context, type Effect } from "effect"
import type { RuntimeRow } from "../domain/runtimeRow.ts"

/**
 * Every runner's live runtimes as they were reported (`layers/cluster/ClusterRuntimes.ts`). A
 * lone daemon has none: undefined, and its own runtimes are the whole list.
 */
export const ClusterRuntimes = Context.Reference<{ readonly list: Effect.Effect<ReadonlyArray<RuntimeRow>> } | undefined>(
  "quiesce/cluster/ClusterRuntimes",
  { defaultValue: () => undefined }
)
