/**
 * The pinned OpenCode CLI (`opencode-ai@1.18.33`) as an ACP agent (`opencode acp`), driven by the
 * ACP adapter: the same configuration and fake model as `opencodeCli.ts`, launched in ACP mode.
 */
import * as AcpProvider from "../../../src/layers/providers/acp/AcpProvider.ts"
import { makeOpencodeCli, type OpenCodeTestOptions } from "./opencodeCli.ts"
import type { RealCli } from "./realAgent.ts"

export const makeOpencodeAcpCli = (options: Pick<OpenCodeTestOptions, "bash"> = {}): RealCli => {
  const native = makeOpencodeCli(options)
  return {
    ...native,
    provider: "opencode-acp",
    configOptions: undefined,
    launch: (launch) => ({ ...native.launch(launch), args: ["acp"] }),
    layer: (launch, onSpawn) =>
      AcpProvider.layer({
        provider: "opencode-acp",
        command: launch.command,
        args: launch.args ?? [],
        env: launch.env,
        onSpawn,
        closeGrace: "2 seconds"
      })
  }
}
