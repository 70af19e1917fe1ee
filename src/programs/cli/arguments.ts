/** The arguments several commands share, described once for their `--help`. */
import { Argument } from "effect/cli"

/** What the agent argument is, in every command's help. */
const agentIs = "The agent's id, e.g. agent-1234 (quiesce agents list shows them)"

/** The agent a command acts on. */
export const agentArgument = Argument.String("agent").pipe(Argument.withDescription(agentIs))

/** The agent of a command that can act by label instead (`--label`): optional. */
export const agentOrLabelArgument = Argument.String("agent").pipe(
  Argument.withDescription(`${agentIs}; or give --label instead`),
  Argument.optional
)
