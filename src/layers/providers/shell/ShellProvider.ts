/**
 * The `shell` reference provider (P8): each prompt is a shell command run in the agent's working
 * directory, its transcript kept under `home`: the plugin provider running the plugin that ships
 * in this package.
 */
import type { Layer } from "effect"
import * as path from "node:path"
import type { ProviderRegistrationRefused } from "../../../domain/errors.ts"
import { packageRoot, runsFromSources } from "../../../domain/version.ts"
import type { ProviderRegistry } from "../../../services/ProviderRegistry.ts"
import * as PluginProvider from "../plugin/PluginProvider.ts"

/** Where the shell plugin this package ships is: run it with Node.js (`process.execPath`). */
export const pluginPath: string = path.join(packageRoot, runsFromSources ? "plugins/shell/main.ts" : "dist/plugins/shell/main.cjs")

/** Options of the shell provider. */
export interface ShellProviderOptions {
  /** The provider id agents name; default `"shell"`. */
  readonly provider?: string | undefined
  /** The folder under which the plugin keeps its transcripts (in `shell/`), so a released agent resumes. */
  readonly home: string
}

/** Registers the shell provider with the `ProviderRegistry`. */
export const layer = (options: ShellProviderOptions): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> =>
  PluginProvider.layer({
    provider: options.provider ?? "shell",
    plugin: { command: process.execPath, args: [pluginPath] },
    home: options.home
  })
