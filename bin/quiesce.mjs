#!/usr/bin/env node
// The `quiesce` command: runs the CLI's bundle (dist/cli, made by npm run build and by npm ci).
// bin/quiesce, a POSIX sh script, is the same command for PATH: it execs the project's Node 24
// directly, so it never starts an older Node first.
import { existsSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const requiredMajor = 24

if (Number(process.versions.node.split(".")[0]) < requiredMajor) {
  // In a clone of the project, the project's own Node (its `node` devDependency) runs the command.
  const pinned = fileURLToPath(new URL("../node_modules/node/bin/node", import.meta.url))
  if (!existsSync(pinned)) {
    console.error(`quiesce needs Node.js ${requiredMajor} or newer; this is Node.js ${process.version}`)
    process.exit(1)
  }
  const argv = [pinned, fileURLToPath(import.meta.url), ...process.argv.slice(2)]
  if (typeof process.execve === "function") {
    // Node 22.15 and 23.11 replace this process with the project's Node: same pid, nothing left behind.
    process.execve(pinned, argv, process.env)
  } else {
    // An older Node cannot exec: it starts the project's Node as a child and waits for it.
    // Ctrl-C and a closed terminal signal the whole foreground group, the child too: this process
    // only waits for it (passing them on would be a second signal, which forces the daemon's exit).
    // SIGTERM is sent to a pid, so it is passed on. The child's exit is this one's.
    const { spawn } = await import("node:child_process")
    const child = spawn(pinned, argv.slice(1), { stdio: "inherit" })
    for (const signal of ["SIGINT", "SIGHUP"]) process.on(signal, () => {})
    process.on("SIGTERM", () => child.kill("SIGTERM"))
    child.on("exit", (code, signal) => {
      if (signal === null) process.exit(code ?? 1)
      process.removeAllListeners(signal)
      process.kill(process.pid, signal)
    })
  }
} else if (process.argv.length === 3 && process.argv[2] === "--version") {
  // The version alone needs no CLI: it is printed without loading the bundle.
  console.log(`quiesce v${JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version}`)
} else {
  // V8's code cache for the bundle, kept between runs: a command starts in a fraction of the time.
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
