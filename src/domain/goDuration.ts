import { Duration, Effect, Schema, SchemaTransformation } from "effect"
import { invalidText, patternString } from "./patternString.ts"

const unitNanos: Record<string, number> = {
  ns: 1,
  us: 1e3,
  "µs": 1e3,
  "μs": 1e3,
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9
}

const segment = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y

/**
 * Parses a Go-style duration ("1h", "1h30m", "250ms", "0s", "0") into nanoseconds.
 * Returns undefined when the text is malformed. A leading sign is accepted so that
 * callers can reject negative values with a precise message.
 */
export const parseGoDurationNanos = (text: string): number | undefined => {
  let rest = text
  let sign = 1
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest.startsWith("-") ? -1 : 1
    rest = rest.slice(1)
  }
  if (rest === "0") return 0
  if (rest === "") return undefined
  let total = 0
  segment.lastIndex = 0
  while (segment.lastIndex < rest.length) {
    const start = segment.lastIndex
    const match = segment.exec(rest)
    if (match === null || match.index !== start) return undefined
    total += Number(match[1]) * unitNanos[match[2]!]!
  }
  return sign * total
}

/** Formats a duration the way Go prints it: "1h0m0s", "1m30s", "250ms", "0s". */
export const formatGoDuration = (duration: Duration.Duration): string => {
  const millis = Duration.toMillis(duration)
  if (!Number.isFinite(millis)) return "inf"
  if (millis === 0) return "0s"
  if (millis < 1000) return `${millis}ms`
  const hours = Math.floor(millis / 3_600_000)
  const minutes = Math.floor((millis % 3_600_000) / 60_000)
  const seconds = (millis % 60_000) / 1000
  if (hours > 0) return `${hours}h${minutes}m${seconds}s`
  if (minutes > 0) return `${minutes}m${seconds}s`
  return `${seconds}s`
}

/** What a non-negative Go duration looks like, for the JSON Schema (decoding gives the precise message). */
export const goDurationPattern = "^\\+?(0|((\\d+(\\.\\d*)?|\\.\\d+)(ns|us|µs|μs|ms|s|m|h))+)$"

/**
 * A non-negative Go-style duration string decoded to a `Duration` ("0s" is zero, which callers
 * treat as "disabled"). Negative and malformed values fail with a readable message.
 */
export const GoDuration = patternString(goDurationPattern).pipe(
  Schema.decodeTo(
    Schema.Duration,
    SchemaTransformation.transformEffect<Duration.Duration, string>({
      decode: (text, options) => {
        const nanos = parseGoDurationNanos(text)
        if (nanos === undefined) {
          return invalidText(`invalid duration "${text}": expected a Go-style duration such as "1h", "30m", "10s" or "0s"`, text, options)
        }
        if (nanos < 0) {
          return invalidText(`invalid duration "${text}": must not be negative`, text, options)
        }
        return Effect.succeed(Duration.nanos(BigInt(Math.round(nanos))))
      },
      encode: (duration) => Effect.succeed(formatGoDuration(duration))
    })
  )
)

/** Decodes a Go-style duration string (a flag's value, say) to a `Duration`, failing with a readable message. */
export const decodeGoDuration = Schema.decodeUnknownEffect(GoDuration)
