#!/usr/bin/env node
// The `quiesce` command. npm runs it with the project's Node 24 first on PATH.
import { main } from "../src/programs/cli.ts"

main()
