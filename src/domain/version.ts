import { Schema } from "effect"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/**
 * The package's root directory. This module is two levels below it both as source
 * (`src/domain/`) and in the CLI's bundle (`dist/cli/`), so the same relative path serves both.
 */
export const packageRoot: string = fileURLToPath(new URL("../../", import.meta.url))

/** This package's version, from its package.json. */
export const packageVersion: string = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({ version: Schema.String })))(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8")
).version
