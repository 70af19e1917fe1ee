import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import * as PageSessionsLive from "../../../src/layers/http/pageSessions.ts"
import { sameOriginOrRead, sessionCookieName } from "../../../src/layers/http/pageSessions.ts"
import { PageSessions } from "../../../src/services/PageSessions.ts"

describe("PageSessions", () => {
  it.effect("a code gives one session, whose cookie and key only together authorise; nothing empty, guessed or expired is accepted", () =>
    Effect.gen(function*() {
      const sessions = yield* PageSessions
      const { code } = yield* sessions.issueCode
      const session = Option.getOrThrow(yield* sessions.redeem(code))
      assert.isTrue(Option.isNone(yield* sessions.redeem(code)))
      assert.isTrue(yield* sessions.isCurrent(session.id))
      assert.isTrue(yield* sessions.authorizes(session.id, session.key))
      // The cookie alone (what every other port of the host is sent) authorises nothing; nor the key alone.
      assert.isFalse(yield* sessions.authorizes(session.id, ""))
      assert.isFalse(yield* sessions.authorizes(session.id, code))
      assert.isFalse(yield* sessions.authorizes("", session.key))
      assert.isFalse(yield* sessions.authorizes(session.key, session.id))
      // A code is not a session, nor a session a code.
      assert.isFalse(yield* sessions.isCurrent(code))
      assert.isTrue(Option.isNone(yield* sessions.redeem(session.id)))
      assert.isTrue(Option.isNone(yield* sessions.redeem("")))
      assert.isFalse(yield* sessions.isCurrent(""))

      const late = yield* sessions.issueCode
      yield* TestClock.adjust("4 minutes")
      const inTime = yield* sessions.issueCode
      yield* TestClock.adjust("1 minute")
      assert.isTrue(Option.isNone(yield* sessions.redeem(late.code)))
      assert.isTrue(Option.isSome(yield* sessions.redeem(inTime.code)))

      yield* TestClock.adjust("714 minutes")
      assert.isTrue(yield* sessions.authorizes(session.id, session.key))
      yield* TestClock.adjust("1 minute")
      assert.isFalse(yield* sessions.authorizes(session.id, session.key))
      assert.isFalse(yield* sessions.isCurrent(session.id))
    }).pipe(Effect.provide(PageSessionsLive.layer)))

  it.effect("a session ended is gone", () =>
    Effect.gen(function*() {
      const sessions = yield* PageSessions
      const session = Option.getOrThrow(yield* sessions.redeem((yield* sessions.issueCode).code))
      yield* sessions.end(session.id)
      assert.isFalse(yield* sessions.authorizes(session.id, session.key))
    }).pipe(Effect.provide(PageSessionsLive.layer)))

  it.effect("holds at most 64 codes: the oldest go first", () =>
    Effect.gen(function*() {
      const sessions = yield* PageSessions
      const codes = yield* Effect.forEach(Array.from({ length: 65 }), () => sessions.issueCode)
      assert.isTrue(Option.isNone(yield* sessions.redeem(codes[0]!.code)))
      assert.isTrue(Option.isSome(yield* sessions.redeem(codes[1]!.code)))
      assert.isTrue(Option.isSome(yield* sessions.redeem(codes[64]!.code)))
    }).pipe(Effect.provide(PageSessionsLive.layer)))
})

describe("sameOriginOrRead", () => {
  const host = "127.0.0.1:7377"
  const request = (method: string, headers: Record<string, string>) => ({ method, headers: { host, ...headers } })

  it("reads always; changes only from the server's own origin", () => {
    assert.isTrue(sameOriginOrRead(request("GET", { origin: "http://evil.example" })))
    assert.isTrue(sameOriginOrRead(request("POST", { origin: `http://${host}` })))
    assert.isTrue(sameOriginOrRead(request("DELETE", { "sec-fetch-site": "same-origin" })))
    // Another port of the same host is the same site, not the same origin.
    assert.isFalse(sameOriginOrRead(request("POST", { origin: "http://127.0.0.1:7378" })))
    assert.isFalse(sameOriginOrRead(request("POST", { origin: `https://${host}` })))
    assert.isFalse(sameOriginOrRead(request("POST", { origin: "null" })))
    assert.isFalse(sameOriginOrRead(request("POST", { "sec-fetch-site": "same-site" })))
    assert.isFalse(sameOriginOrRead(request("POST", {})))
    assert.isFalse(sameOriginOrRead({ method: "POST", headers: { origin: `http://${host}` } }))
  })
})

describe("sessionCookieName", () => {
  it("one cookie per port of a host: a hub and its daemons never overwrite each other's", () => {
    assert.strictEqual(sessionCookieName("127.0.0.1:7377"), "quiesce_session_7377")
    assert.strictEqual(sessionCookieName("[::1]:7378"), "quiesce_session_7378")
    assert.strictEqual(sessionCookieName("localhost"), "quiesce_session_80")
    assert.strictEqual(sessionCookieName(undefined), "quiesce_session_80")
  })
})
