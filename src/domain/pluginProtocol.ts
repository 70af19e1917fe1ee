/**
 * The plugin provider protocol: newline-delimited JSON over a plugin process's stdin
 * (daemon → plugin) and stdout (plugin → daemon). One plugin process hosts one session, so its
 * process tree is that agent's runtime. Every line is one JSON object of at most
 * `maxLineBytes`; stderr is free-form diagnostics. See docs/plugin-protocol.md.
 *
 * Version 2 gives every turn an id: `session.prompt` carries the daemon's `turnId`, and every
 * event of a turn (`timeline`, `turn.completed`, `turn.failed`) names it. The version is
 * negotiated on `connect`: the daemon lists the versions it speaks, the plugin answers one.
 *
 * @module
 */
import { Schema } from "effect"

/** Every protocol version the daemon speaks: what it offers a plugin on `connect`. */
export const protocolVersions: ReadonlyArray<number> = [1, 2]
/** The newest protocol version; write new plugins for it. */
export const latestProtocolVersion = 2
/** The longest line on the protocol, in bytes (1 MiB); a longer line from a plugin is dropped as a protocol error. */
export const maxLineBytes = 1024 * 1024

/** Capabilities a plugin may advertise on connect and per session. */
export const Capability = Schema.Literals(["session.can_stop_runtime", "session.steer", "session.resume"])
export type Capability = typeof Capability.Type

// ---- daemon → plugin ----------------------------------------------------------------------

/** The first request: negotiates the protocol version and tells the plugin where it may keep its state; answered `connected`. */
export const Connect = Schema.Struct({
  type: Schema.Literal("connect"),
  requestId: Schema.String,
  /** 1, so that a version-1 plugin (which checks it) connects; `protocolVersions` is the offer. */
  protocolVersion: Schema.Number,
  /** Every version the daemon speaks; the plugin answers the highest it speaks too. */
  protocolVersions: Schema.Array(Schema.Number),
  /** A directory the plugin may keep its state in (transcripts, …). */
  home: Schema.String
})

/** Opens the process's one session, new or resumed by id, in the agent's working directory; answered `session.opened`. */
export const SessionOpen = Schema.Struct({
  type: Schema.Literal("session.open"),
  requestId: Schema.String,
  /** The daemon's agent id, for the plugin's logs. */
  agentId: Schema.String,
  cwd: Schema.String,
  /** The provider session to resume, or null to start a new one. */
  resumeSessionId: Schema.NullOr(Schema.String)
})

/** Starts a turn with the prompt, or steers it into the running turn; answered with `PromptAccepted` as soon as the turn has started. */
export const SessionPrompt = Schema.Struct({
  type: Schema.Literal("session.prompt"),
  requestId: Schema.String,
  sessionId: Schema.String,
  prompt: Schema.String,
  /** `turn` starts a turn; `steer` adds to the running turn (answered `accepted: false` if none). */
  mode: Schema.Literals(["turn", "steer"]),
  /** Version 2: the turn this prompt starts (`turn`), or the running turn to steer into (`steer`). */
  turnId: Schema.String
})

/** Asks the plugin to cut the running turn short. */
export const SessionInterrupt = Schema.Struct({
  type: Schema.Literal("session.interrupt"),
  requestId: Schema.String,
  sessionId: Schema.String
})

/** Releases the session's live resources without deleting its saved conversation; the daemon then ends the process group. */
export const SessionClose = Schema.Struct({
  type: Schema.Literal("session.close"),
  requestId: Schema.String,
  sessionId: Schema.String
})

/**
 * The runtime safety query (C6): may the runtime stop now? Answered with `CanStopResult`; sent
 * only when both the connection and the session advertised `session.can_stop_runtime`.
 */
export const SessionCanStopRuntime = Schema.Struct({
  type: Schema.Literal("session.can_stop_runtime"),
  requestId: Schema.String,
  sessionId: Schema.String
})

/** The daemon has taken an autonomous notification; the plugin may forget it. */
export const NotificationAck = Schema.Struct({
  type: Schema.Literal("notification.ack"),
  sessionId: Schema.String,
  notificationId: Schema.String
})

/** Every message the daemon writes to a plugin's stdin. */
export const DaemonMessage = Schema.Union([
  Connect,
  SessionOpen,
  SessionPrompt,
  SessionInterrupt,
  SessionClose,
  SessionCanStopRuntime,
  NotificationAck
])
export type DaemonMessage = typeof DaemonMessage.Type

// ---- plugin → daemon ----------------------------------------------------------------------

/** The answer to `connect`: the version the plugin chose from the offer, its provider name and its capabilities. */
export const Connected = Schema.Struct({
  type: Schema.Literal("connected"),
  requestId: Schema.String,
  protocolVersion: Schema.Number,
  provider: Schema.String,
  capabilities: Schema.Array(Schema.String)
})

/** The answer to `session.open`: the provider's session id (the requested one on a resume) and the session's capabilities. */
export const SessionOpened = Schema.Struct({
  type: Schema.Literal("session.opened"),
  requestId: Schema.String,
  sessionId: Schema.String,
  capabilities: Schema.Array(Schema.String)
})

/** Success of any other request; `result` depends on the request. */
export const RequestCompleted = Schema.Struct({
  type: Schema.Literal("request.completed"),
  requestId: Schema.String,
  result: Schema.optionalKey(Schema.Json)
})

/** The answer to any request that failed; `message` says why. */
export const RequestFailed = Schema.Struct({
  type: Schema.Literal("request.failed"),
  requestId: Schema.String,
  message: Schema.String
})

/** A chunk of the running turn's output; counts as activity. The turn's reply is in `turn.completed`. */
export const Timeline = Schema.Struct({
  type: Schema.Literal("timeline"),
  sessionId: Schema.String,
  /** Version 2: the turn the output belongs to. */
  turnId: Schema.optionalKey(Schema.String),
  text: Schema.String
})

/** The turn ended; version 2 requires `turnId` (an event for any other turn is refused). */
export const TurnCompleted = Schema.Struct({
  type: Schema.Literal("turn.completed"),
  sessionId: Schema.String,
  turnId: Schema.optionalKey(Schema.String),
  reply: Schema.String
})

/** The turn ended in failure; `message` is what the caller is told. Version 2 requires `turnId`. */
export const TurnFailed = Schema.Struct({
  type: Schema.Literal("turn.failed"),
  sessionId: Schema.String,
  turnId: Schema.optionalKey(Schema.String),
  message: Schema.String
})

/**
 * Work the agent did on its own (a background job's completion report). It stays undelivered,
 * and vetoes release, until the daemon acknowledges it with `notification.ack`.
 */
export const Notification = Schema.Struct({
  type: Schema.Literal("notification"),
  sessionId: Schema.String,
  notificationId: Schema.String,
  text: Schema.String
})

/** Every message a plugin may write to its stdout: replies to requests, and events. */
export const PluginMessage = Schema.Union([
  Connected,
  SessionOpened,
  RequestCompleted,
  RequestFailed,
  Timeline,
  TurnCompleted,
  TurnFailed,
  Notification
])
export type PluginMessage = typeof PluginMessage.Type

/** The result of `session.prompt`. */
export const PromptAccepted = Schema.Struct({ accepted: Schema.Boolean })
/** The result of `session.can_stop_runtime`; a veto may say why (shown to the operator). */
export const CanStopResult = Schema.Struct({
  sessionId: Schema.String,
  canStop: Schema.Boolean,
  reason: Schema.optionalKey(Schema.String)
})

/** Decodes one line of a plugin's stdout into a `PluginMessage`; fails on anything that is not one. */
export const decodePluginLine = Schema.decodeUnknownEffect(Schema.fromJsonString(PluginMessage))
/** Encodes a `DaemonMessage` as one line of JSON (without the newline) for a plugin's stdin. */
export const encodeDaemonMessage = Schema.encodeSync(Schema.fromJsonString(DaemonMessage))
