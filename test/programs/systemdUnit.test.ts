import { describe, expect, it } from "vitest"
import { systemdQuote, systemdUnit } from "../../src/programs/systemdUnit.ts"

describe("the systemd unit (H1, H3)", () => {
  it("quotes what systemd would otherwise read as a specifier, a variable, or several words", () => {
    expect(systemdQuote("/usr/bin/node")).toBe("/usr/bin/node")
    expect(systemdQuote("/home/u/100%h")).toBe(`"/home/u/100%%h"`)
    expect(systemdQuote("/home/u/$HOME/x")).toBe(`"/home/u/$$HOME/x"`)
    expect(systemdQuote(`/home/my "agents"/q`)).toBe(`"/home/my \\"agents\\"/q"`)
    expect(systemdQuote("PATH=/a b:/c$d", "assignment")).toBe(`"PATH=/a b:/c$d"`)
  })

  it("waits beyond the daemon's deadline and lets the daemon stop its runtimes itself", () => {
    const unit = systemdUnit({ node: "/n", cli: "/c.mjs", home: "/h/50%", shutdownDeadlineMillis: 17_000, path: undefined })
    expect(unit).toContain("Type=notify\nNotifyAccess=all\n")
    expect(unit).toContain(`ExecStart=/n /c.mjs --home "/h/50%%" daemon\n`)
    expect(unit).toContain("Description=Quiesce daemon (/h/50%%)\n")
    expect(unit).toContain("KillMode=mixed\nTimeoutStopSec=27\n")
    expect(unit).not.toContain("Environment=")
    const withFlags = systemdUnit({ node: "/n", nodeFlags: ["--max-semi-space-size=1"], cli: "/c.mjs", home: "/h", shutdownDeadlineMillis: 17_000, path: undefined })
    expect(withFlags).toContain("ExecStart=/n --max-semi-space-size=1 /c.mjs --home /h daemon\n")
  })
})
