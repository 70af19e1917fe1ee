import { collectorBench } from "./collector.ts"
import { printTable } from "./table.ts"

const rows = [...(await collectorBench())]
printTable(rows)
