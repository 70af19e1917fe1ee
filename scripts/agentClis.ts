/**
 * The agent CLIs the real-CLI tests drive, pinned. `install-agents.ts` installs each into its own
 * folder under the cache, and the tests find their binaries through `agentCliBinary`.
 */
import * as path from "node:path"
import { existsSync } from "node:fs"

export interface AgentCli {
  readonly name: "claude" | "codex" | "opencode" | "pi" | "omp"
  /** Packages installed together into the CLI's folder. */
  readonly packages: ReadonlyArray<string>
  /** The executable, relative to the CLI's folder. */
  readonly bin: string
}

export const agentClis: ReadonlyArray<AgentCli> = [
  { name: "claude", packages: ["@anthropic-ai/claude-code@2.1.332"], bin: "node_modules/.bin/claude" },
  { name: "codex", packages: ["@openai/codex@0.171.0"], bin: "node_modules/.bin/codex" },
  { name: "opencode", packages: ["opencode-ai@1.18.33"], bin: "node_modules/.bin/opencode" },
  { name: "pi", packages: ["@mariozechner/pi-coding-agent@0.73.1"], bin: "node_modules/.bin/pi" },
  { name: "omp", packages: ["@oh-my-pi/pi-coding-agent@18.2.3", "bun@1.4.5"], bin: "node_modules/.bin/omp" }
]

const repoRoot = path.resolve(import.meta.dirname, "..")

/** `QUIESCE_AGENTS_CACHE`, or `.quiesce/agents` in the repository (ignored by git). */
export const agentsCacheDir = (): string =>
  process.env["QUIESCE_AGENTS_CACHE"] ?? path.join(repoRoot, ".quiesce", "agents")

/** A CLI's folder: one per pinned package set, so a version bump installs afresh. */
export const agentCliDir = (cli: AgentCli): string =>
  path.join(agentsCacheDir(), `${cli.name}-${cli.packages.map((p) => p.replace(/[@/]/g, "_")).join("+")}`)

/** The installed binary, or why it is not there. */
export const agentCliBinary = (name: AgentCli["name"]): { readonly path: string } | { readonly missing: string } => {
  const cli = agentClis.find((c) => c.name === name)
  if (cli === undefined) return { missing: `unknown agent CLI ${name}` }
  const bin = path.join(agentCliDir(cli), cli.bin)
  return existsSync(bin)
    ? { path: bin }
    : { missing: `${cli.packages.join(" ")} is not installed at ${bin}; run npm run install:agents` }
}
