/** How a command line's failures reach the user: one line per problem on stderr, and the exit code. */
import { Console, Effect, Predicate } from "effect"
import { CliError, CliOutput } from "effect/cli"

/** Errors the user can act on are printed plainly; the exit code is 1. */
export const reportUserErrors = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.catchIf(
      (error): error is E & { readonly message: string } =>
        typeof error === "object" && error !== null && "message" in error && typeof error.message === "string",
      (error) =>
        // The help (and any parse error) is printed already: bare `quiesce` and --help exit 0, a
        // command line that does not parse exits 1.
        CliError.isCliError(error) && error._tag === "ShowHelp"
          ? Effect.sync(() => (process.exitCode = error.errors.length === 0 ? 0 : 1))
          : Console.error(`quiesce: ${error.message}`).pipe(Effect.andThen(Effect.sync(() => (process.exitCode = 1))))
    )
  )

/** A parse error in one line: its first line, with the parser's suggestions if it has any. */
const oneLine = (error: CliError.NonShowHelpErrors) => {
  const first = error.message.split("\n")[0]!.trim()
  const suggestions = Predicate.hasProperty(error, "suggestions") && Array.isArray(error.suggestions)
    ? error.suggestions.filter(Predicate.isString)
    : []
  return suggestions.length === 0 ? first : `${first} (did you mean ${suggestions.join(" or ")}?)`
}

/**
 * A command line that does not parse gets one line per problem and where to read more, on stderr,
 * instead of the whole help page; help and the version print as usual.
 */
export const presenter = CliOutput.layerPresenter({
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Effect.forEach(event.errors, (error) => Console.error(`quiesce: ${oneLine(error)}`), { discard: true }).pipe(
        Effect.andThen(Console.error(`quiesce: see: ${event.commandPath.join(" ")} --help`))
      )
      : CliOutput.defaultPresenter.present(event)
})
