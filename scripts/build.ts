// Builds the package into dist/ (npm run build; npm ci and npm pack run it through prepare):
// - the library: tsc emits ES modules, declarations and source maps from src/ (tsconfig.build.json),
//   which the package's exports map names entry by entry;
// - the shell plugin, as CommonJS JavaScript (dist/plugins/shell/main.cjs), since Node strips no types
//   under node_modules;
// - the CLI's bundle, dist/cli/quiesce.mjs, that bin/quiesce.mjs runs. One minified ES module holds
//   the client commands; `quiesce daemon`, `quiesce hub` and `config check` load theirs from chunks
//   beside it, so a client command never parses the providers, the store or the server. It carries
//   its dependencies, the optional ones too, so the command needs nothing installed beside it.
import { build, type Plugin } from "esbuild"
import { execFileSync } from "node:child_process"
import { readFileSync, rmSync } from "node:fs"
import { builtinModules } from "node:module"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
rmSync(`${root}dist`, { recursive: true, force: true })
execFileSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, "-p", `${root}tsconfig.build.json`], { stdio: "inherit" })
await build({
  absWorkingDir: root,
  entryPoints: { "plugins/shell/main": "plugins/shell/main.ts" },
  outdir: `${root}dist`,
  // CommonJS: an idle runtime then never loads Node's ES module loader (3 MiB of every runtime).
  outExtension: { ".js": ".cjs" },
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node24",
  logLevel: "warning"
})
/**
 * Node's built-in modules, taken with `process.getBuiltinModule` rather than `import`. An import of
 * a built-in builds its ES module facade, which reads every export: for node:http that loads the
 * whole of undici (its WebSocket, MessageEvent and CloseEvent getters), tens of milliseconds of
 * every daemon's start. The facade here exports the module's own values, and no lazy getter.
 */
const builtinsByValue: Plugin = {
  name: "builtins-by-value",
  setup(plugin) {
    const builtins = new Set(builtinModules)
    plugin.onResolve({ filter: /^(node:)?[a-z_/]+$/ }, (args) => {
      const name = args.path.replace(/^node:/, "")
      return builtins.has(name) && args.kind === "import-statement" ? { path: name, namespace: "builtin-by-value" } : undefined
    })
    plugin.onLoad({ filter: /.*/, namespace: "builtin-by-value" }, (args) => {
      const module: object = process.getBuiltinModule(`node:${args.path}`) ?? {}
      const values = Object.entries(Object.getOwnPropertyDescriptors(module))
        .filter(([name, descriptor]) => "value" in descriptor && /^[A-Za-z_$][\w$]*$/.test(name) && name !== "default")
        .map(([name]) => name)
      return {
        contents: `const m = process.getBuiltinModule("node:${args.path}");\nexport default m;\nexport const { ${values.join(", ")} } = m;\n`,
        loader: "js"
      }
    })
  }
}

/**
 * effect's cli/CliOutput.js builds an `Intl.Segmenter` when it is loaded: ICU's break iterator,
 * ~10 ms and ~3.5 MiB in every command and every daemon, though only help and tables measure text.
 * Here it is built on first use. The build fails if the module no longer reads as expected.
 */
const lazySegmenter: Plugin = {
  name: "lazy-segmenter",
  setup(plugin) {
    plugin.onLoad({ filter: /[\\/]effect[\\/]dist[\\/]cli[\\/]CliOutput\.js$/ }, (args) => {
      const source = readFileSync(args.path, "utf8")
      const eager = /const graphemeSegmenter = \/\*#__PURE__\*\/new Intl\.Segmenter\(undefined, \{\s*granularity: "grapheme"\s*\}\);/
      if (!eager.test(source)) return { errors: [{ text: `${args.path}: the eager Intl.Segmenter this build defers is not there` }] }
      const lazy = "let graphemeSegmenterBuilt;\n" +
        "const graphemeSegmenter = { segment: (text) => (graphemeSegmenterBuilt ??= new Intl.Segmenter(undefined, { granularity: \"grapheme\" })).segment(text) };"
      return { contents: source.replace(eager, lazy), loader: "js" }
    })
  }
}

const outdir = `${root}dist/cli`
const result = await build({
  absWorkingDir: root,
  entryPoints: { quiesce: "src/programs/cli/main.ts" },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node24",
  minify: true,
  outExtension: { ".js": ".mjs" },
  chunkNames: "chunk-[hash]",
  // Some bundled dependencies are CommonJS and call require.
  banner: { js: 'import { createRequire as quiesceRequire } from "node:module"; const require = quiesceRequire(import.meta.url);' },
  metafile: true,
  plugins: [builtinsByValue, lazySegmenter],
  logLevel: "warning"
})
const outputs = Object.entries(result.metafile.outputs).filter(([file]) => file.endsWith(".mjs"))
const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`
const entry = outputs.find(([, output]) => output.entryPoint !== undefined)
const total = outputs.reduce((sum, [, output]) => sum + output.bytes, 0)
console.log(`dist/cli: ${entry === undefined ? "?" : kib(entry[1].bytes)} for the client commands, ${kib(total)} in ${outputs.length} files`)
