import { cliBench } from "./cli.ts"
import { clusterBench } from "./cluster.ts"
import { collectorBench } from "./collector.ts"
import { eventsBench } from "./events.ts"
import { finishBench } from "./finish.ts"
import { hubBench } from "./hub.ts"
import { leanBench } from "./lean.ts"
import { memoryBench } from "./memory.ts"
import { registryBench } from "./registry.ts"
import { retirementBench } from "./retirement.ts"
import { samplingBench } from "./sampling.ts"
import { shellBench } from "./shell.ts"
import { printTable } from "./table.ts"
import { tracingBench } from "./tracing.ts"
import { turnsBench } from "./turns.ts"

if (globalThis.gc === undefined) console.warn("run with --expose-gc (npm run bench) for stable heap and timing figures")
printTable([
  ...(await collectorBench()),
  ...(await memoryBench()),
  ...(await registryBench()),
  ...(await finishBench()),
  ...(await shellBench()),
  ...(await samplingBench(50)),
  ...(await turnsBench()),
  ...(await eventsBench()),
  ...(await retirementBench(100, 10)),
  ...(await hubBench(20, 500)),
  ...(await cliBench(20)),
  ...(await leanBench(5, 100, 7)),
  ...(await clusterBench()),
  ...(await tracingBench())
])
