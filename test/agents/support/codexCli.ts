/**
 * The Codex CLI (`@openai/codex`, pinned in scripts/agentClis.ts) as the real-CLI tests drive it:
 * `codex app-server` with its own CODEX_HOME, whose config.toml points a model provider at the
 * fake model (OpenAI Responses) on loopback, never asks for approval and runs commands unsandboxed.
 *
 * The shell tool of 0.171.0 is unified exec's `exec_command` ({ cmd, yield_time_ms, … }): a command
 * still running when `yield_time_ms` elapses is left running as a session the server lists under
 * `thread/backgroundTerminals/list`, which is the background job the scenario needs.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as CodexProvider from "../../../src/layers/providers/codex/CodexProvider.ts"
import { responses } from "./fakeModel/responses.ts"
import type { Launch, RealCli } from "./realAgent.ts"

/** The variable the config's `env_key` names; the fake model accepts any key. */
const keyVariable = "QUIESCE_FAKE_MODEL_KEY"

const configToml = (origin: string) =>
  `# Written by the Quiesce real-CLI tests: every model request goes to the fake model on loopback.
model = "fake-model"
model_provider = "quiesce-fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
unified_exec = true

[model_providers.quiesce-fake]
name = "Quiesce fake model"
base_url = "${origin}/v1"
wire_api = "responses"
env_key = "${keyVariable}"
request_max_retries = 0
stream_max_retries = 0
`

export const codexCli: RealCli = {
  cli: "codex",
  provider: "codex",
  dialects: [responses],
  shell: {
    name: "exec_command",
    // Yield after half a second: a command still running then stays a background terminal.
    input: (command) => ({ cmd: command, yield_time_ms: 500 })
  },
  startJob: (command) => `RUN: ${command}`,
  launch: ({ binary, home, model }): Launch => {
    const codexHome = join(home, "codex")
    mkdirSync(codexHome, { recursive: true })
    writeFileSync(join(codexHome, "config.toml"), configToml(model.origin))
    return {
      command: binary,
      args: ["app-server"],
      // Codex runs commands in login shells (`bash -lc`): with the machine's HOME they would source
      // its profile (a pyenv rehash, say), which a test that ends a command group can leave locked.
      env: { CODEX_HOME: codexHome, HOME: home, [keyVariable]: "fake-key" }
    }
  },
  layer: (launch, onSpawn) =>
    CodexProvider.layer({
      command: launch.command,
      args: launch.args,
      env: launch.env,
      closeGrace: "3 seconds",
      onSpawn
    })
}
