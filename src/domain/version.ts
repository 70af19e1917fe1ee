import { Schema } from "effect"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/**
 * The package's root directory. This module is two levels below it as source (`src/domain/`), as
 * built (`dist/domain/`) and in the CLI's bundle (`dist/cli/`), so one relative path serves all three.
 */
export const packageRoot: string = fileURLToPath(new URL("../../", import.meta.url))

/**
 * Whether this code runs from the TypeScript sources (a clone of the project, on Node 24, which
 * strips the types) rather than from the built package. A program this package starts (the shell
 * plugin, a hub's daemons) is then started from its source too; from the built package, which may
 * sit under node_modules, where Node strips no types, it is started as built.
 */
export const runsFromSources: boolean = import.meta.url.endsWith(".ts")

/** This package's version, from its package.json. */
export const packageVersion: string = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({ version: Schema.String })))(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8")
).version
