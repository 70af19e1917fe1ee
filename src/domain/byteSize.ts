import { Effect, Schema, SchemaTransformation } from "effect"
import { invalidText, patternString } from "./patternString.ts"

const unitBytes: Record<string, number> = {
  "": 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4
}

const sizePattern = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i

/**
 * Parses a byte size ("6GiB", "512MiB", "1.5GB", "1048576") into bytes, rounded down to a whole
 * byte. Units are B, KB, MB, GB, TB (powers of 1000) and KiB, MiB, GiB, TiB (powers of 1024), in
 * any case; a bare number is bytes. Returns undefined when the text is malformed.
 */
export const parseByteSize = (text: string): number | undefined => {
  const match = sizePattern.exec(text.trim())
  if (match === null) return undefined
  const unit = unitBytes[match[2]!.toLowerCase()]
  if (unit === undefined) return undefined
  const bytes = Math.floor(Number(match[1]) * unit)
  return Number.isSafeInteger(bytes) ? bytes : undefined
}

/** A byte count for people, in the largest binary unit that keeps it at least 1: "4.0 GiB", "321.5 MiB", "512 B". */
export const formatByteSize = (bytes: number): string => {
  const units = ["KiB", "MiB", "GiB", "TiB"] as const
  if (Math.abs(bytes) < 1024) return `${bytes} B`
  let value = bytes / 1024
  let unit: (typeof units)[number] = units[0]
  for (const next of units.slice(1)) {
    if (Math.abs(value) < 1024) break
    value /= 1024
    unit = next
  }
  return `${value.toFixed(1)} ${unit}`
}

/** What a byte size looks like, for the JSON Schema (decoding gives the precise message). */
export const byteSizePattern = "^\\s*\\d+(\\.\\d+)?\\s*(([kKmMgGtT][iI]?)?[bB])?\\s*$"

/** A byte size string ("6GiB", "512MiB") decoded to a number of bytes; malformed ones fail with a readable message. */
export const ByteSize = patternString(byteSizePattern).pipe(
  Schema.decodeTo(
    Schema.Number,
    SchemaTransformation.transformEffect<number, string>({
      decode: (text, options) => {
        const bytes = parseByteSize(text)
        return bytes === undefined
          ? invalidText(`invalid size "${text}": expected a size such as "4GiB", "512MiB" or "1.5GB"`, text, options)
          : Effect.succeed(bytes)
      },
      encode: (bytes) => Effect.succeed(`${bytes}B`)
    })
  )
)
