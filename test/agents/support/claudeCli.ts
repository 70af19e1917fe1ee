/**
 * Claude Code (`@anthropic-ai/claude-code`, pinned in scripts/agentClis.ts) as the real-CLI tests
 * drive it: headless stream-json, its config and temp files under the test's home, every model
 * request sent to the fake model (Anthropic Messages) on loopback with a dummy key, and no
 * telemetry, update checks or other traffic.
 *
 * The scenario's prompts run the Bash tool, allowed up front (`--allowedTools Bash`) so no
 * permission prompt waits for an answer; the adapter still passes `--permission-prompt-tool stdio`.
 * A background job is the Bash tool with `run_in_background: true`.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import * as ClaudeProvider from "../../../src/layers/providers/claude/ClaudeProvider.ts"
import { anthropicMessages } from "./fakeModel/anthropic.ts"
import type { Launch, RealCli } from "./realAgent.ts"

export const claudeCli: RealCli = {
  cli: "claude",
  provider: "claude",
  dialects: [anthropicMessages],
  shell: {
    name: "Bash",
    input: (command) => ({ command, run_in_background: true, description: "a gated background job" })
  },
  startJob: (command) => `RUN: ${command}`,
  launch: ({ binary, home, model }): Launch => {
    const config = join(home, "claude")
    const temp = join(home, "tmp")
    mkdirSync(config, { recursive: true })
    mkdirSync(temp, { recursive: true })
    return {
      command: binary,
      args: [...ClaudeProvider.defaultArgs, "--allowedTools", "Bash"],
      env: {
        HOME: home,
        CLAUDE_CONFIG_DIR: config,
        // Task output files and sockets go under the home, which the test removes.
        TMPDIR: temp,
        ANTHROPIC_BASE_URL: model.origin,
        ANTHROPIC_API_KEY: "fake-key",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_ERROR_REPORTING: "1"
      }
    }
  },
  layer: (launch, onSpawn) =>
    ClaudeProvider.layer({
      command: launch.command,
      args: launch.args,
      env: launch.env,
      closeGrace: "3 seconds",
      onSpawn
    })
}
