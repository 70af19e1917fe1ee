import { Effect, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

/**
 * Writes `file` whole or not at all, private to its owner (0600, its directory made 0700 if
 * missing): a private file next to it is renamed into place, so a reader never sees half of it.
 */
export const writeAtomically = (file: string, text: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`
  fs.writeFileSync(temporary, text, { mode: 0o600 })
  fs.renameSync(temporary, file)
}

/**
 * A small JSON record file of one Schema (a rendezvous record, say): written atomically, read as
 * `None` when it is absent, unreadable or not of the Schema, removed quietly.
 */
export const jsonRecord = <S extends Schema.Codec<unknown, unknown>>(schema: S) => {
  const encode = Schema.encodeSync(Schema.fromJsonString(schema))
  const decode = Schema.decodeUnknownOption(Schema.fromJsonString(schema))
  return {
    write: (file: string, value: S["Type"]): Effect.Effect<void> => Effect.sync(() => writeAtomically(file, encode(value) + "\n")),
    remove: (file: string): Effect.Effect<void> => Effect.sync(() => fs.rmSync(file, { force: true })),
    read: (file: string): Option.Option<S["Type"]> => {
      try {
        return decode(fs.readFileSync(file, "utf8"))
      } catch {
        return Option.none()
      }
    }
  }
}
