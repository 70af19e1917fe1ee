/**
 * The hub's inventory snapshot: however many read the inventory, each daemon gets at most one
 * status read a second, and an action forgets the snapshot at once. The daemon is a real HTTP
 * server standing in for one (it answers `GET /v1/daemon` and counts the reads), behind a record
 * that names this test's own process.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import { TestClock } from "effect/testing"
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { daemonProtocolVersion } from "../../../src/domain/retirement.ts"
import * as ProcessInspectionProcfs from "../../../src/layers/host/ProcessInspectionProcfs.ts"
import * as HubDaemonsLive from "../../../src/layers/hub/HubDaemons.ts"
import { prepare } from "../../../src/layers/hub/requests.ts"
import { HubDaemons } from "../../../src/services/HubDaemons.ts"

const ownStartTime = () => {
  const stat = readFileSync("/proc/self/stat", "utf8")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19])
}

/** A stand-in daemon: its status answers, and how many times it was asked. */
const standIn = Effect.acquireRelease(
  Effect.callback<{ readonly server: Server; readonly port: number; readonly reads: () => number }>((resume) => {
    let reads = 0
    const server = createServer((request, response) => {
      if (request.url !== "/v1/daemon") {
        response.writeHead(404).end()
        return
      }
      reads++
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
        ...identity(port()),
        phase: "resident",
        idleSince: new Date().toISOString(),
        deadline: null,
        blockers: [],
        lastAttempt: null,
        failure: null
      }))
    })
    const port = () => {
      const address = server.address()
      return typeof address === "object" && address !== null ? address.port : 0
    }
    server.listen(0, "127.0.0.1", () => {
      resume(Effect.succeed({ server, port: port(), reads: () => reads }))
    })
  }),
  ({ server }) =>
    Effect.callback<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
)

const identity = (port: number) => ({
  pid: process.pid,
  startTime: ownStartTime(),
  instanceId: "stand-in",
  host: "127.0.0.1",
  port,
  protocolVersion: daemonProtocolVersion,
  packageVersion: "0.0.0",
  idleTimeout: { value: null, millis: null, source: "omitted" }
})

/** A hub home managing `work` (and `work-2` … when asked), each record pointing at the stand-in. */
const hubWith = (port: number, count = 1) => {
  const root = mkdtempSync(join(tmpdir(), "quiesce-hub-snapshot-"))
  const hubHome = join(root, "hub")
  mkdirSync(hubHome)
  const homes = Array.from({ length: count }, (_, i) => ({ name: i === 0 ? "work" : `work-${i + 1}`, dir: join(root, `work-${i + 1}`) }))
  for (const { dir } of homes) {
    mkdirSync(dir)
    writeFileSync(join(dir, "token"), "stand-in-token\n", { mode: 0o600 })
    writeFileSync(join(dir, "daemon.json"), JSON.stringify(identity(port)))
  }
  writeFileSync(join(hubHome, "hub.json"), JSON.stringify({ homes }))
  return HubDaemonsLive.layer({ hubHome }).pipe(
    Layer.provide(Layer.mergeAll(FetchHttpClient.layer, ProcessInspectionProcfs.layer()))
  )
}

describe("HubDaemons' inventory", () => {
  it.effect("20 readers at once share one discovery; a second later it is read again; an action forgets it", () =>
    Effect.gen(function*() {
      const daemon = yield* standIn
      const daemons = yield* Layer.build(hubWith(daemon.port))
      const inventory = Effect.flatMap(HubDaemons, (service) => service.inventory).pipe(
        Effect.provideContext(daemons)
      )

      const rows = yield* Effect.all(Array.from({ length: 20 }, () => inventory), { concurrency: "unbounded" })
      assert.strictEqual(daemon.reads(), 1)
      assert.isTrue(rows.every((listed) => listed.daemons[0]?.state === "running"))

      yield* TestClock.adjust("500 millis")
      yield* inventory
      assert.strictEqual(daemon.reads(), 1)
      yield* TestClock.adjust("600 millis")
      yield* inventory
      assert.strictEqual(daemon.reads(), 2)

      // An action (a refused one too) forgets the snapshot: the next list is fresh.
      const stale = yield* Effect.flatMap(HubDaemons, (service) =>
        service.retire("work", { pid: process.pid, startTime: 1, instanceId: "another" })).pipe(
          Effect.provideContext(daemons),
          Effect.flip
        )
      assert.strictEqual(stale._tag, "StaleIdentity")
      const readsBefore = daemon.reads()
      yield* inventory
      assert.strictEqual(daemon.reads(), readsBefore + 1)

      // So does a change routed to the daemon (its own retire now, say); a routed read does not.
      const routed = (method: string, path: string) =>
        Effect.flatMap(HubDaemons, (service) =>
          service.route("work", prepare({ method, path, search: "", contentType: undefined, body: new Uint8Array() }))).pipe(
            Effect.provideContext(daemons)
          )
      yield* routed("GET", "/v1/agents")
      const afterRead = daemon.reads()
      yield* inventory
      assert.strictEqual(daemon.reads(), afterRead)
      yield* routed("POST", "/v1/daemon/retire")
      yield* inventory
      assert.strictEqual(daemon.reads(), afterRead + 1)
    }).pipe(Effect.scoped))

  it.effect("more homes than sampling slots: one sampling query for the inventory measures every daemon (H5)", () =>
    Effect.gen(function*() {
      const daemon = yield* standIn
      const daemons = yield* Layer.build(hubWith(daemon.port, 8))
      const listed = yield* Effect.flatMap(HubDaemons, (service) => service.inventory).pipe(Effect.provideContext(daemons))
      assert.strictEqual(listed.daemons.length, 8)
      // One query per home took the four slots for the first four and left the rest unmeasured.
      assert.isTrue(listed.daemons.every((row) => row.memoryBytes !== null && row.memoryBytes > 0))
    }).pipe(Effect.scoped))
})
