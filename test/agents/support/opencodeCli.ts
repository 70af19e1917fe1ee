/**
 * The pinned OpenCode CLI (`opencode-ai@1.18.33`, a native binary) as the real-CLI tests and the
 * bench drive it: `opencode serve` per runtime, pointed at the fake model through an
 * `@ai-sdk/openai-compatible` provider (bundled in the binary).
 * Every directory it writes (data, config, state, cache, home) is under the temp home.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as OpenCode from "../../../src/layers/providers/opencode/OpenCodeProvider.ts"
import { chatCompletions } from "./fakeModel/chatCompletions.ts"
import type { RealCli } from "./realAgent.ts"

/** The adapter options a test may vary (the launch itself comes from `launch`). */
export type OpenCodeTestOptions = Pick<OpenCode.OpenCodeProviderOptions, "trustMissingInventories" | "onServer"> & {
  /** OpenCode's permission for its `bash` tool. Default "allow"; "ask" makes every command wait for an answer. */
  readonly bash?: "allow" | "ask" | undefined
  /**
   * Sets `OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=1`: the `task` tool gains `background: true`,
   * which runs a subagent (a child session) while the parent's turn ends.
   */
  readonly backgroundSubagents?: boolean | undefined
}

export const makeOpencodeCli = (
  { backgroundSubagents = false, bash = "allow", ...options }: OpenCodeTestOptions = {}
): RealCli => ({
  cli: "opencode",
  provider: "opencode",
  configOptions: options.trustMissingInventories === undefined
    ? undefined
    : { trustMissingInventories: options.trustMissingInventories },
  dialects: [chatCompletions],
  // The `bash` tool of 1.18.33 takes `command` (required), `timeout` and `workdir`.
  shell: { name: "bash", input: (command) => ({ command }) },
  // The tool waits for the command's output; a job backgrounded with its output redirected lets it return.
  startJob: (command) => `RUN: (${command}) > /dev/null 2>&1 &`,
  launch: ({ binary, home, model }) => {
    const configDir = join(home, "opencode-launch")
    mkdirSync(configDir, { recursive: true })
    const config = join(configDir, "opencode.json")
    writeFileSync(config, JSON.stringify({
      $schema: "https://opencode.ai/config.json",
      autoupdate: false,
      share: "disabled",
      model: "fake/fake-model",
      small_model: "fake/fake-model",
      provider: {
        fake: {
          npm: "@ai-sdk/openai-compatible",
          name: "Fake model",
          options: { baseURL: `${model.origin}/v1`, apiKey: "quiesce-fake-key" },
          models: { "fake-model": { name: "Fake model" } }
        }
      },
      permission: { bash }
    }, null, 2))
    return {
      command: binary,
      args: ["serve", "--hostname", "127.0.0.1", "--port", "0"],
      env: {
        HOME: home,
        XDG_DATA_HOME: join(home, ".local", "share"),
        XDG_CONFIG_HOME: join(home, ".config"),
        XDG_STATE_HOME: join(home, ".local", "state"),
        XDG_CACHE_HOME: join(home, ".cache"),
        OPENCODE_CONFIG: config,
        // Without these it fetches the models.dev catalog and checks for updates over the network.
        OPENCODE_DISABLE_MODELS_FETCH: "1",
        OPENCODE_DISABLE_AUTOUPDATE: "1",
        OPENCODE_DISABLE_SHARE: "1",
        OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
        // At start-up it installs `@opencode-ai/plugin` into the config dir with npm (even with
        // OPENCODE_PURE). Pointing the registry at a closed loopback port makes that fail at once;
        // the server runs on without it, so the tests touch no network.
        npm_config_registry: "http://127.0.0.1:9/",
        ...(backgroundSubagents ? { OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS: "1" } : {})
      }
    }
  },
  layer: (launch, onSpawn) =>
    OpenCode.layer({
      command: launch.command,
      args: launch.args,
      env: launch.env,
      onSpawn,
      closeGrace: "2 seconds",
      ...options
    })
})

/**
 * The CLI with `trustMissingInventories` on: 1.18.33 serves no v2 inbox or shell list, so with the
 * default (off) its probe never permits a release. See docs/providers/opencode.md.
 */
export const opencodeCli: RealCli = makeOpencodeCli({ trustMissingInventories: true })
