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

/**
 * The Node.js flags the long-running commands (`quiesce daemon`, `quiesce hub`) run with, wherever
 * this package starts them (a hub's daemons, the systemd unit) and in `npm start` / `npm run hub`:
 * V8's young generation capped at 1 MiB semi-spaces, which an idle daemon holds ~5 MiB less with
 * and starts as fast (bench/lean.ts).
 */
export const longRunningNodeFlags: ReadonlyArray<string> = ["--max-semi-space-size=1"]

/** This package's version, from its package.json. */
export const packageVersion: string = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({ version: Schema.String })))(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8")
).version
