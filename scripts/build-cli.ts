// Builds the CLI's bundle, dist/cli/quiesce.mjs, that bin/quiesce.mjs runs (npm run build; npm ci
// runs it through prepare). One minified ES module holds the client commands; `quiesce daemon`,
// `quiesce hub` and `config check` load theirs from chunks beside it, so a client command never
// parses the providers, the store or the server.
import { build } from "esbuild"
import { rmSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const outdir = `${root}dist/cli`
rmSync(outdir, { recursive: true, force: true })
const result = await build({
  absWorkingDir: root,
  entryPoints: { quiesce: "src/programs/cli.ts" },
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
  logLevel: "warning"
})
const outputs = Object.entries(result.metafile.outputs).filter(([file]) => file.endsWith(".mjs"))
const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`
const entry = outputs.find(([, output]) => output.entryPoint !== undefined)
const total = outputs.reduce((sum, [, output]) => sum + output.bytes, 0)
console.log(`dist/cli: ${entry === undefined ? "?" : kib(entry[1].bytes)} for the client commands, ${kib(total)} in ${outputs.length} files`)
