/**
 * The Pi coding agent (`@mariozechner/pi-coding-agent`, pinned in scripts/agentClis.ts) as the
 * real-CLI tests drive it: `pi --mode rpc` on this Node (the package's bin is a Node script), with
 * its own HOME and agent dir, whose models.json adds a provider for the fake model (OpenAI chat
 * completions) on loopback, selected with `--provider` / `--model`.
 *
 * Pi 0.73's shell tool is `bash` ({ command, timeout? }); it has no background jobs of its own. A
 * command ending in `&` returns at once, and the job it leaves runs in a process group of its own
 * (Pi starts every command detached), which `get_state` knows nothing about.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as PiProvider from "../../../src/layers/providers/pi/PiProvider.ts"
import type { FakeModel } from "./fakeModel/server.ts"
import { chatCompletions } from "./fakeModel/chatCompletions.ts"
import type { Launch, RealCli } from "./realAgent.ts"

/** The provider and model the models.json adds, as `--provider` / `--model` select them. */
export const fakeProvider = "quiesce-fake"
export const fakeModelId = "fake-model"

/** A models.json (Pi) / models.yml (OMP; JSON is YAML) pointing one provider at the fake model. */
export const modelsConfig = (model: FakeModel): string =>
  JSON.stringify({
    providers: {
      [fakeProvider]: {
        baseUrl: `${model.origin}/v1`,
        api: "openai-completions",
        apiKey: "fake-key",
        models: [{ id: fakeModelId }]
      }
    }
  })

export const piCli: RealCli = {
  cli: "pi",
  provider: "pi",
  dialects: [chatCompletions],
  shell: { name: "bash", input: (command) => ({ command }) },
  // Pi has no background option: the shell's own `&`, with output detached so the tool returns.
  startJob: (command) => `RUN: (${command}) > /dev/null 2>&1 &`,
  launch: ({ binary, home, model }): Launch => {
    // HOME apart from the working directory (the agent's cwd is `home`).
    const userHome = join(home, "pi-home")
    const agentDir = join(userHome, ".pi", "agent")
    mkdirSync(agentDir, { recursive: true })
    writeFileSync(join(agentDir, "models.json"), modelsConfig(model))
    return {
      // The bin is a `#!/usr/bin/env node` script: run it on this Node, whatever `node` is on PATH.
      command: process.execPath,
      args: [binary, "--mode", "rpc", "--provider", fakeProvider, "--model", fakeModelId],
      env: { HOME: userHome, PI_CODING_AGENT_DIR: agentDir, PI_OFFLINE: "1" }
    }
  },
  layer: (launch, onSpawn) =>
    PiProvider.layer({
      provider: "pi",
      variant: "pi",
      command: launch.command,
      args: launch.args,
      env: launch.env,
      closeGrace: "3 seconds",
      onSpawn
    })
}
