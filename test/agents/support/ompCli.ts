/**
 * Oh My Pi (`@oh-my-pi/pi-coding-agent`, pinned with the Bun it runs on in scripts/agentClis.ts) as
 * the real-CLI tests drive it: `bun omp --mode rpc` with its own HOME, whose `~/.omp/agent/models.yml`
 * adds a provider for the fake model (OpenAI chat completions) on loopback, selected with
 * `--provider` / `--model`.
 *
 * OMP 18.2's shell tool is `bash` ({ command, async? }); `async: true` (the `async.enabled` setting
 * is on by default) backgrounds the command as a job of the session, whose result OMP delivers to
 * the conversation when it ends. The job runs inside OMP's process group.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import * as PiProvider from "../../../src/layers/providers/pi/PiProvider.ts"
import { chatCompletions } from "./fakeModel/chatCompletions.ts"
import { fakeModelId, fakeProvider, modelsConfig } from "./piCli.ts"
import type { Launch, RealCli } from "./realAgent.ts"

export const ompCli: RealCli = {
  cli: "omp",
  provider: "omp",
  neverReleasedBecause: "OMP 18.2.3's get_state lacks isSettled and hasPendingAsyncWork, so its probe never permits",
  dialects: [chatCompletions],
  shell: { name: "bash", input: (command) => ({ command, async: true }) },
  startJob: (command) => `RUN: ${command}`,
  launch: ({ binary, home, model }): Launch => {
    const userHome = join(home, "omp-home")
    const agentDir = join(userHome, ".omp", "agent")
    mkdirSync(agentDir, { recursive: true })
    writeFileSync(join(agentDir, "models.yml"), modelsConfig(model))
    // Bun is installed beside OMP; OMP starts helpers with `bun` too, so it goes on PATH.
    const bin = dirname(binary)
    return {
      command: join(bin, "bun"),
      args: [binary, "--mode", "rpc", "--provider", fakeProvider, "--model", fakeModelId],
      env: { HOME: userHome, PATH: `${bin}:${process.env["PATH"] ?? ""}`, PI_NO_EMBEDDINGS: "1" }
    }
  },
  layer: (launch, onSpawn) =>
    PiProvider.layer({
      provider: "omp",
      variant: "omp",
      command: launch.command,
      args: launch.args,
      env: launch.env,
      closeGrace: "3 seconds",
      onSpawn
    })
}
