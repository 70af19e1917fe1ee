/**
 * A real browser for the page tests: Debian's Chromium (`/usr/bin/chromium`) driven by
 * playwright-core, which downloads no browser. `.ci/run` installs the package when it is missing;
 * without it the tests say why they skip. The browser runs as a server process of its own, so a
 * test can prove it is gone once closed.
 */
import { existsSync } from "node:fs"
import { type Browser, type BrowserServer, chromium } from "playwright-core"
import { groupAlive, until } from "./daemonProcess.ts"

export const chromiumPath = "/usr/bin/chromium"

/** Why the browser tests cannot run here, or undefined when they can. */
export const chromiumMissing = (): string | undefined =>
  existsSync(chromiumPath)
    ? undefined
    : `no Chromium at ${chromiumPath}: install Debian's chromium package (.ci/run does, with apt-get)`

export interface RunningBrowser {
  readonly browser: Browser
  readonly close: () => Promise<void>
}

const processAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

export const launchBrowser = async (): Promise<RunningBrowser> => {
  const server: BrowserServer = await chromium.launchServer({
    executablePath: chromiumPath,
    headless: true,
    // Root in CI has no user namespace for the sandbox.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
  })
  const pid = server.process().pid
  const browser = await chromium.connect(server.wsEndpoint())
  return {
    browser,
    close: async () => {
      await browser.close()
      await server.close()
      if (pid !== undefined) {
        await until(() => !processAlive(pid) && !groupAlive(pid), "the browser's processes are gone", 10_000)
      }
    }
  }
}
