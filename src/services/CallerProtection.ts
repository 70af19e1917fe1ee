import { Context, Effect, Layer } from "effect"

/**
 * Whether an agent is a caller someone still owes something: a queued or dispatching message
 * delivery, or a finish subscription whose notification is not yet acknowledged (C4, D1, D2).
 * A protected agent, and so its whole family, stays resident.
 */
export class CallerProtection extends Context.Service<CallerProtection, {
  readonly isProtected: (agentId: string) => Effect.Effect<boolean>
}>()("quiesce/collector/CallerProtection") {
  /** Protects nobody: for hosts without message delivery or finish subscriptions. */
  static readonly layerNone = Layer.succeed(CallerProtection, CallerProtection.of({
    isProtected: () => Effect.succeed(false)
  }))
}
