/**
 * The Codex adapter (P3): `codex app-server`, one process per live runtime.
 *
 * @module
 */
export { type CodexProviderOptions, defaultMethods, layer, makeCodexClient } from "../../layers/providers/codex/CodexProvider.ts"
