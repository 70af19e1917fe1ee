/**
 * The daemon and the hub as programs and layers: run a daemon over a home folder (configuration,
 * SQLite state, HTTP API, self-retirement), or a hub that starts daemons on demand and routes to
 * them. The daemon loads the ACP SDK only when a configured provider has kind `acp`, and the
 * PostgreSQL driver only when `config.json` has a `cluster` section.
 *
 * @module
 */
export * from "../domain/hub.ts"
export * from "../domain/version.ts"
export * from "../services/DaemonLifecycle.ts"
export * from "../services/Admission.ts"
export * from "../services/InFlightRequests.ts"
export * as ApiServer from "../layers/http/ApiServer.ts"
export * as DaemonLifecycleLive from "../layers/retirement/DaemonLifecycleLive.ts"
export * as Home from "../layers/host/Home.ts"
export * as HubDaemons from "../layers/hub/HubDaemons.ts"
export * as HubServer from "../layers/http/HubServer.ts"
export { ConfigInvalid, type ConfigOverrides, loadConfig } from "../layers/host/loadConfig.ts"
export { providerLayer, providersLayer } from "../programs/providers.ts"
export { type HubRunOptions, runHub } from "../programs/hub.ts"
export {
  type DaemonOutcome,
  type OpeningObserver,
  type OpeningStage,
  runDaemon
} from "../programs/runDaemon.ts"
