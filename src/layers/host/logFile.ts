/**
 * The daemon's log in its home: one JSON object per line in `daemon.log`, rotated when it passes
 * a size (`daemon.log.1` … `daemon.log.N`, the oldest dropped), beside what it writes to stdout.
 * `quiesce logs` reads it. Writes are synchronous and small: a daemon logs lifecycle events, not
 * requests, and a line is never lost to a crash that follows it.
 */
import { Effect, Logger, Predicate, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

export const logFileName = "daemon.log"

export const logFile = (home: string) => path.join(home, logFileName)

/** The `n`th rotated file of the log (1 is the newest). */
export const rotatedLogFile = (home: string, n: number) => `${logFile(home)}.${n}`

export interface LogFileOptions {
  /** Rotate once the file is larger than this. Default 10 MiB. */
  readonly maxBytes?: number | undefined
  /** How many rotated files to keep. Default 3. */
  readonly keep?: number | undefined
}

export const defaultLogFileOptions = { maxBytes: 10 * 1024 * 1024, keep: 3 } as const

/** A logger appending JSON lines to `<home>/daemon.log`, rotated by size; closed with its scope. */
export const rotatingLogFile = (home: string, options: LogFileOptions = {}) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const file = logFile(home)
      const maxBytes = options.maxBytes ?? defaultLogFileOptions.maxBytes
      const keep = options.keep ?? defaultLogFileOptions.keep
      // -1 once a rotation failed half way: lines then go to stdout only.
      let fd = fs.openSync(file, "a", 0o600)
      let size = fs.fstatSync(fd).size
      let warned = false
      const rotate = () => {
        fs.closeSync(fd)
        fd = -1
        fs.rmSync(rotatedLogFile(home, keep), { force: true })
        for (let n = keep - 1; n >= 1; n--) {
          if (fs.existsSync(rotatedLogFile(home, n))) fs.renameSync(rotatedLogFile(home, n), rotatedLogFile(home, n + 1))
        }
        fs.renameSync(file, rotatedLogFile(home, 1))
        fd = fs.openSync(file, "a", 0o600)
        size = 0
      }
      const logger = Logger.map(Logger.formatJson, (line) => {
        const bytes = Buffer.from(`${line}\n`)
        try {
          if (size > 0 && size + bytes.length > maxBytes) rotate()
          if (fd === -1) return
          fs.writeSync(fd, bytes)
          size += bytes.length
        } catch (error) {
          // A full disk or a removed home must not take the daemon down; stdout still has the line.
          if (!warned) {
            warned = true
            process.stderr.write(`quiesce: cannot write ${file}: ${error instanceof Error ? error.message : String(error)}\n`)
          }
        }
      })
      const close = () => {
        if (fd === -1) return
        fs.closeSync(fd)
        // A fiber that outlives the daemon's scope (an abandoned probe, say) must not write to a reused descriptor.
        fd = -1
      }
      return { logger, close }
    }),
    ({ close }) => Effect.sync(close)
  ).pipe(Effect.map(({ logger }) => logger))

/** The last `count` lines of the home's log, reading back through its rotated files as needed. */
export const lastLogLines = (home: string, count: number, keep: number = defaultLogFileOptions.keep): ReadonlyArray<string> => {
  const files = [logFile(home), ...Array.from({ length: keep }, (_, i) => rotatedLogFile(home, i + 1))]
  const lines: Array<string> = []
  for (const file of files) {
    if (lines.length >= count || !fs.existsSync(file)) break
    lines.unshift(...fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== ""))
  }
  return lines.slice(-count)
}

/** The size of a file, 0 when it is not there (between a rotation's rename and the new file, say). */
export const logSize = (file: string): number => {
  try {
    return fs.statSync(file).size
  } catch {
    return 0
  }
}

/** The bytes of a file from `offset` to its end, as text; empty when it is not there. */
export const readLogFrom = (file: string, offset: number): string => {
  try {
    const fd = fs.openSync(file, "r")
    try {
      const size = fs.fstatSync(fd).size
      if (size <= offset) return ""
      const chunk = Buffer.alloc(size - offset)
      fs.readSync(fd, chunk, 0, chunk.length, offset)
      return chunk.toString("utf8")
    } finally {
      fs.closeSync(fd)
    }
  } catch {
    return ""
  }
}

/** One line of the log as `quiesce logs` shows it to people. */
const LogLine = Schema.fromJsonString(Schema.Struct({
  timestamp: Schema.String,
  level: Schema.String,
  message: Schema.Unknown,
  annotations: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown)),
  cause: Schema.optionalKey(Schema.NullOr(Schema.String))
}))
const decodeLogLine = Schema.decodeUnknownOption(LogLine)

const shown = (value: unknown) => Predicate.isString(value) ? value : JSON.stringify(value)

/** `2026-12-01T19:00:00.000Z INFO  Quiesce ready on … home=/x`; a line that is not one of ours, as it is. */
export const formatLogLine = (line: string): string => {
  const decoded = decodeLogLine(line)
  if (decoded._tag === "None") return line
  const { annotations, cause, level, message, timestamp } = decoded.value
  const fields = Object.entries(annotations ?? {}).map(([key, value]) => `${key}=${shown(value)}`)
  const messages = Array.isArray(message) ? message.map(shown).join(" ") : shown(message)
  return [timestamp, level.padEnd(5), messages, ...fields].join(" ") + (cause === undefined || cause === null ? "" : `\n${cause}`)
}
