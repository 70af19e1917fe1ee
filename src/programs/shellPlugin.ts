import { fileURLToPath } from "node:url"

/** The reference `shell` provider ships in the repository. */
export const shellPluginPath = fileURLToPath(new URL("../../plugins/shell/main.ts", import.meta.url))
