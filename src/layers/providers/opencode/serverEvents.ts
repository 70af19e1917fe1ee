/**
 * What the provider reads from the server's events: the envelope's few types it acts on, decoded
 * by type. Every other event that names a session is activity of that session; the rest (dozens:
 * plugins, catalog, diffs …) is ignored.
 */
import { Schema } from "effect"
import {
  type EventEnvelope,
  PermissionAskedEvent,
  PermissionRepliedEvent,
  SessionCreatedEvent,
  SessionErrorEvent,
  SessionScoped,
  SessionStatusEvent
} from "./apiTypes.ts"

/** What an event about one session changes, besides showing it active. */
export type SessionChange =
  | { readonly _tag: "PermissionAsked"; readonly id: string }
  | { readonly _tag: "PermissionReplied"; readonly id: string }
  | { readonly _tag: "Status"; readonly status: "idle" | "busy" | "retry" }

/** One event of the stream, as the provider reads it. */
export type ServerEvent =
  /** The first event of every connection. */
  | { readonly _tag: "Connected" }
  | { readonly _tag: "SessionCreated"; readonly id: string; readonly parentID: string | undefined }
  | {
    readonly _tag: "SessionError"
    readonly sessionID: string | undefined
    readonly error: { readonly name: string; readonly data?: unknown } | undefined
  }
  /** Any other event naming a session; `change` when it is one the provider acts on. */
  | { readonly _tag: "AboutSession"; readonly sessionID: string; readonly change: SessionChange | undefined }

const decodeWith = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) => {
  const decode = Schema.decodeUnknownOption(schema)
  return (value: unknown): S["Type"] | undefined => {
    const decoded = decode(value)
    return decoded._tag === "Some" ? decoded.value : undefined
  }
}
const asScoped = decodeWith(SessionScoped)
const asStatus = decodeWith(SessionStatusEvent)
const asError = decodeWith(SessionErrorEvent)
const asPermissionAsked = decodeWith(PermissionAskedEvent)
const asPermissionReplied = decodeWith(PermissionRepliedEvent)
const asCreated = decodeWith(SessionCreatedEvent)

/** The change an event about a session makes; `undefined` when it is activity only. */
const changeOf = (event: EventEnvelope): SessionChange | undefined => {
  switch (event.type) {
    case "permission.asked": {
      const asked = asPermissionAsked(event.properties)
      return asked === undefined ? undefined : { _tag: "PermissionAsked", id: asked.id }
    }
    case "permission.replied": {
      const replied = asPermissionReplied(event.properties)
      return replied === undefined ? undefined : { _tag: "PermissionReplied", id: replied.requestID }
    }
    case "session.idle":
      return { _tag: "Status", status: "idle" }
    case "session.status": {
      const status = asStatus(event.properties)?.status.type
      return status === undefined ? undefined : { _tag: "Status", status }
    }
    default:
      return undefined
  }
}

/** Reads one envelope; `undefined` for an event the provider does not use. */
export const readServerEvent = (event: EventEnvelope): ServerEvent | undefined => {
  if (event.type === "server.connected") return { _tag: "Connected" }
  // A `session.created` that does not decode still names its session: it counts as activity.
  const created = event.type === "session.created" ? asCreated(event.properties) : undefined
  if (created !== undefined) return { _tag: "SessionCreated", id: created.info.id, parentID: created.info.parentID }
  if (event.type === "session.error") {
    const error = asError(event.properties)
    return { _tag: "SessionError", sessionID: error?.sessionID, error: error?.error }
  }
  const about = asScoped(event.properties)?.sessionID
  return about === undefined ? undefined : { _tag: "AboutSession", sessionID: about, change: changeOf(event) }
}
