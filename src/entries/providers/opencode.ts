/**
 * The OpenCode adapter (P4): `opencode serve` over HTTP, one server per live runtime.
 *
 * @module
 */
export { layer, makeOpenCodeClient, type OpenCodeProviderOptions } from "../../layers/providers/opencode/OpenCodeProvider.ts"
