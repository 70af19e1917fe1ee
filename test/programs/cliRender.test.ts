/**
 * The CLI's times for people: a time that has passed reads "… ago" (or "just now"), never
 * "in 0s"; a time to come reads "in …".
 */
import { describe, expect, it } from "vitest"
import { ago, relative, releaseIn } from "../../src/programs/cli/render.ts"

const now = Date.parse("2026-01-01T12:00:00.000Z")
const at = (offsetMs: number) => new Date(now + offsetMs).toISOString()

describe("relative times", () => {
  it("reads a past time as ago, the present as just now, a future time as in", () => {
    expect(relative(at(-5_000), now)).toBe("5s ago")
    expect(relative(at(-10 * 60_000), now)).toBe("10m ago")
    expect(relative(at(-3 * 3_600_000), now)).toBe("3h ago")
    expect(relative(at(0), now)).toBe("just now")
    // Less than half a second either way rounds to the present: never "in 0s" nor "0s ago".
    expect(relative(at(-400), now)).toBe("just now")
    expect(relative(at(400), now)).toBe("just now")
    expect(relative(at(5_000), now)).toBe("in 5s")
    expect(relative(at(10 * 60_000), now)).toBe("in 10m")
    expect(relative(at(3 * 3_600_000), now)).toBe("in 3h")
    expect(relative(at(-4 * 86_400_000), now)).toBe("4d ago")
  })

  it("reads a time that has passed (idle since, last try) as ago, even a little ahead of this clock", () => {
    expect(ago(at(-90_000), now)).toBe("90s ago")
    expect(ago(at(0), now)).toBe("just now")
    expect(ago(at(-1), now)).toBe("just now")
    expect(ago(at(2_000), now)).toBe("just now")
    for (const offset of [0, -1, -499, -500, -501, 1, 2_000]) expect(ago(at(offset), now)).not.toMatch(/^in /)
  })

  it("says when a runtime could be released: now once due, else how soon", () => {
    expect(releaseIn(null, now)).toBe("-")
    expect(releaseIn(at(-1_000), now)).toBe("now")
    expect(releaseIn(at(0), now)).toBe("now")
    expect(releaseIn(at(60_000), now)).toBe("in 60s")
  })
})
