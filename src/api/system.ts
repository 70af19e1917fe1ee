/** Health and metrics: no token. The client calls them as `client.health()`, `client.metrics()`. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { StartsDaemon } from "./annotations.ts"

/** `GET /v1/health`: the daemon answers, and which version it is. */
export const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  /** The package version (as `quiesce --version` and the OpenAPI document say). */
  version: Schema.String,
  /** How long this process has run, in seconds. */
  uptimeSeconds: Schema.Number
})

/** The Prometheus text exposition format. */
export const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

/** The daemon's health and metrics. */
export class SystemGroup extends HttpApiGroup.make("system", { topLevel: true }).add(
  HttpApiEndpoint.get("health", "/v1/health", { success: Health }).annotate(StartsDaemon, false),
  HttpApiEndpoint.get("metrics", "/metrics", {
    success: Schema.String.pipe(HttpApiSchema.asText({ contentType: metricsContentType }))
  }).annotate(StartsDaemon, false)
) {}
