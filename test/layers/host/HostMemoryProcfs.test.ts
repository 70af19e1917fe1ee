import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import {
  cgroupHeadroom,
  cgroupV2Path,
  layer,
  parseMemAvailable,
  readAvailable
} from "../../../src/layers/host/HostMemoryProcfs.ts"
import { readText } from "../../../src/platform/procfs.ts"
import { HostMemory } from "../../../src/services/HostMemory.ts"

const meminfo = (availableKb: number) =>
  `MemTotal:       24684000 kB\nMemFree:        22000000 kB\nMemAvailable:   ${availableKb} kB\nBuffers:          100000 kB\n`

/** A cgroup v2 tree in a temporary directory: `limits` maps a cgroup path to [memory.max, memory.current]. */
const fakeHost = (availableKb: number, cgroup: string | undefined, limits: Record<string, readonly [string, string]>) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "quiesce-hostmem-"))
  fs.writeFileSync(path.join(root, "meminfo"), meminfo(availableKb))
  fs.writeFileSync(path.join(root, "cgroup"), cgroup === undefined ? "4:memory:/x\n" : `0::${cgroup}\n`)
  for (const [dir, [max, current]] of Object.entries(limits)) {
    const at = path.join(root, "fs", dir)
    fs.mkdirSync(at, { recursive: true })
    fs.writeFileSync(path.join(at, "memory.max"), `${max}\n`)
    fs.writeFileSync(path.join(at, "memory.current"), `${current}\n`)
  }
  const paths = { meminfo: path.join(root, "meminfo"), selfCgroup: path.join(root, "cgroup"), cgroupRoot: path.join(root, "fs") }
  return { paths, [Symbol.dispose]: () => fs.rmSync(root, { recursive: true, force: true }) }
}

describe("HostMemoryProcfs", () => {
  it("parses MemAvailable and the cgroup v2 path", () => {
    assert.strictEqual(parseMemAvailable(meminfo(1024)), 1024 * 1024)
    assert.isUndefined(parseMemAvailable("MemTotal: 1 kB\n"))
    assert.strictEqual(cgroupV2Path("0::/user.slice/app.scope\n"), "/user.slice/app.scope")
    assert.isUndefined(cgroupV2Path("4:memory:/process_api/x\n1:cpu:/\n"))
  })

  it("reads MemAvailable alone on a host without cgroup v2 (an injected reading)", () => {
    using host = fakeHost(2_000_000, undefined, {})
    assert.strictEqual(readAvailable(host.paths), 2_000_000 * 1024)
  })

  it("takes the smallest of MemAvailable and every limited cgroup's headroom, its ancestors' included", () => {
    using host = fakeHost(2_000_000, "/a/b", {
      "/": ["max", "999999999"],
      "/a": ["1000000000", "700000000"],
      "/a/b": ["max", "100"]
    })
    assert.strictEqual(cgroupHeadroom(host.paths.cgroupRoot, "/a/b"), 300_000_000)
    assert.strictEqual(readAvailable(host.paths), 300_000_000)
    using roomy = fakeHost(100, "/a", { "/a": ["1000000000", "0"] })
    assert.strictEqual(readAvailable(roomy.paths), 100 * 1024, "MemAvailable is smaller")
  })

  it.effect("on this machine: a cgroup v2 with memory.max bounds the reading, else MemAvailable is it", () =>
    Effect.gen(function*() {
      const available = yield* Effect.flatMap(HostMemory, (memory) => memory.available).pipe(
        Effect.provide(layer())
      )
      const memAvailable = parseMemAvailable(readText("/proc/meminfo") ?? "")
      assert.isTrue(Option.isSome(available), "a Linux host tells its available memory")
      const cgroup = cgroupV2Path(readText("/proc/self/cgroup") ?? "")
      const headroom = cgroup === undefined ? undefined : cgroupHeadroom("/sys/fs/cgroup", cgroup)
      const reading = Option.getOrThrow(available)
      if (headroom !== undefined) {
        // Memory moves between reads: the reading is at most the headroom, give or take 64 MiB.
        assert.isAtMost(reading, headroom + 64 * 1024 * 1024)
      } else {
        assert.isDefined(memAvailable)
        assert.approximately(reading, memAvailable ?? 0, 256 * 1024 * 1024)
      }
    }))
})
