/**
 * What the hub's relay of live events adds to a daemon's stream (`docs/hub.md`, "Live events
 * through the hub"): a notice, without an id, that the home has no daemon now.
 */
import { Schema } from "effect"

/**
 * The home has no daemon now (retired, force-stopped, starting): the relay waits for one, and the
 * events of the next begin with a `gap`. Sent without an id (a reader's `Last-Event-ID` stays the
 * last event's), once each time the relay begins to wait.
 */
export const NoDaemon = Schema.TaggedStruct("no-daemon", {})
export type NoDaemon = typeof NoDaemon.Type
