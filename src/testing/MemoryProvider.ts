import { Effect, Layer } from "effect"
import type { PersistenceHandle } from "../domain/agent.ts"
import { ProviderFailed, type ProviderRegistrationRefused, type RuntimeProbeFailed } from "../domain/errors.ts"
import type { AgentClient, AgentSession, SessionConfig, SessionEvent, StopAnswer, TurnEnd } from "../domain/provider.ts"
import { ProviderRegistry } from "../services/ProviderRegistry.ts"

/**
 * One prompt a `MemoryProvider` session received, in order of arrival: as a new turn, steered
 * into the running turn, or handled out of band as a command.
 */
export interface Delivery {
  readonly sessionId: string
  readonly prompt: string
  readonly via: "turn" | "steer" | "out-of-band"
}

interface LiveSession {
  readonly sessionId: string
  readonly config: SessionConfig
  turnRunning: boolean
  closed: boolean
}

/**
 * An in-memory provider for tests and benchmarks: sessions are transcripts kept by the provider
 * (so a resumed session sees its history), and every knob a scenario needs is a public field.
 */
export class MemoryProvider {
  readonly provider: string
  readonly client: AgentClient
  /** Adds this provider to the `ProviderRegistry`. */
  readonly layer: Layer.Layer<never, ProviderRegistrationRefused, ProviderRegistry>
  /** Saved conversations by session id: survive close, as a real provider's transcripts do. */
  readonly transcripts = new Map<string, Array<string>>()
  readonly deliveries: Array<Delivery> = []
  readonly live = new Map<string, LiveSession>()
  creates = 0
  resumes = 0
  closes = 0
  /** Prompts handled out of band instead of as turns. */
  readonly commands = new Set<string>(["/maintenance"])
  /** Runs before a new session opens: holds an agent's creation. */
  createGate: Effect.Effect<void> = Effect.void
  /** Runs before a prompt is accepted (turn, steer or command): holds dispatch acknowledgement. */
  dispatchGate: Effect.Effect<void> = Effect.void
  /** Runs at the start of every resume, before the session opens. */
  resumeGate: Effect.Effect<void> = Effect.void
  /** How many of the next turn starts are refused (provider unavailable): they never run. */
  failingTurnStarts = 0
  /**
   * How many of the next turn starts reach the provider (the prompt is delivered) but fail as a
   * timeout would: whether they ran is unknown to the registry.
   */
  unansweredTurnStarts = 0
  /** Holds every turn open until it completes; undefined ends turns at once. */
  turnGate: Effect.Effect<void> | undefined = undefined
  /** How a turn ends once its gate opens: by default it completes with no reply. */
  turnEnd: (prompt: string) => Effect.Effect<TurnEnd, ProviderFailed> = () => Effect.succeed({ reply: null })
  /** Whether sessions can steer a prompt into a running turn (set before they open). */
  steers = true
  /** Runs at the start of every close, before it completes. */
  closeGate: Effect.Effect<void> = Effect.void
  /** When set, closes fail with it and the session stays live. */
  closeFailure: string | undefined = undefined
  /** Called while a session opens, before it is handed to the registry (to report early events). */
  onOpen: ((config: SessionConfig) => void) | undefined = undefined
  /** Like providers that learn their session id from the first turn: no handle until a turn ended. */
  reportsSessionAfterTurn = false
  /** Told of every permission answer that reaches a session. */
  onPermissionAnswer: ((permissionId: string, allow: boolean) => void) | undefined = undefined
  /** The provider veto; undefined means the provider has no check. */
  probe: ((sessionId: string) => Effect.Effect<StopAnswer, RuntimeProbeFailed>) | undefined = undefined
  #sessions = 0

  constructor(provider = "memory") {
    this.provider = provider
    this.client = {
      provider,
      create: (config) =>
        Effect.andThen(
          Effect.suspend(() => this.createGate),
          Effect.sync(() => {
            this.creates++
            return this.#session(`${provider}-session-${++this.#sessions}`, config)
          })
        ),
      resume: (handle, config) =>
        Effect.andThen(Effect.suspend(() => this.resumeGate), () => {
          if (!this.transcripts.has(handle.sessionId)) {
            return Effect.fail(
              new ProviderFailed({ provider, operation: "resume", message: `unknown session ${handle.sessionId}` })
            )
          }
          this.resumes++
          return Effect.succeed(this.#session(handle.sessionId, config))
        })
    }
    this.layer = ProviderRegistry.register(Effect.succeed(this.client))
  }

  /** Reports an event from the live session of `agentId`. */
  emit(agentId: string, event: SessionEvent): void {
    for (const session of this.live.values()) {
      if (session.config.agentId === agentId && !session.closed) session.config.onEvent(event)
    }
  }

  deliveredTo(sessionId: string): ReadonlyArray<string> {
    return this.deliveries.filter((delivery) => delivery.sessionId === sessionId).map((delivery) => delivery.prompt)
  }

  #session(sessionId: string, config: SessionConfig): AgentSession {
    const state: LiveSession = { sessionId, config, turnRunning: false, closed: false }
    this.live.set(sessionId, state)
    const transcript = this.transcripts.get(sessionId) ?? []
    this.transcripts.set(sessionId, transcript)
    const deliver = (prompt: string, via: Delivery["via"]) => {
      this.deliveries.push({ sessionId, prompt, via })
      transcript.push(prompt)
    }
    const failed = (operation: string, message: string, refused?: boolean) =>
      new ProviderFailed({ provider: this.provider, operation, message, ...(refused === true ? { refused } : {}) })
    const handle: PersistenceHandle = { provider: this.provider, sessionId, data: {} }
    const probe = this.probe
    let sessionKnown = !this.reportsSessionAfterTurn
    this.onOpen?.(config)
    return {
      persistence: Effect.sync(() => (sessionKnown ? handle : null)),
      startTurn: (prompt) =>
        Effect.andThen(this.dispatchGate, () => {
          if (state.closed) return Effect.fail(failed("startTurn", "session is closed", true))
          if (this.failingTurnStarts > 0) {
            this.failingTurnStarts--
            return Effect.fail(failed("startTurn", "provider unavailable", true))
          }
          if (this.unansweredTurnStarts > 0) {
            this.unansweredTurnStarts--
            deliver(prompt, "turn")
            return Effect.fail(failed("startTurn", "no answer in time"))
          }
          state.turnRunning = true
          deliver(prompt, "turn")
          return Effect.succeed(
            (this.turnGate ?? Effect.void).pipe(
              Effect.andThen(Effect.suspend(() => this.turnEnd(prompt))),
              Effect.ensuring(Effect.sync(() => {
                state.turnRunning = false
                sessionKnown = true
              }))
            )
          )
        }),
      steer: this.steers
        ? (prompt) =>
          Effect.andThen(this.dispatchGate, Effect.sync(() => {
            if (!state.turnRunning) return false
            deliver(prompt, "steer")
            return true
          }))
        : undefined,
      outOfBand: (prompt) => this.commands.has(prompt) ? Effect.sync(() => deliver(prompt, "out-of-band")) : undefined,
      respondToPermission: (permissionId, allow) =>
        Effect.sync(() => {
          this.onPermissionAnswer?.(permissionId, allow)
          config.onEvent({ _tag: "PermissionResolved", id: permissionId })
        }),
      interrupt: Effect.void,
      close: Effect.suspend(() => {
        this.closes++
        return this.closeGate.pipe(Effect.andThen(Effect.suspend(() => {
          if (this.closeFailure !== undefined) return Effect.fail(failed("close", this.closeFailure))
          state.closed = true
          this.live.delete(sessionId)
          return Effect.void
        })))
      }),
      canStopRuntime: probe === undefined ? undefined : Effect.suspend(() => probe(sessionId))
    }
  }
}

/** A registry holding just this provider. */
export const providerRegistryWith = (provider: MemoryProvider) =>
  provider.layer.pipe(Layer.provideMerge(ProviderRegistry.layer))
