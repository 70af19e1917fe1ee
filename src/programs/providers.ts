import { Effect, Layer } from "effect"
import { join } from "node:path"
import type { ProviderConfig, QuiesceConfig } from "../domain/config.ts"
import { ProviderRegistrationRefused } from "../domain/errors.ts"
import type { Home } from "../services/Home.ts"
import * as PluginProvider from "../layers/providers/plugin/PluginProvider.ts"
import * as ShellProvider from "../layers/providers/shell/ShellProvider.ts"
import type { ProviderRegistry } from "../services/ProviderRegistry.ts"
import { optionalPackageProblem } from "./optionalPackages.ts"

/**
 * An agent CLI's adapter, loaded only when a provider of its kind is configured: a daemon that
 * serves the shell alone never loads the others' code.
 */
const loadedWhenConfigured = <M>(
  load: () => Promise<M>,
  layer: (module: M) => Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry>
): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> => Layer.unwrap(Effect.map(Effect.promise(load), layer))

/** The adapter layer that serves one configured provider id; shell and plugin providers keep their sessions under `pluginHome`. */
export const providerLayer = (
  provider: string,
  config: ProviderConfig,
  pluginHome: string
): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> => {
  switch (config.kind) {
    case "shell":
      // The shell plugin keeps its transcripts in its own `shell/` folder under the home it is given.
      return ShellProvider.layer({ provider, home: pluginHome })
    case "plugin":
      return PluginProvider.layer({
        provider,
        plugin: { command: config.command, args: config.args ?? [], env: config.env },
        home: join(pluginHome, provider),
        closeGrace: config.closeGrace,
        requestTimeout: config.requestTimeout
      })
    case "acp":
      // The ACP SDK is an optional dependency, loaded only when an ACP provider is configured.
      return Layer.unwrap(
        Effect.tryPromise({
          try: () => import("../layers/providers/acp/AcpProvider.ts"),
          catch: (error) =>
            new ProviderRegistrationRefused({
              provider,
              message: `The acp provider ${optionalPackageProblem(["@agentclientprotocol/sdk", "zod"], error)}`
            })
        }).pipe(Effect.map((AcpProvider) => AcpProvider.layer({ provider, ...config, args: config.args ?? [] })))
      )
    case "codex":
      return loadedWhenConfigured(
        () => import("../layers/providers/codex/CodexProvider.ts"),
        (CodexProvider) => CodexProvider.layer({ provider, ...config })
      )
    case "pi":
    case "omp":
      return loadedWhenConfigured(
        () => import("../layers/providers/pi/PiProvider.ts"),
        (PiProvider) => PiProvider.layer({ provider, variant: config.kind, ...config })
      )
    case "claude":
      return loadedWhenConfigured(
        () => import("../layers/providers/claude/ClaudeProvider.ts"),
        (ClaudeProvider) => ClaudeProvider.layer({ provider, ...config })
      )
    case "opencode":
      return loadedWhenConfigured(
        () => import("../layers/providers/opencode/OpenCodeProvider.ts"),
        (OpenCodeProvider) => OpenCodeProvider.layer({ provider, ...config })
      )
  }
}

/** Every configured provider, each registered under its id. */
export const providersLayer = (config: QuiesceConfig, home: Home["Service"]): Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry> =>
  Layer.mergeAll(
    Layer.empty,
    ...Object.entries(config.providers).map(([id, entry]) =>
      // A cluster's runners may share where these providers keep their sessions.
      providerLayer(id, entry, config.cluster?.pluginHome ?? home.pluginHome)
    )
  )
