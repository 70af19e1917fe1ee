/**
 * The daemon against hostile or broken input, black-box: real daemon processes on loopback, an
 * unusable token file. Time is real, so every wait polls with a bound.
 */
import { afterEach, describe, expect, it } from "vitest"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { cleanUpDaemons, exited, freePort, newHome, ready, runCli, startDaemon } from "../support/daemonProcess.ts"

afterEach(cleanUpDaemons)

describe("the daemon on hostile input", () => {
  for (const [kind, content] of [["an empty", ""], ["a whitespace-only", " \n\t \n"]] as const) {
    it(`${kind} token file stops the daemon before it is ready, saying what to do`, async () => {
      const home = newHome()
      writeFileSync(join(home, "token"), content, { mode: 0o600 })
      const daemon = startDaemon(home, await freePort())
      expect(await exited(daemon.process)).toBe(1)
      expect(daemon.output()).toContain(
        `The API token file ${join(home, "token")} is empty. Delete it to have a new one made at the next start`
      )
      expect(daemon.output()).not.toContain("Quiesce ready")
    }, 30_000)
  }

  it("the CLI refuses an empty token instead of sending an empty bearer", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    expect(runCli(daemon, "agents", "list").status).toBe(0)
    writeFileSync(join(daemon.home, "token"), "\n")
    const refused = runCli(daemon, "agents", "list")
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain(`The API token file ${join(daemon.home, "token")} is empty`)
    expect(refused.stdout).toBe("")
  }, 30_000)
})
