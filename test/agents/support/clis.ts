import { claudeCli } from "./claudeCli.ts"
import { codexCli } from "./codexCli.ts"
import { opencodeCli } from "./opencodeCli.ts"
import { ompCli } from "./ompCli.ts"
import { piCli } from "./piCli.ts"
import type { RealCli } from "./realAgent.ts"

/** Every pinned agent CLI, as the daemon test and the bench drive them. */
export const realClis: ReadonlyArray<RealCli> = [claudeCli, codexCli, opencodeCli, piCli, ompCli]
