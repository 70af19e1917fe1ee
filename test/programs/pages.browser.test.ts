/**
 * The web pages in a real browser (Debian's Chromium through playwright-core) against a real hub,
 * real daemons and real shell runtimes: the login through a one-time link, the hub's inventory and
 * its actions, a daemon's runtimes with a provider's veto, the daemon page's prompt box and live
 * turns over its event stream, and a page that polls (or streams) only while it is visible. Screenshots of both pages are saved under the test's temporary folder, whose path is
 * printed.
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { BrowserContext, Page, Request } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { problemStatus } from "../../src/api/errors.ts"
import { defaultArgs as claudeArgs } from "../../src/layers/providers/claude/ClaudeProvider.ts"
import { awaitJobPid, processRuns } from "../support/backgroundJobs.ts"
import { chromiumMissing, launchBrowser, type RunningBrowser } from "../support/browser.ts"
import {
  api,
  cleanUpDaemons,
  createShellAgent,
  freePort,
  groupAlive,
  newHome,
  prompt,
  ready,
  runCli,
  startDaemon,
  until
} from "../support/daemonProcess.ts"
import {
  cleanUpHubs,
  daemonRecord,
  type Hub,
  hubApi,
  inventoryRow,
  newHubRoot,
  processAlive,
  runHubCli,
  startHub,
  writeHubConfig
} from "../support/hubProcess.ts"

const cli = join(import.meta.dirname, "../../src/programs/cli/main.ts")
const fakeClaude = join(import.meta.dirname, "../fixtures/fakeClaude.mjs")
const missing = chromiumMissing()
let running: RunningBrowser | undefined
const contexts: Array<BrowserContext> = []

/** Where the screenshots go; kept after the run (the note of the change names the files). */
const shots = mkdtempSync(join(tmpdir(), "quiesce-pages-"))

beforeAll(async () => {
  if (missing === undefined) running = await launchBrowser()
}, 60_000)

afterEach(async () => {
  for (const context of contexts.splice(0)) await context.close()
  await cleanUpHubs()
  await cleanUpDaemons()
})

afterAll(async () => {
  await running?.close()
  if (missing === undefined) console.log(`page screenshots: ${shots}`)
})

/** A page at 1280×800 in a context of its own (its own cookies). */
const newPage = async () => {
  if (running === undefined) throw new Error("no browser")
  const context = await running.browser.newContext({ viewport: { width: 1280, height: 800 } })
  contexts.push(context)
  return { context, page: await context.newPage() }
}

/** The one URL a `quiesce … open` printed on stdout. */
const loginUrl = (result: { readonly status: number | null; readonly stdout: string; readonly stderr: string }) => {
  expect(result.status, result.stderr).toBe(0)
  const url = result.stdout.trim()
  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/login(\?next=[^#]+)?#[A-Za-z0-9_-]{43}$/)
  return url
}

/** The row of a home on the hub page. */
const homeRow = (page: Page, name: string) => page.locator(`tr[data-home="${name}"]`)

const stateOf = (page: Page, name: string) => homeRow(page, name).locator("[data-state]").getAttribute("data-state")

const screenshot = async (page: Page, name: string) => {
  mkdirSync(shots, { recursive: true })
  const file = join(shots, name)
  await page.screenshot({ path: file })
  return file
}

/** A hub over two homes, `idle` and `busy`, each with a shell agent; the busy one's runtime runs a background job. */
const twoHomes = async (idleTimeout: string) => {
  const root = newHubRoot()
  const hubHome = join(root, "hub")
  writeHubConfig(hubHome, [{ name: "idle", dir: join(root, "idle") }, { name: "busy", dir: join(root, "busy") }], idleTimeout)
  const hub = await startHub(hubHome)
  const create = async (name: string) => {
    const created = await hubApi(hub, "POST", `/v1/homes/${name}/agents`, { provider: "shell", cwd: root })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const agentId: string = created.body.agentId
    return agentId
  }
  const idleAgent = await create("idle")
  const busyAgent = await create("busy")
  const job = await hubApi(hub, "POST", `/v1/homes/busy/agents/${busyAgent}/prompts`, { text: "sleep 600 &", wait: true })
  expect(job.body).toMatchObject({ state: "completed" })
  return { root, hubHome, hub, idleAgent, busyAgent }
}

const signIn = async (page: Page, url: string) => {
  await page.goto(url)
  await page.waitForURL((address) => !address.href.includes("/login"))
  // The code left the address bar, and the history entry, before the page moved on.
  expect(page.url()).not.toContain("#")
}

describe.skipIf(missing !== undefined)("the web pages in Chromium", () => {
  it("the hub page: login by a one-time link, two homes, retire now refused and done, force stop with confirmation, resume", async () => {
    const { busyAgent, hub, hubHome, root } = await twoHomes("1h")
    const { context, page } = await newPage()

    // Without the cookie: the login page, not the data.
    const bare = await page.goto(`http://127.0.0.1:${hub.port}/`)
    expect(bare?.status()).toBe(401)
    await expect.poll(() => page.locator("[data-login]").count()).toBe(1)
    expect(await page.content()).not.toContain("busy")
    expect((await fetch(`http://127.0.0.1:${hub.port}/v1/daemons`)).status).toBe(401)
    expect((await fetch(`http://127.0.0.1:${hub.port}/v1/homes/busy/agents`)).status).toBe(401)

    const url = loginUrl(runHubCli(hubHome, "hub", "open"))
    await signIn(page, url)
    const [cookie] = await context.cookies()
    expect(cookie).toMatchObject({ name: `quiesce_session_${hub.port}`, httpOnly: true, sameSite: "Strict", path: "/" })
    // What every other port of the host is sent, the cookie, reads nothing without the page's key.
    const replayed = await fetch(`http://127.0.0.1:${hub.port}/v1/daemons`, { headers: { cookie: `${cookie!.name}=${cookie!.value}` } })
    expect(replayed.status).toBe(401)
    // The token never reaches the browser.
    expect(await page.content()).not.toContain(hub.token)

    // A link signs in once; the second time the login page says so, legibly.
    const second = await newPage()
    await second.page.goto(url)
    await expect.poll(() => second.page.locator(".outcome-error").textContent()).toContain("used or expired")
    expect(await second.context.cookies()).toEqual([])
    expect(await second.page.locator("main").evaluate((element) => getComputedStyle(element).opacity)).toBe("1")

    await expect.poll(() => stateOf(page, "idle")).toBe("running")
    await expect.poll(() => stateOf(page, "busy")).toBe("running")
    expect(await page.locator("[data-hub-default]").textContent()).toBe("1h0m0s")
    const busyPid = daemonRecord(join(root, "busy"))!.pid
    expect(await homeRow(page, "busy").textContent()).toContain(`pid ${busyPid}`)
    // Page polls are only reads of the discovery snapshot; the bearer holder sees the same rows.
    expect((await inventoryRow(hub, "busy")).pid).toBe(busyPid)

    // Retire now on the busy home: refused, the fresh blockers shown, still resident.
    await homeRow(page, "busy").getByRole("button", { name: "Retire now" }).click()
    const refusal = homeRow(page, "busy").locator(".outcome-refused")
    await expect.poll(() => refusal.textContent(), { timeout: 20_000 }).toContain("Retire now refused")
    expect(await refusal.textContent()).toContain("sleep 600")
    expect(await stateOf(page, "busy")).toBe("running")
    expect(processAlive(busyPid)).toBe(true)

    // On the idle one: retired.
    const idlePid = daemonRecord(join(root, "idle"))!.pid
    await homeRow(page, "idle").getByRole("button", { name: "Retire now" }).click()
    await expect.poll(() => stateOf(page, "idle"), { timeout: 20_000 }).toBe("retired")
    await until(() => !processAlive(idlePid), "the idle daemon exits")
    // Both kinds of row, a refusal with its blockers and a retired home: the page as the README shows it.
    console.log(`hub page: ${await screenshot(page, "hub-page.png")}`)

    // Force stop asks first, naming the home and the pid; Cancel does nothing.
    await homeRow(page, "busy").getByRole("button", { name: "Force stop" }).click()
    const dialog = page.locator("#stop-dialog")
    await expect.poll(() => dialog.isVisible()).toBe(true)
    const warning = await dialog.textContent()
    expect(warning).toContain("busy")
    expect(warning).toContain(String(busyPid))
    expect(warning).toContain("interrupted")
    await dialog.getByRole("button", { name: "Cancel" }).click()
    expect(processAlive(busyPid)).toBe(true)
    await homeRow(page, "busy").getByRole("button", { name: "Force stop" }).click()
    await dialog.getByRole("button", { name: "Force stop" }).click()
    await expect.poll(() => stateOf(page, "busy"), { timeout: 30_000 }).toBe("stopped")
    await until(() => !processAlive(busyPid), "the busy daemon is stopped")

    // Wake brings it back, with the agent whose session it saved.
    await homeRow(page, "busy").getByRole("button", { name: "Wake" }).click()
    await expect.poll(() => stateOf(page, "busy"), { timeout: 30_000 }).toBe("running")
    const resumed = daemonRecord(join(root, "busy"))!
    expect(resumed.pid).not.toBe(busyPid)
    expect((await hubApi(hub, "GET", `/v1/homes/busy/agents/${busyAgent}`)).status).toBe(200)
  }, 120_000)

  it("the hub page and quiesce daemons: a home's veto with its reason and since when, memory resident against released per provider and label", async () => {
    const { busyAgent, hub, hubHome, root } = await twoHomes("1h")
    // A labelled agent in the idle home, released by a collect: released memory there.
    const created = await hubApi(hub, "POST", "/v1/homes/idle/agents", { provider: "shell", cwd: root, labels: { team: "web" } })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const web: string = created.body.agentId
    expect((await hubApi(hub, "POST", `/v1/homes/idle/agents/${web}/prompts`, { text: "true", wait: true })).body.state).toBe("completed")
    expect((await hubApi(hub, "POST", `/v1/homes/idle/runtimes/${web}/collect`)).body.outcome).toBe("collected")

    const { page } = await newPage()
    await signIn(page, loginUrl(runHubCli(hubHome, "hub", "open")))
    // The busy home is kept by its runtime's veto, named with its reason and since when.
    const veto = homeRow(page, "busy").locator(`[data-veto="${busyAgent}"]`)
    await expect.poll(() => veto.textContent(), { timeout: 10_000 }).toContain("background job 1 `sleep 600`")
    expect(await veto.textContent()).toMatch(/vetoed since \d+ s ago/)
    // In words, the tag only on hover: "vetoed by its provider (agent-…): background job …".
    expect(await veto.textContent()).toContain(`vetoed by its provider (${busyAgent}): background job 1`)
    expect(await veto.locator("[data-since] time").getAttribute("datetime")).toMatch(/^\d{4}-\d\d-\d\dT/)

    // Each home's memory resident and released, and all homes' together.
    await expect.poll(() => page.locator('[data-home-memory="idle"] [data-released]').textContent())
      .toMatch(/^released \d+\.\d MiB by 1 agent$/)
    expect(await page.locator('[data-home-memory="busy"] [data-resident]').textContent()).toMatch(/^resident \d+\.\d MiB in 1 runtime$/)
    const totals = page.locator("[data-memory-totals]")
    expect(await totals.locator('tr[data-total="all:all homes"]').textContent()).toMatch(/MiB in 2 runtimes.*MiB by 1 agent/)
    expect(await totals.locator('tr[data-total="provider:shell"]').textContent()).toMatch(/MiB in 2 runtimes.*MiB by 1 agent/)
    expect(await totals.locator('tr[data-total="label:team=web"]').textContent()).toMatch(/0 KiB in 0 runtimes.*MiB by 1 agent/)
    console.log(`hub page totals: ${await screenshot(page, "hub-totals.png")}`)

    // The CLI's inventory says the same.
    const listed = runHubCli(hubHome, "daemons")
    expect(listed.status, listed.stderr).toBe(0)
    expect(listed.stdout).toMatch(/RESIDENT +RELEASED$/m)
    expect(listed.stdout).toMatch(/^label team=web +0 B in 0 runtimes +\d+\.\d MiB by 1 agent$/m)
    expect(listed.stdout).toMatch(new RegExp(`Kept by veto \\(${busyAgent}: background job 1 \`sleep 600\`, since \\d+s ago\\)`))
  }, 120_000)

  it("a stale row's action shows the hub's refusal; a cookie without the page's origin changes nothing", async () => {
    const { hub, hubHome, root } = await twoHomes("1h")
    const { page } = await newPage()
    await signIn(page, loginUrl(runHubCli(hubHome, "hub", "open")))
    await expect.poll(() => stateOf(page, "idle")).toBe("running")

    // The row still shows the old identity (the page is hidden: it lists no more) while the
    // daemon behind it is replaced.
    const old = daemonRecord(join(root, "idle"))!
    await hideAndFreeze(page)
    const identity = { pid: old.pid, startTime: old.startTime, instanceId: old.instanceId }
    expect((await hubApi(hub, "POST", "/v1/daemons/idle/retire", identity)).status).toBe(202)
    await until(() => !processAlive(old.pid), "the old daemon exits")
    const created = await hubApi(hub, "POST", "/v1/homes/idle/agents", { provider: "shell", cwd: root })
    expect(created.status).toBe(201)
    await homeRow(page, "idle").getByRole("button", { name: "Retire now" }).click()
    const stale = homeRow(page, "idle").locator(".outcome")
    await expect.poll(() => stale.textContent(), { timeout: 20_000 }).toContain("The daemon changed since the page listed it: nothing was done.")
    // In words, with the hub's detail, never the problem's tag.
    expect(await stale.textContent()).toContain(`is no longer pid ${old.pid}`)
    expect(await stale.textContent()).not.toContain("StaleIdentity")
    // Not retried behind the operator's back: the new daemon serves on.
    expect(processAlive(daemonRecord(join(root, "idle"))!.pid)).toBe(true)

    // The page's whole session (cookie and key), sent by something that is not the page.
    const [cookie] = await page.context().cookies()
    const key = await page.evaluate(() => localStorage.getItem("quiesce.sessionKey"))
    const session = { cookie: `${cookie!.name}=${cookie!.value}`, "quiesce-session-key": key ?? "" }
    expect((await fetch(`http://127.0.0.1:${hub.port}/v1/daemons`, { headers: session })).status).toBe(200)
    const sent = (origin: string | undefined) =>
      fetch(`http://127.0.0.1:${hub.port}/v1/daemons/idle/resume`, {
        method: "POST",
        headers: { ...session, ...(origin === undefined ? {} : { origin }) }
      })
    const crossOrigin = await sent("http://127.0.0.1:1")
    expect(crossOrigin.status).toBe(403)
    expect((await crossOrigin.json())._tag).toBe("CrossOriginRefused")
    expect((await sent(undefined)).status).toBe(403)
    const forwarded = await fetch(`http://127.0.0.1:${hub.port}/v1/homes/idle/sweep`, {
      method: "POST",
      headers: { ...session, origin: "http://evil.example" }
    })
    expect(forwarded.status).toBe(403)
  }, 120_000)

  it("the daemon page: a vetoed runtime's reason, a collect-now refusal, close, and a turn's output", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const busy = await createShellAgent(daemon)
    const quiet = await createShellAgent(daemon)
    expect((await prompt(daemon, busy, { text: "sleep 600 &", wait: true })).body).toMatchObject({ state: "completed" })
    const said = await prompt(daemon, quiet, { text: "echo 'hello from the page test'", wait: true })
    expect(said.body).toMatchObject({ state: "completed" })

    const { page } = await newPage()
    const bare = await page.goto(`http://127.0.0.1:${daemon.port}/`)
    expect(bare?.status()).toBe(401)
    await signIn(page, loginUrl(runCli(daemon, "open")))

    const row = (agentId: string) => page.locator(`tr[data-agent="${agentId}"]`)
    await expect.poll(() => row(busy).count()).toBe(1)

    // Collect now on the busy runtime: refused, with its provider's reason, said once.
    await row(busy).getByRole("button", { name: "Collect now" }).click()
    const refusal = row(busy).locator(".outcome-refused")
    await expect.poll(() => refusal.textContent(), { timeout: 20_000 }).toContain("Not collected")
    // The explanation of residency names the veto and its reason; the refusal points at it.
    await expect.poll(() => row(busy).locator("[data-probe]").getAttribute("data-probe")).toBe("vetoed")
    expect(await row(busy).locator("[data-probe]").textContent()).toContain("vetoed by its provider")
    expect(await row(busy).locator("[data-probe]").textContent()).toContain("sleep 600")
    await expect.poll(() => refusal.textContent()).toContain("because of what is listed above")
    expect(occurrences(await row(busy).textContent(), "sleep 600")).toBe(1)
    console.log(`daemon page: ${await screenshot(page, "daemon-page.png")}`)

    // A turn's output opens.
    await row(quiet).getByRole("button", { name: "Turns" }).click()
    const dialog = page.locator("#turn-dialog")
    await dialog.locator("ul.turns button").first().click()
    await expect.poll(() => dialog.locator("[data-turn-output]").textContent()).toContain("hello from the page test")
    await dialog.getByRole("button", { name: "Close" }).click()

    // However many actions ran, the page reads on one timer; following the daemon's events, it
    // does not read every 2 s (at most once, for an event).
    const reads: Array<string> = []
    page.on("request", (request) => {
      if (request.url().endsWith("/v1/runtimes")) reads.push(request.url())
    })
    await new Promise((resolve) => setTimeout(resolve, 4_500))
    expect(reads.length).toBeLessThanOrEqual(1)

    // Close releases the quiet one; the agent stays, released.
    const quietPid = (await api(daemon, "GET", `/v1/agents/${quiet}`)).body.pid
    await row(quiet).getByRole("button", { name: "Close" }).click()
    await expect.poll(() => row(quiet).getAttribute("class"), { timeout: 20_000 }).toBe("released")
    await until(() => !groupAlive(quietPid), "the closed runtime's group is gone")
    expect((await api(daemon, "GET", `/v1/agents/${busy}`)).body.resident).toBe(true)
  }, 120_000)

  it("the daemon page in words: one state per agent, its labels, ids on one line, turns by their prompt; no tag, no \"(omitted)\"", async () => {
    const home = newHome()
    // Swept every second, so the veto of a background job shows without an action.
    writeFileSync(join(home, "config.json"), JSON.stringify({ agents: { sweepInterval: "1s" } }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const labelled = await api(daemon, "POST", "/v1/agents", { provider: "shell", cwd: home, labels: { team: "web", owner: "ana" } })
    expect(labelled.status, JSON.stringify(labelled.body)).toBe(201)
    const quiet: string = labelled.body.agentId
    const said = await prompt(daemon, quiet, { text: "echo 'the first line of a prompt that is long enough to be cut short in the list of turns'\necho second", wait: true })
    expect(said.body).toMatchObject({ state: "completed" })
    const busy = await createShellAgent(daemon)
    expect((await prompt(daemon, busy, { text: "sleep 600 &", wait: true })).body).toMatchObject({ state: "completed" })
    const working = await createShellAgent(daemon)
    expect((await prompt(daemon, working, { text: "sleep 120" })).status).toBe(200)
    const released = await createShellAgent(daemon)
    expect((await prompt(daemon, released, { text: "true", wait: true })).body).toMatchObject({ state: "completed" })
    expect((await api(daemon, "POST", `/v1/agents/${released}/close`)).status).toBe(200)

    const { page } = await newPage()
    await signIn(page, loginUrl(runCli(daemon, "open")))
    const row = (agentId: string) => page.locator(`tr[data-agent="${agentId}"]`)
    const word = (agentId: string) => row(agentId).locator("[data-state-word]").getAttribute("data-state-word")

    // One state each, in a word, and what it means.
    await expect.poll(() => word(quiet), { timeout: 20_000 }).toBe("idle")
    expect(await row(quiet).locator("td.state").textContent()).toMatch(/releases in \d+:\d\d/)
    await expect.poll(() => word(busy), { timeout: 20_000 }).toBe("kept resident")
    const kept = await row(busy).locator("td.state").textContent()
    expect(kept).toContain("because:")
    expect(kept).toContain("vetoed by its provider")
    expect(kept).toContain("sleep 600")
    await expect.poll(() => word(working), { timeout: 20_000 }).toBe("working")
    expect(await row(working).locator("td.state").textContent()).toContain("a turn is running")
    await expect.poll(() => word(released)).toBe("released")
    for (const agentId of [quiet, busy, working, released]) {
      expect(await row(agentId).locator("td.state .badge").count()).toBe(1)
      expect(await row(agentId).locator("td.state").textContent()).not.toContain("active")
    }

    // Its labels, as key=value.
    expect(await row(quiet).locator("[data-label]").allTextContents()).toEqual(["team=web", "owner=ana"])
    expect(await row(busy).locator("[data-label]").count()).toBe(0)

    // No idle timeout was given: the summary says none, and nothing says "omitted".
    expect(await page.locator(".summary").first().textContent()).toContain("idle timeout none")
    expect(await page.locator("main").textContent()).not.toContain("omitted")

    // On a narrow window, ids stay one line (the whole id on hover), and the table scrolls in its box.
    await page.setViewportSize({ width: 640, height: 800 })
    const ids = await page.locator("table.agents [data-id]").evaluateAll((elements) =>
      elements.map((element) => {
        const style = getComputedStyle(element)
        return {
          text: element.textContent,
          title: element.getAttribute("title"),
          whiteSpace: style.whiteSpace,
          lines: element.getBoundingClientRect().height / parseFloat(style.fontSize)
        }
      })
    )
    expect(ids.length).toBeGreaterThanOrEqual(8)
    for (const id of ids) {
      expect(id.whiteSpace).toBe("nowrap")
      expect(id.lines).toBeLessThan(2)
      expect(id.title).toBe(id.text)
    }
    expect(ids.map((id) => id.text)).toContain(quiet)
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true)
    console.log(`daemon page, narrow: ${await screenshot(page, "daemon-page-narrow.png")}`)
    await page.setViewportSize({ width: 1280, height: 800 })

    // The turns by their prompt's first line, cut short, with state and time; not by their ids.
    await row(quiet).getByRole("button", { name: "Turns" }).click()
    const dialog = page.locator("#turn-dialog")
    const listed = dialog.locator("ul.turns li")
    await expect.poll(() => listed.count()).toBe(1)
    const line = await listed.first().textContent()
    expect(line).toContain("echo 'the first line of a prompt that is long enough")
    expect(line).toContain("…")
    expect(line).not.toContain("echo second")
    expect(line).toContain("completed")
    expect(line).toMatch(/ago/)
    expect(line).not.toContain(said.body.turnId)
    await dialog.getByRole("button", { name: "Close" }).click()

    // Every problem type the APIs answer with has its sentence.
    const tags = [...Object.keys(problemStatus), "InvalidRequest", "UnsupportedMediaType", "RouteNotFound", "MethodNotAllowed", "InternalError"]
    // The page's own module, as the browser loads it (a script as text: the test's bundler leaves it alone).
    const unworded = await page.evaluate(
      `import("/assets/problems.js").then(({ problemSentence }) =>
        ${JSON.stringify(tags)}.filter((tag) => problemSentence(tag, 500) === problemSentence("NoSuchProblem", 500)))`
    )
    expect(unworded).toEqual([])

    // A daemon that stops: the page says so in words, never the tag.
    process.kill(-daemon.process.pid!, "SIGTERM")
    const problem = page.locator("[data-problem]")
    await expect.poll(() => problem.textContent(), { timeout: 20_000 }).toContain("The server does not answer.")
    expect(await problem.textContent()).toContain("It may have retired or stopped")
    expect(await problem.textContent()).not.toContain("NoAnswer")
  }, 120_000)

  it("the daemon page: Close on a vetoed runtime asks first, naming the veto; cancel keeps its job, confirm ends it", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const busy = await createShellAgent(daemon)
    expect((await prompt(daemon, busy, { text: "sleep 301 &", wait: true })).body).toMatchObject({ state: "completed" })
    const runtimePid: number = (await api(daemon, "GET", `/v1/agents/${busy}`)).body.pid
    const jobPid = await awaitJobPid(runtimePid, "sleep 301")

    const { page } = await newPage()
    await signIn(page, loginUrl(runCli(daemon, "open")))
    const row = page.locator(`tr[data-agent="${busy}"]`)
    await expect.poll(() => row.count()).toBe(1)
    // Close looks apart from Collect now: a destructive action.
    const closeButton = row.getByRole("button", { name: "Close", exact: true })
    expect(await closeButton.getAttribute("class")).toBe("danger")
    expect(await row.getByRole("button", { name: "Collect now" }).getAttribute("class")).toBeNull()

    // The first click closes nothing: a confirmation names the agent and its provider's veto.
    await closeButton.click()
    const dialog = page.locator("#close-dialog")
    await expect.poll(() => dialog.isVisible(), { timeout: 20_000 }).toBe(true)
    expect(await dialog.locator("[data-close-text]").textContent()).toContain(busy)
    const listed = await dialog.locator("[data-close-stakes] li").allTextContents()
    expect(listed).toHaveLength(1)
    expect(listed[0]).toContain("vetoed by its provider")
    expect(listed[0]).toContain("sleep 301")
    const confirm = dialog.getByRole("button", { name: "Close and end this work" })
    expect(await confirm.getAttribute("class")).toBe("destructive")
    await screenshot(page, "daemon-close-confirmation.png")

    // Cancel: nothing closed, the job runs on.
    await dialog.getByRole("button", { name: "Cancel" }).click()
    await expect.poll(() => dialog.isVisible()).toBe(false)
    await expect.poll(() => row.locator(".outcome-refused").textContent()).toContain("Not closed")
    expect((await api(daemon, "GET", `/v1/agents/${busy}`)).body.resident).toBe(true)
    expect(processRuns(jobPid)).toBe(true)

    // Confirm: closed by force; the job ends and the row says what ended.
    await closeButton.click()
    await expect.poll(() => dialog.isVisible(), { timeout: 20_000 }).toBe(true)
    await confirm.click()
    await expect.poll(() => row.getAttribute("class"), { timeout: 20_000 }).toBe("released")
    await until(() => !processRuns(jobPid), "the background job is gone")
    await expect.poll(() => row.locator(".outcome-ok").textContent()).toContain("Closed by force")
    expect(await row.locator(".outcome-ok").textContent()).toContain("sleep 301")
  }, 120_000)

  it("the daemon page follows the daemon's events: its prompt box runs one turn per submit, output shows as it comes, no 2 s polling, no stream while hidden", async () => {
    const daemon = startDaemon(newHome(), await freePort())
    await ready(daemon)
    const agentId = await createShellAgent(daemon)
    const turnCount = async () => (await api(daemon, "GET", `/v1/agents/${agentId}/turns`)).body.length as number

    const { page } = await newPage()
    const requests: Array<{ readonly url: string; readonly request: Request }> = []
    const failed: Array<string> = []
    page.on("request", (request) => requests.push({ url: request.url(), request }))
    page.on("requestfailed", (request) => failed.push(request.url()))
    const streams = () => requests.filter((request) => request.url.endsWith("/v1/events"))
    const agentLists = () => requests.filter((request) => request.url.endsWith("/v1/agents")).length
    await signIn(page, loginUrl(runCli(daemon, "open")))
    await expect.poll(() => page.locator(`tr[data-agent="${agentId}"]`).count()).toBe(1)
    await expect.poll(() => streams().length).toBe(1)

    // Following the stream, the page does not read the agents every 2 s.
    const listsBefore = agentLists()
    await new Promise((resolve) => setTimeout(resolve, 5_000))
    expect(agentLists() - listsBefore).toBeLessThanOrEqual(1)

    // A double click on Send: one turn, whose lines show one by one while it runs.
    const text = page.locator("[data-prompt-text]")
    await page.locator("[data-prompt-agent]").selectOption(agentId)
    await text.fill("for i in 1 2 3 4 5; do echo line $i; sleep 1; done")
    await page.locator("[data-prompt-send]").dblclick()
    await expect.poll(() => page.locator("[data-sent-turn]").count(), { timeout: 20_000 }).toBe(1)
    const turnId = await page.locator("[data-sent-turn] [data-id]").getAttribute("data-id")
    const liveTurn = page.locator(`[data-live-turn="${turnId}"]`)
    await expect.poll(() => liveTurn.locator("[data-live-output]").textContent(), { timeout: 20_000 }).toContain("line 2")
    // Seen before the turn ended.
    expect(await liveTurn.getAttribute("data-turn-state")).toBe("running")
    expect(await liveTurn.locator("[data-live-output]").textContent()).not.toContain("line 5")
    await expect.poll(() => liveTurn.getAttribute("data-turn-state"), { timeout: 20_000 }).toBe("completed")
    expect(await liveTurn.locator("[data-live-output]").textContent()).toBe("line 1\nline 2\nline 3\nline 4\nline 5\n")
    expect(await turnCount()).toBe(1)

    // Enter twice: one turn.
    await text.fill("echo once")
    await text.press("Enter")
    await text.press("Enter")
    await expect.poll(() => page.locator("[data-live-turn][data-turn-state=completed]").count(), { timeout: 20_000 }).toBe(2)
    expect(await turnCount()).toBe(2)

    // A failed turn's end is said in words.
    await text.fill("echo partial; exit 3")
    await text.press("Enter")
    const failedTurn = page.locator("[data-live-turn][data-turn-state=failed]")
    await expect.poll(() => failedTurn.count(), { timeout: 20_000 }).toBe(1)
    const failedId = await failedTurn.getAttribute("data-live-turn")
    const { error } = (await api(daemon, "GET", `/v1/agents/${agentId}/turns/${failedId}`)).body
    const words = await failedTurn.locator(".outcome-error").textContent()
    expect(words).toContain(error.message)
    expect(words).not.toContain(error._tag)
    expect(await failedTurn.locator("[data-live-output]").textContent()).toContain("partial")

    // A reload after Send, once the daemon took the prompt but before the page saw its answer: the
    // page sends it again with the same id, and it runs once.
    const held: Array<unknown> = []
    await page.route("**/prompts", async (route) => {
      // The first: to the daemon, and its answer kept from the page, which reloads meanwhile.
      if (held.length === 0) held.push(await route.fetch())
      else await route.continue()
    })
    await text.fill("echo reloaded")
    await page.locator("[data-prompt-send]").click()
    await until(() => held.length === 1, "the daemon answered the prompt")
    expect(await turnCount()).toBe(4)
    await page.reload()
    await expect.poll(() => page.locator("[data-sent-turn]").count(), { timeout: 20_000 }).toBe(1)
    // Its turn, which ended meanwhile, with its reply.
    const reloaded = page.locator(`[data-live-turn="${await page.locator("[data-sent-turn] [data-id]").getAttribute("data-id")}"]`)
    await expect.poll(() => reloaded.getAttribute("data-turn-state"), { timeout: 10_000 }).toBe("completed")
    expect(await reloaded.locator("[data-live-output]").textContent()).toBe("reloaded\n")
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(await turnCount()).toBe(4)
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0)

    // Hidden: the stream is closed and nothing is asked; shown again, it resumes after the last id it read.
    const streamsBefore = streams().length
    await hideAndFreeze(page)
    await expect.poll(() => failed.filter((url) => url.endsWith("/v1/events")).length).toBeGreaterThanOrEqual(1)
    const whileHidden = requests.length
    await prompt(daemon, agentId, { text: "echo while hidden", wait: true })
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    expect(requests.length).toBe(whileHidden)
    await showAgain(page)
    await expect.poll(() => streams().length).toBe(streamsBefore + 1)
    expect((await streams().at(-1)!.request.allHeaders())["last-event-id"]).toMatch(/^[a-z0-9]+-\d+$/)
    // What ran while hidden shows: the stream resumed from its last id.
    await expect.poll(() => page.locator("[data-live-turn] [data-live-output]").allTextContents(), { timeout: 10_000 })
      .toContain("while hidden\n")
    console.log(`daemon page, live: ${await screenshot(page, "daemon-page-live.png")}`)
  }, 120_000)

  it("the daemon page shows memory against the budget", async () => {
    const home = newHome()
    writeFileSync(join(home, "config.json"), JSON.stringify({
      agents: { memory: { high: "64GiB", low: "32GiB", sampleInterval: "500ms" }, maxResident: 5 }
    }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    await createShellAgent(daemon)
    const { page } = await newPage()
    await signIn(page, loginUrl(runCli(daemon, "open")))
    const memory = page.locator("[data-memory]")
    await expect.poll(() => memory.textContent(), { timeout: 20_000 }).toMatch(/memory \d+\.\d MiB of 64\.00 GiB \(released down to 32\.00 GiB\)/)
    expect(await memory.textContent()).toContain("1 of at most 5 runtimes")
    expect(await memory.textContent()).toContain("no pressure")
  }, 60_000)

  it("the daemon page answers a pending permission: Allow lets the runtime's turn go on", async () => {
    const home = newHome()
    // Claude Code's stream-json, spoken by the scripted peer: its "permission" turn asks can_use_tool.
    writeFileSync(join(home, "config.json"), JSON.stringify({
      providers: {
        claude: { kind: "claude", command: process.execPath, args: [fakeClaude, ...claudeArgs] },
        shell: { kind: "shell", warmReserve: 1 }
      }
    }))
    const daemon = startDaemon(home, await freePort())
    await ready(daemon)
    const created = await api(daemon, "POST", "/v1/agents", { provider: "claude", cwd: home })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const agentId: string = created.body.agentId
    const asked = await prompt(daemon, agentId, { text: "permission" })
    expect(asked.status).toBe(200)
    await until(async () => (await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pendingPermissions.length === 1, "the permission is pending")

    const { page } = await newPage()
    await signIn(page, loginUrl(runCli(daemon, "open")))
    const row = page.locator(`tr[data-agent="${agentId}"]`)
    await row.getByRole("button", { name: "Allow" }).click()
    await expect.poll(() => row.locator(".outcome-ok").textContent(), { timeout: 20_000 }).toContain("allowed")
    await until(async () => (await api(daemon, "GET", `/v1/agents/${agentId}/turns/${asked.body.turnId}`)).body.state === "completed", "the turn ends")
    const turn = await api(daemon, "GET", `/v1/agents/${agentId}/turns/${asked.body.turnId}`)
    expect(turn.body.reply).toBe("allowed")
    expect((await api(daemon, "GET", `/v1/agents/${agentId}`)).body.pendingPermissions).toEqual([])

    // The warm reserve is listed with its process and memory.
    const reserve = page.locator(`tr[data-reserve="shell"]`)
    await expect.poll(() => reserve.textContent(), { timeout: 20_000 }).toContain("1 ready of 1")
    const [warm] = (await api(daemon, "GET", "/v1/warm-reserve")).body[0].ready
    expect(await reserve.textContent()).toContain(String(warm.pid))
    expect(await reserve.textContent()).toMatch(/\d+(\.\d+)? MiB/)
  }, 90_000)

  it("through the hub, a home's daemon page is served by the hub and its requests are forwarded; the hub's and a daemon's sessions live side by side", async () => {
    const { busyAgent, hub, hubHome, root } = await twoHomes("1h")
    const { context, page } = await newPage()
    await signIn(page, loginUrl(runHubCli(hubHome, "--hub", "busy", "open")))
    expect(new URL(page.url()).pathname).toBe("/homes/busy/")
    const row = page.locator(`tr[data-agent="${busyAgent}"]`)
    await row.getByRole("button", { name: "Collect now" }).click()
    await expect.poll(() => row.locator(".outcome-refused").textContent(), { timeout: 20_000 }).toContain("Not collected")
    await expect.poll(() => row.locator("[data-probe]").textContent()).toContain("sleep 600")
    expect(await page.locator("#title").textContent()).toContain("busy")
    expect((await inventoryRow(hub, "busy")).state).toBe("running")

    // The hub relays the live events: the page follows them there too (no 2 s polling), and its
    // prompt box runs a prompt once, whose output and end it shows as they come.
    const streamAnswers: Array<number> = []
    const agentReads: Array<string> = []
    page.on("response", (response) => {
      if (response.url().endsWith("/v1/homes/busy/events")) streamAnswers.push(response.status())
    })
    page.on("request", (request) => {
      if (request.url().endsWith("/v1/homes/busy/agents")) agentReads.push(request.url())
    })
    await page.reload()
    await expect.poll(() => streamAnswers).toEqual([200])
    const readsBefore = agentReads.length
    await new Promise((resolve) => setTimeout(resolve, 4_500))
    expect(agentReads.length - readsBefore).toBeLessThanOrEqual(1)
    expect(await page.locator("[data-problem]").count()).toBe(0)
    const turnsBefore = (await hubApi(hub, "GET", `/v1/homes/busy/agents/${busyAgent}/turns`)).body.length
    await page.locator("[data-prompt-agent]").selectOption(busyAgent)
    await page.locator("[data-prompt-text]").fill("echo through the hub")
    await page.locator("[data-prompt-send]").dblclick()
    const hubTurn = page.locator("[data-live-turn]")
    await expect.poll(() => hubTurn.getAttribute("data-turn-state"), { timeout: 20_000 }).toBe("completed")
    expect(await hubTurn.locator("[data-live-output]").textContent()).toBe("through the hub\n")
    expect((await hubApi(hub, "GET", `/v1/homes/busy/agents/${busyAgent}/turns`)).body.length).toBe(turnsBefore + 1)

    // Signed in to the daemon itself too, in the same browser: each server keeps its own session.
    const direct = spawnSync(process.execPath, [cli, "--home", join(root, "busy"), "open"], { encoding: "utf8", timeout: 20_000 })
    const daemonPage = await context.newPage()
    await signIn(daemonPage, loginUrl({ status: direct.status, stdout: direct.stdout, stderr: direct.stderr }))
    await expect.poll(() => daemonPage.locator(`tr[data-agent="${busyAgent}"]`).count()).toBe(1)
    expect((await context.cookies()).map((cookie) => cookie.name).sort()).toEqual(
      [`quiesce_session_${hub.port}`, `quiesce_session_${daemonRecord(join(root, "busy"))!.port}`].sort()
    )
    await page.reload()
    await expect.poll(() => page.locator(`tr[data-agent="${busyAgent}"]`).count()).toBe(1)
    expect(await page.locator("#signed-out").isHidden()).toBe(true)

    // A daemon's own logins are not handed out through the hub.
    expect((await hubApi(hub, "POST", "/v1/homes/busy/login-links")).status).toBe(404)

    // Signing out of the hub (from its inventory page) leaves the daemon's session alone; the
    // home's page on the hub sees its session end, says how to sign in again, and stops asking.
    const hubPage = await context.newPage()
    await hubPage.goto(`http://127.0.0.1:${hub.port}/`)
    await expect.poll(() => stateOf(hubPage, "busy")).toBe("running")
    await hubPage.getByRole("button", { name: "Sign out" }).click()
    await hubPage.waitForURL((address) => address.pathname === "/login")
    expect((await hubPage.goto(`http://127.0.0.1:${hub.port}/`))?.status()).toBe(401)
    await expect.poll(() => page.locator("#signed-out").isVisible(), { timeout: 10_000 }).toBe(true)
    expect(await page.locator("#signed-out").textContent()).toContain("quiesce --hub busy open")
    const after: Array<string> = []
    page.on("request", (request) => after.push(request.url()))
    await new Promise((resolve) => setTimeout(resolve, 4_500))
    expect(after).toEqual([])
    await daemonPage.reload()
    await expect.poll(() => daemonPage.locator(`tr[data-agent="${busyAgent}"]`).count()).toBe(1)
  }, 120_000)

  it("the hub page: Collect idle releases a home's idle agents and says which; Wake starts a retired home", async () => {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    const homeDir = join(root, "work")
    // Idle for a second is idle enough; no scheduled sweep comes first.
    mkdirSync(homeDir, { recursive: true })
    writeFileSync(join(homeDir, "config.json"), JSON.stringify({ agents: { idlePeriod: "1s", sweepInterval: "1h" } }))
    writeHubConfig(hubHome, [{ name: "work", dir: homeDir }], "1h")
    const hub = await startHub(hubHome)
    const create = async () => {
      const created = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "shell", cwd: root })
      expect(created.status, JSON.stringify(created.body)).toBe(201)
      const agentId: string = created.body.agentId
      expect((await hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, { text: "true", wait: true })).body).toMatchObject({ state: "completed" })
      return agentId
    }
    const first = await create()
    const second = await create()
    await new Promise((resolve) => setTimeout(resolve, 1_500))

    const { page } = await newPage()
    await signIn(page, loginUrl(runHubCli(hubHome, "hub", "open")))
    await expect.poll(() => stateOf(page, "work")).toBe("running")
    expect(await homeRow(page, "work").getByRole("button", { name: "Wake" }).count()).toBe(0)

    // Collect idle asks nothing (it ends nothing that would be lost) and says what it released.
    await homeRow(page, "work").getByRole("button", { name: "Collect idle" }).click()
    const outcome = homeRow(page, "work").locator(".outcome-ok")
    await expect.poll(() => outcome.textContent(), { timeout: 30_000 }).toContain("Collected 2 idle agents")
    expect(await outcome.textContent()).toContain(first)
    expect(await outcome.textContent()).toContain(second)
    for (const agentId of [first, second]) expect((await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).body.resident).toBe(false)
    // The ids it names stay one line each.
    const named = await outcome.locator("[data-id]").evaluateAll((elements) =>
      elements.map((element) => getComputedStyle(element).whiteSpace === "nowrap" && element.getBoundingClientRect().height < 2 * parseFloat(getComputedStyle(element).fontSize))
    )
    expect(named).toEqual([true, true])
    // Again: nothing left to collect, said so.
    await homeRow(page, "work").getByRole("button", { name: "Collect idle" }).click()
    await expect.poll(() => outcome.textContent(), { timeout: 30_000 }).toContain("Nothing to collect")

    // Retired, the home offers Wake (and no Collect idle); Wake starts its daemon, the agents still released.
    const { pid } = daemonRecord(homeDir)!
    await homeRow(page, "work").getByRole("button", { name: "Retire now" }).click()
    await expect.poll(() => stateOf(page, "work"), { timeout: 20_000 }).toBe("retired")
    await until(() => !processAlive(pid), "the daemon retires")
    expect(await homeRow(page, "work").getByRole("button", { name: "Collect idle" }).count()).toBe(0)
    await homeRow(page, "work").getByRole("button", { name: "Wake" }).click()
    await expect.poll(() => stateOf(page, "work"), { timeout: 30_000 }).toBe("running")
    const woken = daemonRecord(homeDir)!
    expect(woken.pid).not.toBe(pid)
    expect(processAlive(woken.pid)).toBe(true)
    await expect.poll(() => homeRow(page, "work").locator(".outcome-ok").textContent()).toContain(`Woken: its daemon runs as pid ${woken.pid}`)
    expect((await hubApi(hub, "GET", `/v1/homes/work/agents/${first}`)).body.resident).toBe(false)
  }, 120_000)

  it("a home's page through the hub lists its saved agents while it is retired, and keeps working across a retire and a resume", async () => {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    const dir = join(root, "work")
    writeHubConfig(hubHome, [{ name: "work", dir }], "1h")
    const hub = await startHub(hubHome)
    const created = await hubApi(hub, "POST", "/v1/homes/work/agents", { provider: "shell", cwd: root, labels: { team: "web" } })
    expect(created.status).toBe(201)
    const agentId: string = created.body.agentId
    expect((await hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, { text: "echo from the saved store", wait: true })).body)
      .toMatchObject({ state: "completed" })
    const { sessionId } = (await hubApi(hub, "GET", `/v1/homes/work/agents/${agentId}`)).body

    // quiesce open on the daemon's home, which the hub manages: the page the hub serves.
    const opened = spawnSync(process.execPath, [cli, "--home", dir, "open"], {
      encoding: "utf8",
      timeout: 20_000,
      env: { ...process.env, QUIESCE_HUB_HOME: hubHome, QUIESCE_HUB: "" }
    })
    const url = new URL(loginUrl({ status: opened.status, stdout: opened.stdout, stderr: opened.stderr }))
    expect(url.port).toBe(String(hub.port))
    expect(url.searchParams.get("next")).toBe("/homes/work/")
    expect(opened.stderr).toContain("The home work is managed by a hub")
    const { page } = await newPage()
    await signIn(page, url.href)
    expect(new URL(page.url()).pathname).toBe("/homes/work/")
    const row = page.locator(`tr[data-agent="${agentId}"]`)
    await expect.poll(() => row.getAttribute("class")).toBe("resident")

    const retire = async () => {
      const record = daemonRecord(dir)!
      const retired = await hubApi(hub, "POST", "/v1/daemons/work/retire", { pid: record.pid, startTime: record.startTime, instanceId: record.instanceId })
      expect(retired.status, JSON.stringify(retired.body)).toBe(202)
      await until(() => !processAlive(record.pid) && daemonRecord(dir) === undefined, "the daemon retires")
    }
    await retire()
    // Retired: the agents from the saved store, released, under one line that says so; no error.
    const saved = page.locator("[data-saved-store]")
    await expect.poll(() => saved.textContent(), { timeout: 10_000 }).toContain("The home work is retired")
    expect(await saved.textContent()).toContain("read from its saved store (read-only)")
    expect(await row.getAttribute("class")).toBe("released")
    expect(await row.textContent()).toContain(sessionId)
    expect(await page.locator("[data-problem]").count()).toBe(0)
    await row.getByRole("button", { name: "Turns" }).click()
    const dialog = page.locator("#turn-dialog")
    await dialog.locator("ul.turns button").first().click()
    await expect.poll(() => dialog.locator("[data-turn-output]").textContent()).toBe("from the saved store\n")
    await dialog.getByRole("button", { name: "Close" }).click()
    console.log(`retired home page: ${await screenshot(page, "retired-home-page.png")}`)
    // Its polls read; none started the daemon.
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    expect(daemonRecord(dir)).toBeUndefined()
    expect((await inventoryRow(hub, "work")).state).toBe("retired")

    // Resumed (a new daemon, on another port): the same page shows it live again, without a reload.
    expect((await hubApi(hub, "POST", "/v1/daemons/work/resume")).status).toBe(200)
    const resumed = daemonRecord(dir)!
    await expect.poll(() => page.locator(".summary").first().textContent(), { timeout: 10_000 }).toContain(`pid ${resumed.pid}`)
    expect(await saved.count()).toBe(0)
    // Retired and resumed once more, by a prompt this time: the page follows each time.
    await retire()
    await expect.poll(() => saved.count(), { timeout: 10_000 }).toBe(1)
    expect((await hubApi(hub, "POST", `/v1/homes/work/agents/${agentId}/prompts`, { text: "echo back", wait: true })).body)
      .toMatchObject({ state: "completed", resumed: true, sessionId })
    await expect.poll(() => row.getAttribute("class"), { timeout: 10_000 }).toBe("resident")
    expect(await saved.count()).toBe(0)
    expect(await page.locator("[data-problem]").count()).toBe(0)
  }, 120_000)

  it("a page left open and hidden longer than the idle timeout makes no request and does not keep the daemon", async () => {
    const root = newHubRoot()
    const hubHome = join(root, "hub")
    writeHubConfig(hubHome, [{ name: "idle", dir: join(root, "idle") }], "3s")
    const hub: Hub = await startHub(hubHome)
    const created = await hubApi(hub, "POST", "/v1/homes/idle/agents", { provider: "shell", cwd: root })
    expect(created.status).toBe(201)
    const { pid } = daemonRecord(join(root, "idle"))!

    const { page } = await newPage()
    await signIn(page, loginUrl(runHubCli(hubHome, "hub", "open")))
    await expect.poll(() => stateOf(page, "idle")).toBe("running")
    const requests: Array<string> = []
    page.on("request", (request) => requests.push(request.url()))
    await hideAndFreeze(page)
    await until(() => !processAlive(pid), "the daemon retires with the page hidden", 30_000)
    // Hidden: not one request.
    expect(requests).toEqual([])
    await showAgain(page)
    await expect.poll(() => stateOf(page, "idle"), { timeout: 10_000 }).toBe("retired")
    expect(requests.some((url) => url.endsWith("/v1/daemons"))).toBe(true)
  }, 90_000)
})

if (missing !== undefined) {
  describe("the web pages in Chromium", () => {
    it.skip(`are not run: ${missing}`, () => {})
  })
}

/** How many times `part` occurs in `text`. */
const occurrences = (text: string | null, part: string) => (text ?? "").split(part).length - 1

/** Makes the page hidden as a backgrounded tab is (the Page Visibility API's state and event). */
const hideAndFreeze = (page: Page) =>
  page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" })
    Object.defineProperty(document, "hidden", { configurable: true, get: () => true })
    document.dispatchEvent(new Event("visibilitychange"))
  })

const showAgain = (page: Page) =>
  page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "visible" })
    Object.defineProperty(document, "hidden", { configurable: true, get: () => false })
    document.dispatchEvent(new Event("visibilitychange"))
  })
