/**
 * Installs the pinned agent CLIs into the cache folder, each into its own prefix, in parallel.
 * An installed CLI is skipped. Exits non-zero when any install fails, naming it.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync } from "node:fs"
import * as path from "node:path"
import { agentCliDir, agentClis, type AgentCli } from "./agentClis.ts"

const only = process.argv.slice(2)

const install = (cli: AgentCli): Promise<string | undefined> => {
  const dir = agentCliDir(cli)
  if (existsSync(path.join(dir, cli.bin))) return Promise.resolve(undefined)
  mkdirSync(dir, { recursive: true })
  return new Promise((resolve) => {
    const child = spawn(
      "npm",
      ["install", "--prefix", dir, "--no-audit", "--no-fund", "--no-save", "--loglevel=error", ...cli.packages],
      { stdio: ["ignore", "inherit", "inherit"] }
    )
    child.on("error", (error) => resolve(`${cli.name}: ${error.message}`))
    child.on("exit", (code) => {
      if (code !== 0) resolve(`${cli.name}: npm install exited with ${code}`)
      else if (!existsSync(path.join(dir, cli.bin))) resolve(`${cli.name}: installed, but ${cli.bin} is missing`)
      else resolve(undefined)
    })
  })
}

const selected = agentClis.filter((cli) => only.length === 0 || only.includes(cli.name))
const failures = (await Promise.all(selected.map(async (cli) => {
  const started = Date.now()
  const failure = await install(cli)
  console.log(`${cli.name.padEnd(9)} ${failure === undefined ? "ready" : "FAILED"} (${Date.now() - started} ms) ${agentCliDir(cli)}`)
  return failure
}))).filter((f) => f !== undefined)

if (failures.length > 0) {
  console.error(failures.join("\n"))
  process.exit(1)
}
