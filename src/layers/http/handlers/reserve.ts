/** The reserve group's handlers: the warm reserves with the memory of their processes, a resize, the config reload. */
import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { QuiesceApi } from "../../../api/QuiesceApi.ts"
import { warmReserveRow } from "../../../api/views.ts"
import { type ConfigReloaded, ConfigReloadFailed } from "../../../domain/config.ts"
import type { WarmReserveView } from "../../../domain/warmReserve.ts"
import { ProcessInspection } from "../../../services/ProcessInspection.ts"
import { WarmReserve } from "../../../services/WarmReserve.ts"
import { noSamples } from "../../collector/runtimeRows.ts"

/** The reserve group, reloading the configuration with `reloadConfig`. */
export const reserveHandlers = (reloadConfig: Effect.Effect<ConfigReloaded, ConfigReloadFailed>) =>
  HttpApiBuilder.group(
    QuiesceApi,
    "reserve",
    Effect.fn(function*(handlers) {
      const reserve = yield* WarmReserve
      const inspection = yield* ProcessInspection

      /** Each reserve with the memory of its processes, sampled in one query. */
      const rowsOf = (views: ReadonlyArray<WarmReserveView>) =>
        Effect.gen(function*() {
          const pids = views.flatMap((view) => view.ready.map((process) => process.pid))
          const samples = pids.length === 0 ? noSamples : yield* inspection.sampleAll(pids)
          return views.map((view) => warmReserveRow(view, (pid) => samples.get(pid) ?? Option.none()))
        })

      return handlers
        .handle("list", () => Effect.flatMap(reserve.reserves, rowsOf))
        .handle("resize", ({ params, payload }) =>
          reserve.resize(params.provider, payload.target).pipe(
            Effect.flatMap((view) => rowsOf([view])),
            Effect.map((rows) => rows[0]!)
          ))
        .handle("reload", () => reloadConfig)
    })
  )

/** A host without a configuration file has nothing to reload. */
export const noConfigFile = Effect.fail(new ConfigReloadFailed({ message: "This host has no configuration file to reload" }))
