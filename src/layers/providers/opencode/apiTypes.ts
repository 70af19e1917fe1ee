/**
 * The part of the OpenCode server HTTP API (`opencode serve`) the runtime safety probe (P4) reads.
 *
 * Source (read from the published package, not guessed): `opencode-ai@1.18.33` is a launcher whose
 * binary ships in `opencode-linux-x64@1.18.33` (`bin/opencode`). Run as
 * `opencode serve --hostname 127.0.0.1 --port N`, it serves its OpenAPI 3.1 document at `GET /doc`
 * (`info.title: "opencode"`). The routes and component schemas used here are from that document:
 *
 * v1 (per directory instance: `?directory=` selects the instance, the default is the server's cwd)
 * - `GET /session/{sessionID}` (`session.get`) → `Session` (`id`, `directory`, `parentID?`, …);
 *   404 with a JSON `NotFoundError` for an unknown id.
 * - `GET /session/{sessionID}/children` (`session.children`) → `Session[]`.
 * - `GET /session/status` (`session.status`) → `{ [sessionID]: SessionStatus }` where
 *   `SessionStatus` is `{type:"idle"} | {type:"retry",attempt,message,next,…} | {type:"busy"}`.
 *   Observed: an idle session is simply absent (`{}`), so absence means "not executing".
 * - `GET /pty` (`pty.list`) → `Pty[]` (`id`, `cwd`, `status: "running" | "exited"`, `pid`, …).
 *   Observed: the list is per directory instance — a PTY created with `?directory=D` is listed only
 *   by `GET /pty?directory=D`.
 *
 * v2 (`/api/...`, separate registries)
 * - `GET /api/session/active` (`v2.session.active`) → `{ data: { [sessionID]: {type:"running"} } }`,
 *   server-wide, no parameters.
 * - `GET /api/pty?location[directory]=D` (`v2.pty.list`) → `{ location: LocationInfo, data: Pty[] }`.
 *   Observed: a PTY created through v1 is not listed here, so both registries are checked; the
 *   answer echoes `location.directory`, which must be the directory asked about.
 *
 * Not in 1.18.33 (the spec names them for v2): a per-session inbox and a per-location shell list.
 * The probe asks `GET /api/session/{sessionID}/inbox` and `GET /api/shell?location[directory]=D`
 * (route names assumed from the spec; the release answers them, like every unknown route, with
 * `200 text/html` — the web UI). Their absence is an unknown, never an empty inventory.
 *
 * Every unknown route answers `200` with `Content-Type: text/html`, so every answer's content type
 * is checked before its body is decoded. Schemas accept and ignore fields they do not name, but an
 * enumerated value they do not know (a new status) fails to decode: an unknown is never read as idle.
 */
import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// v1
// ---------------------------------------------------------------------------------------------

/** `SessionStatus`: `retry` is a turn waiting to try again, so it counts as executing. */
export const SessionStatus = Schema.Struct({
  type: Schema.Literals(["idle", "retry", "busy"])
})
export type SessionStatus = typeof SessionStatus.Type

/** `GET /session/status`: only executing sessions are listed. */
export const SessionStatusMap = Schema.Record(Schema.String, SessionStatus)
export type SessionStatusMap = typeof SessionStatusMap.Type

/** `Pty`, shared by v1 and v2. `command` and `args` only name it in a veto: their absence is no fault. */
export const Pty = Schema.Struct({
  id: Schema.String,
  cwd: Schema.String,
  status: Schema.Literals(["running", "exited"]),
  pid: Schema.optionalKey(Schema.Number),
  command: Schema.optionalKey(Schema.NullOr(Schema.String)),
  args: Schema.optionalKey(Schema.NullOr(Schema.Array(Schema.String)))
})
export type Pty = typeof Pty.Type

/** `GET /pty`. */
export const PtyList = Schema.Array(Pty)
export type PtyList = typeof PtyList.Type

/** `Session`: the fields the probe walks the session tree with. */
export const Session = Schema.Struct({
  id: Schema.String,
  directory: Schema.String,
  parentID: Schema.optionalKey(Schema.String)
})
export type Session = typeof Session.Type

/** `GET /session/{sessionID}/children`. */
export const SessionList = Schema.Array(Session)
export type SessionList = typeof SessionList.Type

// ---------------------------------------------------------------------------------------------
// v2
// ---------------------------------------------------------------------------------------------

/** `SessionActive`. */
export const SessionActive = Schema.Struct({ type: Schema.Literal("running") })

/** `GET /api/session/active`. */
export const SessionActiveResponse = Schema.Struct({
  data: Schema.Record(Schema.String, SessionActive)
})
export type SessionActiveResponse = typeof SessionActiveResponse.Type

export const LocationInfo = Schema.Struct({ directory: Schema.String })

/** `GET /api/pty?location[directory]=D`. */
export const PtyListV2 = Schema.Struct({
  location: LocationInfo,
  data: Schema.Array(Pty)
})
export type PtyListV2 = typeof PtyListV2.Type

/**
 * `GET /api/session/{sessionID}/inbox` — not in 1.18.33. Assumed v2 envelope: `data` lists the
 * messages waiting for the session; any entry is pending work. A `cursor.next` means a further page.
 */
export const InboxResponse = Schema.Struct({
  data: Schema.Array(Schema.Unknown),
  cursor: Schema.optionalKey(Schema.Struct({ next: Schema.optionalKey(Schema.String) }))
})
export type InboxResponse = typeof InboxResponse.Type

/**
 * `GET /api/shell?location[directory]=D` — not in 1.18.33. Assumed v2 envelope: `data` lists the
 * shells (running commands) of the location; any entry is live work.
 */
export const ShellListResponse = Schema.Struct({
  location: Schema.optionalKey(LocationInfo),
  data: Schema.Array(Schema.Unknown),
  cursor: Schema.optionalKey(Schema.Struct({ next: Schema.optionalKey(Schema.String) }))
})
export type ShellListResponse = typeof ShellListResponse.Type

// ---------------------------------------------------------------------------------------------
// What the provider (not the probe) reads, from the same `/doc` of 1.18.33
// ---------------------------------------------------------------------------------------------

/** `GET /global/health` → `{ healthy: true, version: "1.18.33" }`. */
export const Health = Schema.Struct({ healthy: Schema.Boolean, version: Schema.String })
export type Health = typeof Health.Type

/** `POST /session/{id}/abort`, `POST /permission/{id}/reply`: a bare boolean. */
export const Acknowledged = Schema.Boolean

/** One part of a message: only text parts carry the reply. */
export const Part = Schema.Struct({
  type: Schema.String,
  text: Schema.optionalKey(Schema.String),
  synthetic: Schema.optionalKey(Schema.Boolean)
})

/** `GET /session/{id}/message?limit=N` → the newest N messages, oldest first. */
export const MessageList = Schema.Array(Schema.Struct({
  info: Schema.Struct({ id: Schema.String, role: Schema.String }),
  parts: Schema.Array(Part)
}))
export type MessageList = typeof MessageList.Type

/**
 * `GET /event?directory=D` is a server-sent event stream of `{ id, type, properties }`. Every event
 * is decoded with this envelope first; the few the provider acts on are then decoded by type, and
 * the rest (dozens: plugins, catalog, diffs …) count as activity only when they name the session.
 */
export const EventEnvelope = Schema.Struct({ type: Schema.String, properties: Schema.Unknown })
export type EventEnvelope = typeof EventEnvelope.Type

/** Events that name a session carry `properties.sessionID`. */
export const SessionScoped = Schema.Struct({ sessionID: Schema.String })

/** `session.status`: `{ sessionID, status: SessionStatus }`. */
export const SessionStatusEvent = Schema.Struct({ sessionID: Schema.String, status: SessionStatus })

/** `session.error`: `{ sessionID?, error?: { name, data } }`; `MessageAbortedError` is an interrupt. */
export const SessionErrorEvent = Schema.Struct({
  sessionID: Schema.optionalKey(Schema.String),
  error: Schema.optionalKey(Schema.Struct({ name: Schema.String, data: Schema.optionalKey(Schema.Unknown) }))
})

/** `permission.asked`: the `PermissionRequest` (`id` starts with `per`). */
export const PermissionAskedEvent = Schema.Struct({ id: Schema.String, sessionID: Schema.String, permission: Schema.String })

/** `permission.replied`: `{ sessionID, requestID, reply }`. */
export const PermissionRepliedEvent = Schema.Struct({ sessionID: Schema.String, requestID: Schema.String })

/** `session.created`: `{ sessionID, info: Session }`; a child names its parent in `info.parentID`. */
export const SessionCreatedEvent = Schema.Struct({ sessionID: Schema.String, info: Session })
