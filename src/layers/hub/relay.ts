/**
 * An agent's live events relayed by the hub (`GET /v1/homes/{name}/agents/{id}/events`): the
 * daemon's server-sent events passed on frame by frame as they come, across the daemon's changes.
 * Reads never wake: while the home has no daemon (retired, stopped, starting) the relay waits
 * with heartbeat comments, and once a daemon runs (a prompt started it, or a person did) it
 * connects to it and goes on; a daemon that retires mid-stream does not end the relay either.
 *
 * Each connection asks for the events after the last id passed on (`Last-Event-ID`). A new
 * daemon did not issue that id, so it answers with a `gap` (after that id, resuming at its own
 * first kept): the reader learns of the daemon change before it reads the new daemon's ids. A
 * reader that had read nothing yet when the daemon changed is asked for from `0`: its gap is after
 * `0`, and it reads every event the new daemon kept for the agent (the accepted turn of the prompt
 * that started it).
 *
 * While the home has no daemon the reader is told so once (`no-daemon`, without an id). Nothing
 * is buffered beyond a frame: the daemon's body is pulled as the reader's socket takes it.
 */
import { Cause, Duration, Effect, type Scope, Stream } from "effect"
import { fromFirstKept, heartbeatSeconds, makeSseFrames, sseComment, type SseFrame } from "../../api/eventStream.ts"
import type { RoutingError } from "../../domain/hub.ts"
import type { NoDaemon } from "../../domain/relayEvent.ts"
import type { ForwardFailed, OpenedStream } from "./forward.ts"

/** Where the home's daemon is for the relay now: one to open the stream at, or none yet. */
export type Whereabouts =
  | {
    readonly _tag: "running"
    /** The daemon's instance: a change of it is a daemon change. */
    readonly instanceId: string
    /** Opens the agent's events there, after `lastEventId` (from now when undefined). */
    readonly open: (lastEventId: string | undefined) => Effect.Effect<OpenedStream, ForwardFailed, Scope.Scope>
  }
  | { readonly _tag: "none" }

/** What the relay needs: the home's daemon now (a routing error ends the relay), and how often to look. */
export interface RelayOptions {
  readonly whereabouts: Effect.Effect<Whereabouts, RoutingError>
  /** How long to wait before looking for a daemon again. */
  readonly poll: Duration.Input
  /** How often a comment goes to the reader, so the connection never looks idle. Default the daemon's. */
  readonly heartbeat?: Duration.Input | undefined
}

/** Where the relay starts: the reader's `Last-Event-ID`, the daemon that ran when it came, and its stream if it opened. */
export interface RelayStart {
  readonly lastEventId: string | undefined
  /** The daemon running when the reader came (its events are followed from then, not from 0). */
  readonly instanceId: string | undefined
  readonly first: Stream.Stream<Uint8Array, ForwardFailed> | undefined
}

/**
 * The frames of a server-sent event stream from its bytes as they arrive: a character split across
 * chunks waits for its rest, a frame for its blank line.
 */
export const makeFrameReader = () => {
  const decoder = new TextDecoder()
  const frames = makeSseFrames()
  return (bytes: Uint8Array): ReadonlyArray<SseFrame> => frames(decoder.decode(bytes, { stream: true }))
}

const encoder = new TextEncoder()

const noDaemon: NoDaemon = { _tag: "no-daemon" }

/** The relay's notice that the home has no daemon now: a frame without an id. */
const noDaemonFrame = encoder.encode(`event: ${noDaemon._tag}\ndata: ${JSON.stringify(noDaemon)}\n\n`)

/** The relayed stream (see the module's comment); it ends only when the home or the agent is gone, or the reader goes. */
export const relay = (options: RelayOptions, start: RelayStart): Stream.Stream<Uint8Array> => {
  let position = start.lastEventId
  let instance = start.instanceId
  let ended = false
  /** Whether the reader was told that the home has no daemon, since the last connection. */
  let toldNoDaemon = false
  /** Whether a daemon's stream just ended: a pause before looking again, so a daemon that is going is not asked in a loop. */
  let afterStream = start.first !== undefined

  /** The daemon's events passed on: its frames with an id, whole (its own heartbeats are not: the relay sends its own). */
  const passOn = (body: Stream.Stream<Uint8Array, ForwardFailed>): Stream.Stream<Uint8Array> => {
    const read = makeFrameReader()
    return body.pipe(
      Stream.map((bytes) => {
        let text = ""
        for (const frame of read(bytes)) {
          if (frame.id === undefined) continue
          position = frame.id
          text += `${frame.text}\n\n`
        }
        return text
      }),
      Stream.filter((text) => text !== ""),
      Stream.map((text) => encoder.encode(text)),
      // A connection that broke is a daemon that went away, or is going: look for one again.
      Stream.catchCause(() => Stream.empty)
    )
  }

  /** Waits for a daemon, then its events until its stream ends. */
  const connection: Stream.Stream<Uint8Array> = Stream.unwrap(Effect.gen(function*() {
    if (afterStream) {
      afterStream = false
      yield* Effect.sleep(options.poll)
    }
    while (true) {
      const where = yield* Effect.result(options.whereabouts)
      if (where._tag === "Failure") {
        // The home is no longer the hub's (or its daemon speaks another protocol): nothing to wait for.
        ended = true
        return Stream.empty
      }
      if (where.success._tag === "none" && !toldNoDaemon) {
        toldNoDaemon = true
        return Stream.make(noDaemonFrame)
      }
      if (where.success._tag === "running") {
        const { instanceId, open } = where.success
        const opened = yield* Effect.result(open(position ?? (instanceId === instance ? undefined : fromFirstKept)))
        if (opened._tag === "Success") {
          if (opened.success._tag === "stream") {
            instance = instanceId
            toldNoDaemon = false
            afterStream = true
            return passOn(opened.success.body)
          }
          // The agent is gone (deleted): its events are over.
          if (opened.success.response.status === 404) {
            ended = true
            return Stream.empty
          }
        }
      }
      yield* Effect.sleep(options.poll)
    }
  }))

  const connections = Stream.fromEffectRepeat(Effect.suspend(() => ended ? Cause.done() : Effect.succeed(connection)))
  const events = Stream.concat(
    start.first === undefined ? Stream.empty : passOn(start.first),
    Stream.flatMap(connections, (each) => each)
  )
  const heartbeat = Stream.tick(options.heartbeat ?? Duration.seconds(heartbeatSeconds)).pipe(
    Stream.map(() => encoder.encode(sseComment("heartbeat")))
  )
  return Stream.merge(events, heartbeat, { haltStrategy: "left" })
}
