import { Schema } from "effect"

/**
 * The plugin provider protocol: newline-delimited JSON over a plugin process's stdin
 * (daemon → plugin) and stdout (plugin → daemon). One plugin process hosts one session, so its
 * process tree is that agent's runtime. Every line is one JSON object of at most
 * `maxLineBytes`; stderr is free-form diagnostics. See docs/plugin-protocol.md.
 *
 * Version 2 gives every turn an id: `session.prompt` carries the daemon's `turnId`, and every
 * event of a turn (`timeline`, `turn.completed`, `turn.failed`) names it. The version is
 * negotiated on `connect`: the daemon lists the versions it speaks, the plugin answers one.
 */
export const protocolVersions: ReadonlyArray<number> = [1, 2]
export const latestProtocolVersion = 2
export const maxLineBytes = 1024 * 1024

/** Capabilities a plugin may advertise on connect and per session. */
export const Capability = Schema.Literals(["session.can_stop_runtime", "session.steer", "session.resume"])
export type Capability = typeof Capability.Type

// ---- daemon → plugin ----------------------------------------------------------------------

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

export const SessionOpen = Schema.Struct({
  type: Schema.Literal("session.open"),
  requestId: Schema.String,
  /** The daemon's agent id, for the plugin's logs. */
  agentId: Schema.String,
  cwd: Schema.String,
  /** The provider session to resume, or null to start a new one. */
  resumeSessionId: Schema.NullOr(Schema.String)
})

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

export const SessionInterrupt = Schema.Struct({
  type: Schema.Literal("session.interrupt"),
  requestId: Schema.String,
  sessionId: Schema.String
})

export const SessionClose = Schema.Struct({
  type: Schema.Literal("session.close"),
  requestId: Schema.String,
  sessionId: Schema.String
})

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

export const Connected = Schema.Struct({
  type: Schema.Literal("connected"),
  requestId: Schema.String,
  protocolVersion: Schema.Number,
  provider: Schema.String,
  capabilities: Schema.Array(Schema.String)
})

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

export const decodePluginLine = Schema.decodeUnknownEffect(Schema.fromJsonString(PluginMessage))
export const encodeDaemonMessage = Schema.encodeSync(Schema.fromJsonString(DaemonMessage))
