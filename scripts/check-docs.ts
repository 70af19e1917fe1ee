// npm run check:docs: every public export of the package has a TSDoc comment. The public exports
// are what the exports map's entries export, and the members of the namespaces they export
// (`export * as AgentRegistryLive from …`), whose modules need a module comment of their own.
import { readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = fileURLToPath(new URL("..", import.meta.url))
const manifest: unknown = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
const exportsMap = typeof manifest === "object" && manifest !== null && "exports" in manifest ? manifest.exports : undefined
const entries = Object.values(typeof exportsMap === "object" && exportsMap !== null ? exportsMap : {}).flatMap((target: unknown) =>
  typeof target === "object" && target !== null && "quiesce-source" in target && typeof target["quiesce-source"] === "string"
    ? [join(root, target["quiesce-source"])]
    : []
)

const configFile = ts.readConfigFile(join(root, "tsconfig.build.json"), ts.sys.readFile)
const config = ts.parseJsonConfigFileContent(configFile.config, ts.sys, root)
const program = ts.createProgram(entries, { ...config.options, noEmit: true })
const checker = program.getTypeChecker()

const hasDoc = (node: ts.Node): boolean => {
  // A variable's comment sits on its statement; an exported declaration's, on the declaration.
  const holder = ts.isVariableDeclaration(node) ? node.parent.parent : node
  return ts.getJSDocCommentsAndTags(holder).some((doc) => ts.isJSDoc(doc) && (doc.comment !== undefined || (doc.tags?.length ?? 0) > 0))
}

/** A module's own comment: a JSDoc block before its first statement carrying `@module`, or the file's first comment. */
const hasModuleDoc = (file: ts.SourceFile): boolean => {
  const first = file.statements[0]
  if (first === undefined) return false
  const comments = ts.getLeadingCommentRanges(file.text, first.getFullStart()) ?? []
  return comments.some((range) => file.text.slice(range.pos, range.end).startsWith("/**"))
}

const missing: Array<string> = []
const seenModules = new Set<ts.Symbol>()
const seenDeclarations = new Set<ts.Node>()

const where = (node: ts.Node) => {
  const file = node.getSourceFile()
  return `${relative(root, file.fileName)}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}`
}

const checkModule = (moduleSymbol: ts.Symbol, path: string): void => {
  if (seenModules.has(moduleSymbol)) return
  seenModules.add(moduleSymbol)
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const name = `${path}.${exported.name}`
    const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
    const declarations = target.declarations ?? []
    const moduleFile = declarations.find(ts.isSourceFile)
    if (moduleFile !== undefined) {
      // `export * as Name from "./module.ts"`: the module says what it is, and so does each of its exports.
      if (!hasModuleDoc(moduleFile)) missing.push(`${name} (module ${relative(root, moduleFile.fileName)} has no module comment)`)
      checkModule(target, name)
      continue
    }
    const own = declarations.filter((declaration) => !seenDeclarations.has(declaration))
    if (own.length === 0) continue
    own.forEach((declaration) => seenDeclarations.add(declaration))
    // A value and its type of the same name (a schema and its type) share one comment.
    if (!own.some(hasDoc)) missing.push(`${name} at ${where(own[0]!)}`)
  }
}

for (const entry of entries) {
  const file = program.getSourceFile(entry)
  const symbol = file === undefined ? undefined : checker.getSymbolAtLocation(file)
  if (file === undefined || symbol === undefined) {
    missing.push(`${relative(root, entry)}: not a module`)
    continue
  }
  if (!hasModuleDoc(file)) missing.push(`${relative(root, entry)} has no module comment`)
  checkModule(symbol, relative(root, entry))
}

if (missing.length > 0) {
  console.error(`${missing.length} public exports have no TSDoc comment:\n${missing.map((line) => `  ${line}`).join("\n")}`)
  process.exitCode = 1
} else {
  console.log(`every public export of ${entries.length} entries has a TSDoc comment`)
}
