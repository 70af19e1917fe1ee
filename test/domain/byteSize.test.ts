import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { ByteSize, byteSizePattern, formatByteSize, parseByteSize } from "../../src/domain/byteSize.ts"

describe("ByteSize", () => {
  it("parses binary and decimal units, any case, and bare bytes", () => {
    assert.strictEqual(parseByteSize("6GiB"), 6 * 1024 ** 3)
    assert.strictEqual(parseByteSize("512MiB"), 512 * 1024 ** 2)
    assert.strictEqual(parseByteSize("1.5GB"), 1.5e9)
    assert.strictEqual(parseByteSize("64kib"), 65_536)
    assert.strictEqual(parseByteSize("1048576"), 1_048_576)
    assert.strictEqual(parseByteSize("10 MB"), 10_000_000)
    for (const bad of ["", "GiB", "-1GiB", "1 GiBs", "1G", "1e9", "lots"]) assert.isUndefined(parseByteSize(bad), bad)
  })

  it("agrees with the JSON Schema's pattern", () => {
    const pattern = new RegExp(byteSizePattern)
    for (const good of ["6GiB", "512MiB", "1.5GB", "1048576", "10 MB"]) assert.isTrue(pattern.test(good), good)
    for (const bad of ["GiB", "-1GiB", "1e9", "lots"]) assert.isFalse(pattern.test(bad), bad)
  })

  it.effect("decodes to bytes and rejects malformed sizes with a clear message", () =>
    Effect.gen(function*() {
      const decode = Schema.decodeUnknownEffect(ByteSize)
      assert.strictEqual(yield* decode("4GiB"), 4 * 1024 ** 3)
      const malformed = yield* Effect.flip(decode("four gigs"))
      assert.include(malformed.message, `invalid size "four gigs"`)
    }))

  it("formats in the largest binary unit", () => {
    assert.strictEqual(formatByteSize(512), "512 B")
    assert.strictEqual(formatByteSize(321.5 * 1024 ** 2), "321.5 MiB")
    assert.strictEqual(formatByteSize(4 * 1024 ** 3), "4.0 GiB")
  })
})
