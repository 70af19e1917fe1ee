/**
 * One runtime's session as its events show it: the turn in flight, the permissions pending, and
 * the session's tree (`sessionTree.ts`). It routes each event of the stream to what it changes
 * and reports to the registry (`SessionConfig.onEvent`); it sends nothing to the server but the
 * reply read that ends a turn.
 *
 * A turn ends at the first `idle` of the session after it was seen `busy`; an error the session
 * reports during the turn fails it (an abort does not).
 */
import { Deferred, Effect, Exit } from "effect"
import type { ProviderFailed } from "../../../domain/errors.ts"
import type { SessionEvent, TurnEnd } from "../../../domain/provider.ts"
import type { SessionStatusMap } from "./apiTypes.ts"
import { providerFailure } from "./serverCalls.ts"
import type { ServerEvent, SessionChange } from "./serverEvents.ts"
import { makeSessionTree, type PendingNotice } from "./sessionTree.ts"

/** The turn in flight: it ends at the first `idle` after the session was seen `busy`. */
interface Turn {
  /** The daemon's id for the turn, which a veto names. */
  readonly id: string
  readonly done: Deferred.Deferred<TurnEnd, ProviderFailed>
  sawBusy: boolean
  error: string | undefined
}

/** The session, where its changes are reported, and how a turn's reply is read. */
export interface SessionStateOptions {
  readonly provider: string
  /** The root session (OpenCode's id, `ses…`). */
  readonly sessionId: string
  /** How long a completion notice may stay unseen, in milliseconds. */
  readonly noticeTimeout: number
  readonly onEvent: (event: SessionEvent) => void
  /** The reply of the turn that just ended (the newest assistant message's text). */
  readonly reply: Effect.Effect<string, ProviderFailed>
}

/** The session's state; see the module comment. */
export interface SessionState {
  /** Applies one event of the stream. */
  readonly apply: (event: ServerEvent) => Effect.Effect<void>
  /**
   * After a reconnect, events sent while no stream was open are lost: the statuses read again
   * end a turn whose idle was missed and keep a busy session from being forgotten.
   */
  readonly resync: (statuses: SessionStatusMap) => Effect.Effect<void>
  /**
   * Starts a turn with `send` (the prompt) unless one is running (then refused); its end, to await.
   * A turn whose prompt fails is forgotten.
   */
  readonly startTurn: (
    id: string,
    send: Effect.Effect<void, ProviderFailed>
  ) => Effect.Effect<Effect.Effect<TurnEnd, ProviderFailed>, ProviderFailed>
  /** Fails the turn in flight, if any. */
  readonly failTurn: (error: ProviderFailed) => void
  /** A permission was answered: it is no longer pending. */
  readonly resolvePermission: (id: string) => void
  /** What the adapter itself sees holding the runtime (a turn, a permission), if anything. */
  readonly adapterWork: () => string | undefined
  /** The oldest completion notice not yet run. */
  readonly pendingNotice: () => PendingNotice | undefined
}

/** The state of a session just created or resumed: no turn, nothing pending. */
export const makeSessionState = (options: SessionStateOptions): SessionState => {
  const { sessionId, onEvent } = options
  const failed = providerFailure(options.provider)
  const tree = makeSessionTree(options)
  let turn: Turn | undefined
  const permissions = new Set<string>()

  const finishTurn = (exit: Exit.Exit<TurnEnd, ProviderFailed>) => {
    const current = turn
    turn = undefined
    if (current !== undefined) Deferred.doneUnsafe(current.done, exit)
  }

  const resolvePermission = (id: string) => {
    if (permissions.delete(id)) onEvent({ _tag: "PermissionResolved", id })
  }

  const turnEnded = (current: Turn): Effect.Effect<void> =>
    options.reply.pipe(
      Effect.tap((text) => Effect.sync(() => onEvent({ _tag: "Reply", text }))),
      Effect.matchEffect({
        onFailure: (error) => Effect.sync(() => finishTurn(Exit.fail(error))),
        onSuccess: (text) =>
          Effect.sync(() =>
            finishTurn(
              current.error === undefined
                ? Exit.succeed({ reply: text === "" ? null : text })
                : Exit.fail(failed("turn", current.error))
            )
          )
      })
    )

  /** A status of a session of the tree: subagents, completion notices, and our turn. */
  const statusOf = (about: string, status: "idle" | "busy" | "retry"): Effect.Effect<void> => {
    tree.status(about, status)
    if (about !== sessionId) return Effect.void
    const current = turn
    if (current === undefined) return Effect.void
    if (status !== "idle") current.sawBusy = true
    // An `idle` before this turn went busy is left over from an earlier one (aborts repeat it).
    if (status === "idle" && current.sawBusy) return turnEnded(current)
    return Effect.void
  }

  const changed = (about: string, change: SessionChange): Effect.Effect<void> => {
    switch (change._tag) {
      case "PermissionAsked":
        // A subagent's permission too: unanswered, the subagent would wait forever.
        if (!permissions.has(change.id)) {
          permissions.add(change.id)
          onEvent({ _tag: "PermissionRequested", id: change.id })
        }
        return Effect.void
      case "PermissionReplied":
        resolvePermission(change.id)
        return Effect.void
      case "Status":
        return statusOf(about, change.status)
    }
  }

  return {
    apply: (event) => {
      switch (event._tag) {
        case "Connected":
          return Effect.void
        case "SessionCreated":
          tree.created(event.id, event.parentID)
          return Effect.void
        case "SessionError":
          if (event.sessionID === sessionId && turn !== undefined && event.error?.name !== "MessageAbortedError") {
            turn.error = `${event.error?.name ?? "error"}: ${JSON.stringify(event.error?.data ?? null).slice(0, 300)}`
          }
          return Effect.void
        case "AboutSession":
          if (!tree.inTree(event.sessionID)) return Effect.void
          onEvent({ _tag: "Activity" })
          return event.change === undefined ? Effect.void : changed(event.sessionID, event.change)
      }
    },
    resync: (statuses) =>
      Effect.forEach(tree.missedIdle(statuses), (id) => statusOf(id, "idle"), { discard: true }),
    startTurn: (id, send) =>
      Effect.gen(function*() {
        if (turn !== undefined) return yield* failed("prompt", "a turn is already running", true)
        const current: Turn = { id, done: Deferred.makeUnsafe<TurnEnd, ProviderFailed>(), sawBusy: false, error: undefined }
        turn = current
        yield* send.pipe(Effect.onError(() =>
          Effect.sync(() => {
            if (turn === current) turn = undefined
          })
        ))
        return Deferred.await(current.done)
      }),
    failTurn: (error) => finishTurn(Exit.fail(error)),
    resolvePermission,
    adapterWork: () => {
      if (turn !== undefined) return `turn ${turn.id} is running`
      if (permissions.size === 0) return undefined
      const ids = [...permissions]
      const shown = ids.slice(0, 3).join(", ")
      const more = ids.length > 3 ? ` and ${ids.length - 3} more` : ""
      return ids.length === 1 ? `permission ${shown} is pending` : `permissions ${shown}${more} are pending`
    },
    pendingNotice: tree.pendingNotice
  }
}
