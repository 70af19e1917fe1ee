// Writes schemas/config.schema.json and schemas/hub.schema.json from their Schemas (npm run schema).
import { writeFileSync } from "node:fs"
import { configJsonSchema } from "../src/domain/config.ts"
import { hubConfigJsonSchema } from "../src/domain/hub.ts"

const write = (file: string, schema: unknown) =>
  writeFileSync(new URL(`../schemas/${file}`, import.meta.url), JSON.stringify(schema, null, 2) + "\n")

write("config.schema.json", configJsonSchema())
write("hub.schema.json", hubConfigJsonSchema())
