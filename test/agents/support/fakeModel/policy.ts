/**
 * What the fake model answers. Every dialect reduces a request to a `ModelRequest` and renders the
 * `ModelTurn` the policy picks, so one script drives every CLI.
 */

export type ModelTurn =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "tool"; readonly name: string; readonly input: Readonly<Record<string, unknown>> }

export interface ModelRequest {
  readonly dialect: "chat" | "responses" | "anthropic"
  readonly model: string
  /** The text of the newest user message. */
  readonly lastUserText: string
  /** True when the newest message is a tool's result: the model now closes its turn. */
  readonly afterToolResult: boolean
  /** The names of the tools the request offers. */
  readonly toolNames: ReadonlyArray<string>
  readonly streaming: boolean
}

export type ModelPolicy = (request: ModelRequest) => ModelTurn

/** How a CLI's shell tool is called: its name and the arguments for one command. */
export interface ShellTool {
  readonly name: string
  readonly input: (command: string) => Readonly<Record<string, unknown>>
}

/**
 * The script every real-CLI test uses:
 * - a prompt with a line `RUN: <command>` calls the CLI's shell tool with that command, when the
 *   request offers the tool;
 * - after a tool result the model ends its turn with "done";
 * - anything else is echoed, as `echo: <text>`. Side requests (titles, summaries) get the same.
 */
export const scriptedPolicy = (shell: ShellTool): ModelPolicy => (request) => {
  if (request.afterToolResult) return { kind: "text", text: "done" }
  const run = /^RUN: (.+)$/m.exec(request.lastUserText)
  if (run !== null && request.toolNames.includes(shell.name)) {
    return { kind: "tool", name: shell.name, input: shell.input(run[1]!) }
  }
  return { kind: "text", text: `echo: ${request.lastUserText.trim().split("\n").at(-1) ?? ""}` }
}
