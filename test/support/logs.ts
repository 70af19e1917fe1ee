import { Effect, Logger, References } from "effect"
import { showOnFailure } from "./failureOutput.ts"

export interface LogEntry {
  readonly level: string
  readonly message: string
  readonly annotations: Readonly<Record<string, unknown>>
}

/** Runs an effect with every log line, debug included, recorded into `entries`. */
export const recordingLogs = (entries: Array<LogEntry>) => {
  const logger = Logger.make<unknown, void>((options) => {
    const message = Array.isArray(options.message) ? options.message.map(String).join(" ") : String(options.message)
    entries.push({
      level: options.logLevel,
      message,
      annotations: options.fiber.getRef(References.CurrentLogAnnotations)
    })
  })
  return <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(
      Effect.provideService(Logger.CurrentLoggers, new Set([logger])),
      Effect.provideService(References.MinimumLogLevel, "Debug")
    )
}

/**
 * Runs an effect with its log lines (Info and above, as a daemon logs) kept in memory instead of
 * printed, and printed only if the running test fails. For tests that do not assert on logs.
 */
export const quietLogs = (label = "logs") => {
  const lines: Array<string> = []
  showOnFailure(label, () => lines.join("\n"))
  const logger = Logger.map(Logger.formatLogFmt, (line) => {
    lines.push(line)
    // A bounded tail: the oldest lines go once there are many.
    if (lines.length > 2_000) lines.splice(0, lines.length - 2_000)
  })
  return <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provideService(effect, Logger.CurrentLoggers, new Set([logger]))
}

/**
 * For the scope, what this process writes to its stderr directly (not through a logger: the
 * daemon's log file warning it cannot write, say) is kept instead of printed, and printed only if
 * the running test fails.
 */
export const keptStderr = (label = "stderr") =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const written: Array<string> = []
      showOnFailure(label, () => written.join(""))
      const write = process.stderr.write
      process.stderr.write = ((chunk: string | Uint8Array, ...rest: Array<unknown>) => {
        written.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString())
        const done = rest.find((arg) => typeof arg === "function")
        if (typeof done === "function") queueMicrotask(() => done())
        return true
      }) as typeof process.stderr.write
      return { written, write }
    }),
    ({ write }) => Effect.sync(() => (process.stderr.write = write))
  ).pipe(Effect.map(({ written }) => written))
