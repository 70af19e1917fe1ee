/** How every command documents itself for its `--help`. */
import { Command } from "effect/cli"

/**
 * A command's help: what it does (`description`), then examples of its use, each a command line
 * and what it does. Every command, group or leaf, is documented through this one call.
 */
export const documented = (description: string, examples: ReadonlyArray<Command.Command.Example>) =>
<const Name extends string, Input, E, R, ContextInput>(
  self: Command.Command<Name, Input, ContextInput, E, R>
): Command.Command<Name, Input, ContextInput, E, R> =>
  self.pipe(Command.withExamples(examples), Command.withDescription(description))

/**
 * A command that only groups its subcommands (`quiesce agents`, `quiesce config`): its name, its
 * help as `documented` takes it, and the subcommands.
 */
export const commandGroup = <const Name extends string, const Subcommands extends ReadonlyArray<Command.Command.SubcommandEntry>>(
  name: Name,
  description: string,
  examples: ReadonlyArray<Command.Command.Example>,
  subcommands: Subcommands
) => Command.make(name).pipe(documented(description, examples), Command.withSubcommands(subcommands))
