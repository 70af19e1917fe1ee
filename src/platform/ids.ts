import { Effect, Random } from "effect"

const hex = Effect.map(Random.nextIntBetween(0, 0xffff_ffff), (n) => n.toString(16).padStart(8, "0"))

/** A fresh id with a readable prefix (`agent-…`, `turn-…`): 64 random bits, from `Random`. */
export const randomId = (prefix: string): Effect.Effect<string> =>
  Effect.map(Effect.all([hex, hex]), ([high, low]) => `${prefix}-${high}${low}`)
