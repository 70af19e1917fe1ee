#!/usr/bin/env node
// The `quiesce` command: runs the CLI's bundle (dist/cli, made by npm run build and by npm ci).
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const requiredMajor = 24

if (Number(process.versions.node.split(".")[0]) < requiredMajor) {
  // In a clone of the project, the project's own Node (its `node` devDependency) runs the command.
  const pinned = fileURLToPath(new URL("../node_modules/node/bin/node", import.meta.url))
  if (!existsSync(pinned)) {
    console.error(`quiesce needs Node.js ${requiredMajor} or newer; this is Node.js ${process.version}`)
    process.exit(1)
  }
  const child = spawn(pinned, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: "inherit" })
  // Ctrl-C and a closed terminal signal the whole foreground group, the child too: this process
  // only waits for it (passing them on would be a second signal, which forces the daemon's exit).
  // SIGTERM is sent to a pid, so it is passed on. The child's exit is this one's.
  for (const signal of ["SIGINT", "SIGHUP"]) process.on(signal, () => {})
  process.on("SIGTERM", () => child.kill("SIGTERM"))
  child.on("exit", (code, signal) => {
    if (signal === null) process.exit(code ?? 1)
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
  })
} else {
  // V8's code cache for the bundle, kept between runs: a client command starts in a fraction of the time.
  const { enableCompileCache } = await import("node:module")
  enableCompileCache()
  const bundle = new URL("../dist/cli/quiesce.mjs", import.meta.url)
  if (!existsSync(bundle)) {
    console.error("quiesce is not built here: run npm run build (npm ci does it too)")
    process.exit(1)
  }
  const cli = await import(bundle.href)
  cli.main()
}
