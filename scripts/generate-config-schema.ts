// Writes schemas/config.schema.json from the configuration Schema (npm run schema).
import { writeFileSync } from "node:fs"
import { configJsonSchema } from "../src/domain/config.ts"

writeFileSync(new URL("../schemas/config.schema.json", import.meta.url), JSON.stringify(configJsonSchema(), null, 2) + "\n")
