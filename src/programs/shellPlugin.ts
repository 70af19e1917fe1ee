import * as path from "node:path"
import { packageRoot, runsFromSources } from "../domain/version.ts"

/** The reference `shell` provider's plugin, shipped in the package: run it with Node.js. */
export const shellPluginPath = path.join(packageRoot, runsFromSources ? "plugins/shell/main.ts" : "dist/plugins/shell/main.js")
