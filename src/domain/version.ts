import { Schema } from "effect"
import { readFileSync } from "node:fs"

/** This package's version, from its package.json. */
export const packageVersion: string = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({ version: Schema.String })))(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8")
).version
