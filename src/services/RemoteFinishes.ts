import { Context, Effect, Layer } from "effect"
import { FinishWatchFailed } from "../domain/errors.ts"
import type { FinishOutcome } from "../domain/finish.ts"

/**
 * Finishes of agents on other Quiesce servers, addressed by server id. The transport between
 * servers is a later concern; hosts without one get `layerUnavailable`.
 */
export class RemoteFinishes extends Context.Service<RemoteFinishes, {
  readonly awaitFinish: (serverId: string, targetAgentId: string) => Effect.Effect<FinishOutcome, FinishWatchFailed>
}>()("quiesce/finish/RemoteFinishes") {
  static readonly layerUnavailable = Layer.succeed(RemoteFinishes, RemoteFinishes.of({
    awaitFinish: (serverId, targetAgentId) =>
      Effect.fail(
        new FinishWatchFailed({
          targetAgentId,
          serverId,
          message: `No transport to server ${serverId} is configured`
        })
      )
  }))
}
