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
  // effect/cli's key=value check reads "Expected: Invalid key=value format. Expected format: …".
  if (error._tag === "InvalidValue" && error.kind === "flag" && error.expected.startsWith("Invalid key=value format")) {
    const empty = error.expected.includes("non-empty")
    return `--${error.option} takes key=value${empty ? ", both non-empty" : ""}, got ${JSON.stringify(error.value)}`
  }
  const first = error.message.split("\n")[0]!.trim()
  const suggestions = Predicate.hasProperty(error, "suggestions") && Array.isArray(error.suggestions)
    ? error.suggestions.filter(Predicate.isString)
    : []
  return suggestions.length === 0 ? first : `${first} (did you mean ${suggestions.join(" or ")}?)`
}

/** A word of a command line as a shell would need it: quoted when it holds more than safe characters. */
const shellWord = (word: string) => /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`

/**
 * The word of the command line that is not a flag although it starts with "-", and the flags the
 * parser read in it: one clustered short word ("-n x" read as -n, "- ", -x) is one mistake, not
 * one per letter. Undefined when the unknown flags are ordinary unknown flags (`--jsn`).
 */
const valueLikeWord = (args: ReadonlyArray<string>, options: ReadonlyArray<string>) => {
  const end = args.indexOf("--")
  const words = end === -1 ? args : args.slice(0, end)
  return words.find((word) =>
    /^-[^-]/.test(word) && (/\s/.test(word) || options.filter((option) => word.slice(1).includes(option.slice(1))).length > 1)
  )
}

/** The lines for the problems of a command line that does not parse, one per mistake. */
export const problemLines = (
  errors: ReadonlyArray<CliError.NonShowHelpErrors>,
  commandPath: ReadonlyArray<string>,
  args: ReadonlyArray<string>
): ReadonlyArray<string> => {
  const unknown = errors.filter((error): error is CliError.UnrecognizedOption => error._tag === "UnrecognizedOption")
  const word = valueLikeWord(args, unknown.map((error) => error.option))
  if (word === undefined) return errors.map(oneLine)
  const end = args.indexOf("--")
  const fixed = [...args.filter((arg, i) => arg !== word && (end === -1 || i < end)), "--", word, ...(end === -1 ? [] : args.slice(end + 1))]
  const inWord = (error: CliError.UnrecognizedOption) => error.option.length === 2 && word.slice(1).includes(error.option.slice(1))
  return [
    `${JSON.stringify(word)} is not a flag of ${commandPath.join(" ")}: to pass a value that starts with -, put -- before it: ${
      [commandPath[0] ?? "quiesce", ...fixed].map(shellWord).join(" ")
    }`,
    ...errors.filter((error) => !(error._tag === "UnrecognizedOption" && inWord(error))).map(oneLine)
  ]
}

/**
 * A command line that does not parse gets one line per problem and where to read more, on stderr,
 * instead of the whole help page; help and the version print as usual. `args` is the command line,
 * to name a word the parser split into flags.
 */
export const presenterFor = (args: ReadonlyArray<string>) =>
  CliOutput.layerPresenter({
    present: (event) =>
      event._tag === "InvalidInvocation"
        ? Effect.forEach(problemLines(event.errors, event.commandPath, args), (line) => Console.error(`quiesce: ${line}`), {
          discard: true
        }).pipe(Effect.andThen(Console.error(`quiesce: see: ${event.commandPath.join(" ")} --help`)))
        : CliOutput.defaultPresenter.present(event)
  })
