import { Schema } from "effect"
import { portHolder } from "../host/portHolder.ts"

const codeOf = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string" ? cause.code : undefined

/** Why a listen failed, for people: the port in use names what holds it when that can be known. */
const reasonOf = (port: number, cause: unknown): string => {
  switch (codeOf(cause)) {
    case "EADDRINUSE": {
      const holder = portHolder(port)
      return holder === undefined
        ? "the port is in use by another program (which one could not be read: it may belong to another user)"
        : `the port is in use by pid ${holder.pid} (${holder.command || "command line not readable"})`
    }
    case "EACCES":
      return "permission denied (ports below 1024 need privileges)"
    case "EADDRNOTAVAIL":
      return "that address is not one of this machine's"
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "the host name does not resolve"
    default:
      return cause instanceof Error ? cause.message : String(cause)
  }
}

/** The HTTP listener could not be opened (H1). */
export class ListenFailed extends Schema.TaggedError<ListenFailed>()("ListenFailed", {
  host: Schema.String,
  port: Schema.Number,
  message: Schema.String
}) {
  /** `choose` says where another port is chosen. */
  static readonly of = (host: string, port: number, cause: unknown, choose: string) =>
    new ListenFailed({
      host,
      port,
      message: `Cannot listen on ${host.includes(":") ? `[${host}]` : host}:${port}: ${reasonOf(port, cause)}. ` +
        `Choose another port with ${choose}`
    })
}
