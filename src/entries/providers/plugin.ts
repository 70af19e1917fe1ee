/**
 * The plugin provider (P7): a provider written in any language, run as a child process that
 * speaks the plugin protocol (newline-delimited JSON on stdio; see docs/plugin-protocol.md).
 *
 * @module
 */
export { layer, makePluginClient, type PluginProviderOptions } from "../../layers/providers/plugin/PluginProvider.ts"
