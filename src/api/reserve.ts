/** The warm reserves (H4) and the configuration reload that resizes them. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { ConfigReloaded } from "../domain/config.ts"
import { WarmProcessView, WarmReserveSize, WarmReserveView } from "../domain/warmReserve.ts"
import { StartsDaemon } from "./annotations.ts"
import {
  ConfigReloadFailedError,
  InvalidWarmReserveSizeError,
  ProviderNotFoundError,
  WarmReserveUnsupportedError
} from "./errors.ts"
import { AdmissionGate, Authorization } from "./middleware.ts"

/** A warm process and its memory (null when unmeasured, never guessed). */
export const WarmProcessRow = Schema.Struct({
  ...WarmProcessView.fields,
  rssBytes: Schema.NullOr(Schema.Number),
  measuredProcesses: Schema.NullOr(Schema.Number)
})
export type WarmProcessRow = typeof WarmProcessRow.Type

/** A provider's warm reserve, its ready processes measured. */
export const WarmReserveRow = Schema.Struct({ ...WarmReserveView.fields, ready: Schema.Array(WarmProcessRow) })
export type WarmReserveRow = typeof WarmReserveRow.Type

/** The warm reserves and the configuration reload; none starts a retired daemon. */
export class ReserveGroup extends HttpApiGroup.make("reserve")
  .add(
    HttpApiEndpoint.get("list", "/v1/warm-reserve", { success: Schema.Array(WarmReserveRow) }).annotate(StartsDaemon, false),
    HttpApiEndpoint.put("resize", "/v1/warm-reserve/:provider", {
      params: { provider: Schema.String },
      payload: Schema.Struct({ target: WarmReserveSize }),
      success: WarmReserveRow,
      error: [ProviderNotFoundError, WarmReserveUnsupportedError, InvalidWarmReserveSizeError]
    }).middleware(AdmissionGate).annotate(StartsDaemon, false),
    HttpApiEndpoint.post("reload", "/v1/config/reload", {
      success: ConfigReloaded,
      error: ConfigReloadFailedError
    }).middleware(AdmissionGate).annotate(StartsDaemon, false)
  )
  .middleware(Authorization)
{}
