// npm run check:package: the package as a user gets it. Packs the project, installs the tarball
// into temporary projects outside the repository, type-checks the host examples against the
// installed declarations and runs them, then prints the figures. It proves:
// - the collector releases an idle runtime and retains a vetoed and a protected one;
// - the registry with the shell provider resumes a released runtime, and a SQLite store keeps the
//   agent and its session across two runs;
// - the optional dependencies (the ACP SDK, zod, the PostgreSQL driver, @effect/platform-node) are
//   neither installed nor loaded for the core, and their entries load once they are installed;
// - every child process the examples start is gone, and each example exits by itself;
// - the installed `quiesce` command runs a daemon, and a hub that starts one, whose shell agents
//   answer a prompt.
import { type SpawnSyncReturns, spawn, spawnSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { freePort, groupRuns, until } from "../test/support/daemonProcess.ts"

const root = fileURLToPath(new URL("..", import.meta.url))
const manifest = readJson(join(root, "package.json"))
const devDependencies = record(manifest["devDependencies"])
const version = (name: string): string => {
  const pinned = devDependencies[name]
  if (typeof pinned !== "string") throw new Error(`package.json has no devDependency ${name}`)
  return pinned
}
// Installed by none of the consumers below but the last: their entries alone load them.
const optionalPackages = ["@agentclientprotocol/sdk", "zod", "@effect/sql-pg"]
const exampleFiles = ["collector.ts", "registry.ts", "echoProvider.ts"]
const work = mkdtempSync(join(tmpdir(), "quiesce-package-"))
const figures: Array<[string, string]> = []
/** The process groups this check started (daemons, a hub), ended if it fails half way. */
const startedGroups: Array<number> = []

function readJson(file: string): Record<string, unknown> {
  return record(JSON.parse(readFileSync(file, "utf8")))
}

function record(value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error(`expected an object, got ${JSON.stringify(value)?.slice(0, 200)}`)
  return { ...value }
}

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`check failed: ${what}`)
  passed(what)
}

/** Reports what the step before proved by not throwing. */
function passed(what: string): void {
  console.log(`ok  ${what}`)
}

function run(command: string, args: ReadonlyArray<string>, cwd: string): SpawnSyncReturns<string> {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", timeout: 300_000 })
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} (in ${cwd}) exited ${result.status ?? result.signal}\n${result.stdout}\n${result.stderr}`)
  }
  return result
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`

function directoryBytes(path: string): number {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.size
  return readdirSync(path).reduce((sum, entry) => sum + directoryBytes(join(path, entry)), 0)
}

/** Each stdout line that is a JSON object, in order; the collector's own log lines are left out. */
function steps(stdout: string): ReadonlyArray<Record<string, unknown>> {
  return stdout.split("\n").filter((line) => line.startsWith("{")).map((line) => record(JSON.parse(line)))
}

function step(all: ReadonlyArray<Record<string, unknown>>, name: string, index = 0): Record<string, unknown> {
  const found = all.filter((entry) => entry["step"] === name)[index]
  if (found === undefined) throw new Error(`no step ${name} #${index} in ${JSON.stringify(all)}`)
  return found
}

/** Runs a host example on this Node, recording every module it loads; fails unless it exits by itself within the bound. */
async function runExample(project: string, file: string, args: ReadonlyArray<string> = []) {
  const loaded = join(project, `loaded-${Date.now()}.txt`)
  const child = spawn(process.execPath, ["--import", "./record-modules.mjs", file, ...args], {
    cwd: project,
    env: { ...process.env, QUIESCE_LOADED_MODULES: loaded },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const started = Date.now()
  const code = await new Promise<number | null>((resolve) => {
    const bound = setTimeout(() => {
      child.kill("SIGKILL")
      resolve(null)
    }, 60_000)
    child.on("exit", (exitCode) => {
      clearTimeout(bound)
      resolve(exitCode)
    })
  })
  if (code !== 0) throw new Error(`${file} ${code === null ? "did not exit by itself within 60 s" : `exited ${code}`}\n${stdout}\n${stderr}`)
  console.log(`ok  ${file} ${args.join(" ")} exited by itself with code 0 in ${Date.now() - started} ms`)
  const modules = readFileSync(loaded, "utf8").split("\n").filter((line) => line !== "")
  return { all: steps(stdout), modules }
}

/** The loaded modules that belong to an optional package (or to the Node platform layer, which the core never needs). */
const optionalLoaded = (modules: ReadonlyArray<string>) =>
  modules.filter((url) => [...optionalPackages, "@effect/platform-node"].some((name) => url.includes(`/node_modules/${name}/`)))

/** A consumer project: the tarball and the given packages as its dependencies, installed by npm. */
function consumer(name: string, tarball: string, extra: Record<string, string>): string {
  const project = join(work, name)
  mkdirSync(project, { recursive: true })
  writeFileSync(join(project, "package.json"), JSON.stringify({
    name: `quiesce-${name}`,
    private: true,
    type: "module",
    dependencies: { quiesce: `file:${tarball}`, effect: version("effect"), ...extra }
  }, null, 2))
  run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], project)
  return project
}

/**
 * Starts the installed `quiesce` command in a process group of its own, so that the group shows
 * whether anything of it is left; its output is collected, and its group ended if the check fails.
 */
function startCommand(bin: string, args: ReadonlyArray<string>, cwd: string) {
  const child = spawn(process.execPath, [bin, ...args], { cwd, detached: true, stdio: ["ignore", "pipe", "pipe"] })
  if (child.pid === undefined) throw new Error(`cannot start quiesce ${args.join(" ")}`)
  startedGroups.push(child.pid)
  let output = ""
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exit = new Promise<number | null>((resolve) => child.on("exit", resolve))
  return { process: child, pid: child.pid, output: () => output, exit }
}

/** Copies the host examples into `project`, with the hook that records the modules a run loads. */
function addExamples(project: string): void {
  mkdirSync(join(project, "examples"))
  for (const file of exampleFiles) copyFileSync(join(root, "examples/host", file), join(project, "examples", file))
  writeFileSync(join(project, "record-modules.mjs"), [
    "// Records the URL of every module this process loads into $QUIESCE_LOADED_MODULES.",
    "import { appendFileSync } from \"node:fs\"",
    "import { registerHooks } from \"node:module\"",
    "const file = process.env.QUIESCE_LOADED_MODULES",
    "registerHooks({ resolve(specifier, context, next) { const resolved = next(specifier, context); appendFileSync(file, resolved.url + \"\\n\"); return resolved } })",
    ""
  ].join("\n"))
}

async function main() {
  console.log(`Node ${process.version}; working in ${work}`)

  // The README's library example is the collector example, word for word.
  const examples = exampleFiles.map((file) => readFileSync(join(root, "examples/host", file), "utf8"))
  const readme = readFileSync(join(root, "README.md"), "utf8")
  check(readme.includes("```ts\n" + examples[0] + "```"), "the README's library example is examples/host/collector.ts")
  const docBlocks = [...readFileSync(join(root, "docs/library.md"), "utf8").matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!)
  check(docBlocks.length > 0 && docBlocks.every((block) => examples.some((example) => example.includes(block))), "every TypeScript block of docs/library.md is taken from an example")

  // Pack: npm runs the build (prepare) first.
  const packed = run("npm", ["pack", "--json", "--pack-destination", work, "--loglevel=error"], root)
  const packs: unknown = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("[")))
  const info = record(Array.isArray(packs) ? packs[0] : packs)
  const tarball = join(work, String(info["filename"]))
  const files = Array.isArray(info["files"]) ? info["files"].map((file) => String(record(file)["path"])) : []
  figures.push(["tarball", `${kib(statSync(tarball).size)} (${files.length} files, ${mib(Number(info["unpackedSize"]))} unpacked)`])
  check(files.includes("dist/index.d.ts") && files.includes("dist/plugins/shell/main.cjs") && files.includes("dist/cli/quiesce.mjs"), "the tarball holds the declarations, the built shell plugin and the CLI")
  check(!files.some((file) => file.startsWith("test/") || file.startsWith("bench/") || file.startsWith("node_modules/")), "the tarball holds no tests, benchmarks or dependencies")

  // The core alone: the package and effect, nothing optional.
  const core = consumer("core", tarball, {})
  for (const name of [...optionalPackages, "@effect/platform-node"]) check(!existsSync(join(core, "node_modules", name)), `${name} is not installed with the core`)
  figures.push(["install, core (quiesce + effect)", `${mib(directoryBytes(join(core, "node_modules")))}: quiesce ${mib(directoryBytes(join(core, "node_modules/quiesce")))}, effect ${mib(directoryBytes(join(core, "node_modules/effect")))}`])

  addExamples(core)
  writeFileSync(join(core, "tsconfig.json"), JSON.stringify({
    compilerOptions: {
      target: "ES2023",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      noEmit: true,
      skipLibCheck: false,
      verbatimModuleSyntax: true,
      erasableSyntaxOnly: true,
      // The repository's Node types, so the consumer installs nothing to be type-checked.
      typeRoots: [join(root, "node_modules/@types")],
      types: ["node"],
      // effect's declarations name Web Crypto and structured-clone types.
      lib: ["ES2023", "DOM"]
    },
    include: ["examples/*.ts"]
  }, null, 2))
  run(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], core)
  passed("the examples type-check against the installed declarations (skipLibCheck off)")

  // The collector under a host's own runtime.
  const collector = await runExample(core, "examples/collector.ts")
  check(JSON.stringify(step(collector.all, "sweep")["collected"]) === "[\"idle\"]", "the sweep releases the idle runtime and only it")
  const explained = collector.all.filter((entry) => entry["step"] === "explain")
  const busy = explained.find((entry) => entry["agentId"] === "busy")
  const awaited = explained.find((entry) => entry["agentId"] === "awaited")
  check(busy?.["state"] === "vetoed" && busy["veto"] === "a background shell is still running", "explain: the vetoed runtime is retained, with its provider's reason")
  check(JSON.stringify(awaited?.["blockers"]) === "[\"caller-protected\"]", "explain: the protected runtime is retained for its caller")
  const collected = step(collector.all, "collectNow")
  check(collected["recent"] === "Collected" && collected["busy"] === "Retained", "collectNow releases the recent runtime and retains the vetoed one")
  check(JSON.stringify(step(collector.all, "resident")["agents"]) === "[\"busy\",\"awaited\"]", "the vetoed and the protected runtimes are still resident before the host ends")
  const pids = step(collector.all, "started")["pids"]
  check(Array.isArray(pids) && pids.length === 4 && pids.every((pid) => !groupRuns(Number(pid))), "every child process of the collector example is gone")
  check(collector.modules.some((url) => url.includes("/node_modules/quiesce/dist/index.js")), "the example loaded the installed package's core")
  check(optionalLoaded(collector.modules).length === 0, "the core loads neither the ACP SDK, zod nor the PostgreSQL driver")

  // The registry with the shell provider, in memory and then twice on one SQLite file.
  const memory = await runExample(core, "examples/registry.ts")
  const first = step(memory.all, "prompt", 0)
  const second = step(memory.all, "prompt", 1)
  check(first["output"] === "hello\n" && step(memory.all, "collectNow")["outcome"] === "Collected", "the shell agent answers, and its idle runtime is released")
  check(second["resumed"] === true && second["sessionId"] === first["sessionId"] && second["output"] === "hello again\n", "the next prompt resumes the same session")
  check(optionalLoaded(memory.modules).length === 0, "the registry and the shell provider load no optional package")
  const database = join(core, "state", "quiesce.sqlite")
  const runOne = await runExample(core, "examples/registry.ts", [database])
  const runTwo = await runExample(core, "examples/registry.ts", [database])
  const agentId = step(runOne.all, "prompt")["agentId"]
  check(JSON.stringify(step(runOne.all, "agents")["agents"]) === "[]", "the first run starts from an empty SQLite file")
  check(JSON.stringify(step(runTwo.all, "agents")["agents"]) === JSON.stringify([agentId]), "the second run finds the first run's agent in the SQLite file")
  const resumed = step(runTwo.all, "prompt")
  check(resumed["resumed"] === true && resumed["sessionId"] === step(runOne.all, "prompt")["sessionId"], "the second run resumes the first run's session")
  check(step(runTwo.all, "turns")["count"] === 4, "the second run sees the first run's turns in the journal")
  const runtimePids = [memory, runOne, runTwo].flatMap((example) => example.all.filter((entry) => entry["step"] === "prompt").map((entry) => Number(entry["pid"])))
  check(runtimePids.length === 6 && runtimePids.every((pid) => pid > 0 && !groupRuns(pid)), "every shell provider process is gone")

  // A provider layer of the host's own.
  const echo = step((await runExample(core, "examples/echoProvider.ts")).all, "echo")
  check(JSON.stringify(echo["replies"]) === JSON.stringify(["turn 1: hello", "turn 2: hello again"]) && echo["released"] === "Collected" && echo["resumed"] === true, "a host's own provider is released and resumes its conversation")

  // Import time of the core entry, in a fresh process each time.
  const importMillis = (specifier: string) => {
    const timings = Array.from({ length: 7 }, () =>
      Number(run(process.execPath, ["--input-type=module", "-e", `const t = performance.now(); await import(${JSON.stringify(specifier)}); console.log(performance.now() - t)`], core).stdout))
    return timings.sort((a, b) => a - b)[3]!
  }
  figures.push(["import of the core entry (median of 7)", `${importMillis("quiesce").toFixed(0)} ms (effect's own entry alone: ${importMillis("effect").toFixed(0)} ms)`])

  // An optional entry without its package fails, naming the package.
  const acpAbsent = spawnSync(process.execPath, ["--input-type=module", "-e", "await import(\"quiesce/providers/acp\")"], { cwd: core, encoding: "utf8" })
  check(acpAbsent.status !== 0 && acpAbsent.stderr.includes("@agentclientprotocol/sdk"), "quiesce/providers/acp without the ACP SDK fails, naming it")

  // The installed command runs a daemon with a shell agent.
  const home = join(work, "home")
  const port = await freePort()
  const bin = join(core, "node_modules/.bin/quiesce")
  const daemon = startCommand(bin, ["--home", home, "daemon", "--port", String(port)], core)
  let runtimePid = 0
  try {
    await until(() => daemon.output().includes("Quiesce ready"), "the installed daemon is ready", 30_000)
    const created = record(JSON.parse(run(process.execPath, [bin, "--home", home, "agents", "create", "--provider", "shell", "--cwd", home, "--json"], core).stdout))
    const reply = run(process.execPath, [bin, "--home", home, "prompt", String(created["agentId"]), "echo from the package", "--wait"], core).stdout
    check(reply.includes("from the package"), "the installed daemon's shell agent answers a prompt")
    const shown = record(JSON.parse(run(process.execPath, [bin, "--home", home, "agents", "show", String(created["agentId"]), "--json"], core).stdout))
    runtimePid = Number(shown["pid"])
    const login = await fetch(`http://127.0.0.1:${port}/login`)
    const script = await fetch(`http://127.0.0.1:${port}/assets/daemon.js`)
    check(login.status === 200 && (await login.text()).includes("<html") && script.status === 200, "the installed daemon serves its pages from the package's web/ folder")
  } finally {
    daemon.process.kill("SIGTERM")
  }
  check(await daemon.exit === 0, "the installed daemon stops in order on SIGTERM")
  check(!groupRuns(daemon.pid) && runtimePid > 0 && !groupRuns(runtimePid), "nothing of the installed daemon is left running, its shell runtime neither")

  // The installed command runs a hub, which starts a home's daemon for the first request to it.
  const hubHome = join(work, "hub")
  const hubbed = join(work, "hubbed-home")
  mkdirSync(hubHome, { recursive: true })
  mkdirSync(hubbed, { recursive: true })
  writeFileSync(join(hubHome, "hub.json"), JSON.stringify({ homes: [{ name: "a", dir: hubbed }] }))
  const hub = startCommand(bin, ["--home", hubHome, "hub", "--port", "0"], core)
  const viaHub = (...args: ReadonlyArray<string>) => run(process.execPath, [bin, "--home", hubHome, "--hub", "a", ...args], core).stdout
  try {
    await until(() => hub.output().includes("Quiesce hub ready"), "the installed hub is ready", 30_000)
    const agent = record(JSON.parse(viaHub("agents", "create", "--provider", "shell", "--cwd", hubbed, "--json")))
    check(viaHub("prompt", String(agent["agentId"]), "echo through the hub", "--wait").includes("through the hub"), "the installed hub starts the home's daemon, whose shell agent answers")
  } finally {
    hub.process.kill("SIGTERM")
  }
  check(await hub.exit === 0, "the installed hub stops on SIGTERM")
  // A hub's daemons outlive it; this one is stopped through its own home.
  const hubDaemonPid = Number(record(JSON.parse(readFileSync(join(hubbed, "daemon.json"), "utf8")))["pid"])
  startedGroups.push(hubDaemonPid)
  run(process.execPath, [bin, "--home", hubbed, "stop"], core)
  await until(() => !groupRuns(hubDaemonPid), "the hub's daemon has stopped", 30_000)
  passed("the daemon the hub started stops in order, and nothing of it is left running")

  // The daemon's entry without the ACP SDK and the PostgreSQL driver: it loads, and an ACP provider says what is missing.
  const daemonProject = consumer("daemon", tarball, { "@effect/platform-node": version("@effect/platform-node") })
  figures.push(["install, core + @effect/platform-node (for quiesce/daemon)", mib(directoryBytes(join(daemonProject, "node_modules")))])
  for (const name of optionalPackages) check(!existsSync(join(daemonProject, "node_modules", name)), `${name} is not installed with @effect/platform-node`)
  const acpRefusal = run(process.execPath, ["--input-type=module", "-e", [
    "import { Effect, Layer } from \"effect\"",
    "import { ProviderRegistry } from \"quiesce\"",
    "import { providerLayer } from \"quiesce/daemon\"",
    "const acp = providerLayer(\"agents\", { kind: \"acp\", command: \"an-acp-agent\" }, process.cwd())",
    "const error = await Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(acp.pipe(Layer.provide(ProviderRegistry.layer))))))",
    "console.log(JSON.stringify({ tag: error._tag, message: error.message }))"
  ].join("\n")], daemonProject)
  const refusal = record(JSON.parse(acpRefusal.stdout))
  check(refusal["tag"] === "ProviderRegistrationRefused" && String(refusal["message"]).includes("npm install @agentclientprotocol/sdk zod"), "quiesce/daemon loads without the optional packages, and an acp provider names what to install")

  // With the optional packages: every entry loads.
  const full = consumer("full", tarball, Object.fromEntries([...optionalPackages, "@effect/platform-node"].map((name) => [name, version(name)])))
  figures.push(["install, with the optional packages", mib(directoryBytes(join(full, "node_modules")))])
  const entries = Object.keys(record(manifest["exports"])).filter((entry) => entry !== "./package.json").map((entry) => entry.replace(/^\./, "quiesce"))
  run(process.execPath, ["--input-type=module", "-e", entries.map((entry) => `await import(${JSON.stringify(entry)})`).join("\n")], full)
  passed(`every entry loads once the optional packages are installed: ${entries.join(", ")}`)
  // Where they could be loaded, the core and the shell provider still load none of them.
  addExamples(full)
  for (const file of ["examples/collector.ts", "examples/registry.ts"]) {
    const loaded = optionalLoaded((await runExample(full, file)).modules)
    check(loaded.length === 0, `${file} loads no optional package where all are installed${loaded.length === 0 ? "" : `: ${loaded.join(", ")}`}`)
  }

  // Older Nodes: reported, not supported (engines).
  const older = ["/usr/bin/node", "/usr/local/bin/node"].find((candidate) => existsSync(candidate) && candidate !== process.execPath)
  if (older !== undefined) {
    const olderRun = spawnSync(older, ["--input-type=module", "-e", "await import(\"quiesce\")"], { cwd: core, encoding: "utf8" })
    const olderVersion = spawnSync(older, ["--version"], { encoding: "utf8" }).stdout.trim()
    const firstError = olderRun.stderr.split("\n").find((line) => /Error/.test(line)) ?? ""
    figures.push([`Node ${olderVersion} (${older})`, olderRun.status === 0 ? "the core loads" : `the core does not load: ${firstError.trim()}`])
  }
  figures.push(["engines", JSON.stringify(manifest["engines"])])

  console.log("\n| figure | value |\n| --- | --- |")
  for (const [name, value] of figures) console.log(`| ${name} | ${value} |`)
}

main().then(
  () => rmSync(work, { recursive: true, force: true }),
  (error: unknown) => {
    for (const pgid of startedGroups) {
      try {
        process.kill(-pgid, "SIGKILL")
      } catch {
        // Already gone.
      }
    }
    console.error(error instanceof Error ? error.message : error)
    console.error(`left for inspection: ${work}`)
    process.exitCode = 1
  }
)
