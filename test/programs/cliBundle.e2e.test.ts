/**
 * The `quiesce` command as installed: bin/quiesce.mjs running the CLI's bundle (npm ci builds it).
 * A client command loads only the client: the daemon's providers, store and server are in chunks
 * it never imports. An older Node is told in one line which Node the command needs.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const root = join(import.meta.dirname, "../..")
const bin = join(root, "bin/quiesce.mjs")
const bundleDir = join(root, "dist/cli")
const version: string = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version

/** The files a module imports statically (`import … from "./x.mjs"`), transitively. */
const staticClosure = (file: string, seen: Set<string> = new Set()): Set<string> => {
  if (seen.has(file)) return seen
  seen.add(file)
  const source = readFileSync(join(bundleDir, file), "utf8")
  for (const match of source.matchAll(/(?:^|[;}\s])import\s*(?:[^"'();]*?from\s*)?["']\.\/([\w.-]+\.mjs)["']/g)) {
    staticClosure(match[1]!, seen)
  }
  return seen
}

/** An installed Node older than 24, to run the command with; the machine's own, when it is one. */
const olderNode = ["/usr/bin/node", "/usr/local/bin/node"].find((candidate) => {
  if (!existsSync(candidate)) return false
  const run = spawnSync(candidate, ["-p", "process.versions.node"], { encoding: "utf8" })
  return run.status === 0 && Number(run.stdout.split(".")[0]) < 24
})

describe("the quiesce command", () => {
  it("is built: npm ci (prepare) or npm run build made dist/cli/quiesce.mjs", () => {
    expect(existsSync(join(bundleDir, "quiesce.mjs")), "run npm run build").toBe(true)
  })

  it("prints its version from the bundle", () => {
    const run = spawnSync(process.execPath, [bin, "--version"], { encoding: "utf8" })
    expect(run.status).toBe(0)
    expect(run.stdout.trim()).toBe(`quiesce v${version}`)
  })

  it("loads no provider, store or server for a client command", () => {
    const loaded = [...staticClosure("quiesce.mjs")].map((file) => readFileSync(join(bundleDir, file), "utf8")).join("\n")
    expect(staticClosure("quiesce.mjs").size, "the entry imports its shared chunks").toBeGreaterThan(1)
    expect(loaded).not.toMatch(/["']node:sqlite["']/)
    // An ACP method name the SDK (and only the ACP provider's chunk) carries.
    expect(loaded).not.toContain('"session/set_mode"')
    expect(loaded).not.toMatch(/["']node:http["'][^]*createServer\(/)
    // The daemon's code is there, in a chunk of its own.
    const all = readdirSync(bundleDir).filter((file) => file.endsWith(".mjs")).map((file) => readFileSync(join(bundleDir, file), "utf8"))
    expect(all.join("\n")).toMatch(/["']node:sqlite["']/)
    expect(all.join("\n")).toContain('"session/set_mode"')
  })

  it.skipIf(olderNode === undefined)("on an older Node without the project's own, says in one line which Node it needs", () => {
    // A copy of the command outside the project: no node_modules/node beside it.
    const dir = mkdtempSync(join(tmpdir(), "quiesce-bin-"))
    try {
      mkdirSync(join(dir, "bin"))
      copyFileSync(bin, join(dir, "bin/quiesce.mjs"))
      const run = spawnSync(olderNode!, [join(dir, "bin/quiesce.mjs"), "--version"], { encoding: "utf8" })
      expect(run.status).toBe(1)
      const lines = run.stderr.trim().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(/^quiesce needs Node\.js 24 or newer; this is Node\.js v\d+\./)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it.skipIf(olderNode === undefined)("on an older Node in the project, runs with the project's own Node 24", () => {
    const run = spawnSync(olderNode!, [bin, "--version"], { encoding: "utf8" })
    expect(run.stderr).toBe("")
    expect(run.status).toBe(0)
    expect(run.stdout.trim()).toBe(`quiesce v${version}`)
  })
})
