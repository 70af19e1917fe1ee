import { Context, type Effect, type Scope, type Stream } from "effect"
import type {
  ConfirmationRequired,
  DaemonIncompatible,
  DaemonStartFailed,
  DaemonUnavailable,
  HomeArchived,
  HomeNotManaged,
  HubConfigInvalid,
  RoutingError,
  StaleIdentity
} from "../domain/hub.ts"
import type { DaemonRow, Inventory, PreparedRequest, RenderedIdentity, RoutedResponse, StopResult } from "../domain/hubDaemons.ts"
import type { RetirementAttemptView, RetirementFailed, RetirementRefused } from "../domain/retirement.ts"

/**
 * Live events through the hub: the relayed stream of server-sent events, or the
 * daemon's (or the saved store's) own answer when it refuses, as it answered (an unknown agent's 404).
 */
export type RelayedEvents =
  | { readonly _tag: "stream"; readonly body: Stream.Stream<Uint8Array> }
  | { readonly _tag: "answer"; readonly response: RoutedResponse }

/**
 * What the hub does with its homes' daemons: lists them, routes requests to them (starting one
 * only for a mutation), and carries out the operator's retire now, force stop and resume. The
 * layer: `layers/hub/HubDaemons.ts`.
 */
export class HubDaemons extends Context.Service<HubDaemons, {
  /** One row per home: its verified daemon, or what it is without one. Passive: no daemon is started or kept. */
  readonly inventory: Effect.Effect<Inventory, HubConfigInvalid>
  /** Forwards a request to the home's daemon; only a mutation may start one. */
  readonly route: (name: string, request: PreparedRequest) => Effect.Effect<RoutedResponse, RoutingError>
  /**
   * Follows an agent's live events (every agent's, without `agentId`) through whichever daemon the
   * home runs, never starting one (`layers/hub/relay.ts`): after `lastEventId` (the reader's
   * `Last-Event-ID`), or from now. The daemon's connection lives in the caller's scope until the
   * stream takes it over.
   */
  readonly follow: (
    name: string,
    agentId: string | undefined,
    lastEventId: string | undefined
  ) => Effect.Effect<RelayedEvents, RoutingError, Scope.Scope>
  /** The daemon's own retire now, on the identity the caller saw. */
  readonly retire: (name: string, identity: RenderedIdentity) => Effect.Effect<
    RetirementAttemptView,
    | HomeNotManaged
    | HomeArchived
    | StaleIdentity
    | DaemonIncompatible
    | DaemonUnavailable
    | RetirementRefused
    | RetirementFailed
    | HubConfigInvalid
  >
  /** SIGTERM, then SIGKILL of its group after the grace; the home then stays stopped until resumed. */
  readonly stop: (
    name: string,
    identity: RenderedIdentity,
    confirm: string
  ) => Effect.Effect<StopResult, HomeNotManaged | StaleIdentity | ConfirmationRequired | HubConfigInvalid>
  /** Lifts a force stop and starts the home's daemon. */
  readonly resume: (name: string) => Effect.Effect<
    DaemonRow,
    HomeNotManaged | HomeArchived | DaemonIncompatible | DaemonUnavailable | DaemonStartFailed | HubConfigInvalid
  >
}>()("quiesce/hub/HubDaemons") {}
