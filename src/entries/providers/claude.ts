/**
 * The Claude Code adapter (P2): `claude` in stream-JSON mode, one process per live runtime.
 *
 * @module
 */
export { type ClaudeProviderOptions, defaultArgs, defaultEnv, layer, makeClaudeClient } from "../../layers/providers/claude/ClaudeProvider.ts"
