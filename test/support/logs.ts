import { Effect, Logger, References } from "effect"

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
