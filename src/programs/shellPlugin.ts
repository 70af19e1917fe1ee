import * as path from "node:path"
import { packageRoot } from "../domain/version.ts"

/** The reference `shell` provider ships in the repository. */
export const shellPluginPath = path.join(packageRoot, "plugins/shell/main.ts")
