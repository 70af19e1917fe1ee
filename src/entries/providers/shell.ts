/**
 * The `shell` reference provider (P8): each prompt is a shell command run in the agent's working
 * directory, its transcript kept under `home`. It is the plugin provider running the plugin that
 * ships in this package.
 *
 * @module
 */
export { layer, pluginPath, type ShellProviderOptions } from "../../layers/providers/shell/ShellProvider.ts"
