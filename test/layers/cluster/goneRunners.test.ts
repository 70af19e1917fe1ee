/**
 * The gone-runner check's probe of a runner's socket, against real sockets on 127.0.0.1: a port
 * that listens answers, and a port nobody listens on refuses. Only `refused` marks a runner gone.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { RunnerAddress } from "effect/cluster"
import { createServer } from "node:net"
import { probeSocket } from "../../../src/layers/cluster/goneRunners.ts"
import { freePort } from "../../support/daemonProcess.ts"

describe("goneRunners.probeSocket", () => {
  it.effect("a listening runner answers; a port nobody listens on refuses", () =>
    Effect.gen(function*() {
      const server = yield* Effect.acquireRelease(
        Effect.callback<ReturnType<typeof createServer>>((resume) => {
          const listening = createServer((socket) => socket.destroy())
          listening.listen(0, "127.0.0.1", () => resume(Effect.succeed(listening)))
          return Effect.sync(() => void listening.close())
        }),
        (listening) => Effect.callback<void>((resume) => void listening.close(() => resume(Effect.void)))
      )
      const address = server.address()
      assert(typeof address === "object" && address !== null)
      assert.strictEqual(yield* probeSocket(RunnerAddress.make("127.0.0.1", address.port)), "answers")
      const closed = yield* Effect.promise(freePort)
      assert.strictEqual(yield* probeSocket(RunnerAddress.make("127.0.0.1", closed)), "refused")
    }).pipe(Effect.scoped))
})
