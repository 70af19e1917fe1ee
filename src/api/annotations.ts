/**
 * What the API's endpoints say of themselves beyond their schemas, read by the servers and the
 * hub (not by the OpenAPI document).
 */
import { Context } from "effect"

/**
 * Whether a request to the endpoint may start a home's retired daemon when it comes through the
 * hub: the mutations that need the daemon's agents (create, prompt, interrupt, permission answer,
 * delete) do; reads, and the actions that only make sense on a running daemon (retire now,
 * collect, sweep, close…), do not. Every endpoint of the daemon's API decides it.
 */
export class StartsDaemon extends Context.Service<StartsDaemon, boolean>()("quiesce/api/StartsDaemon") {}
