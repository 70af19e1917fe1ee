/**
 * The permission requests (`session/request_permission`) an ACP agent has open. Each one holds
 * the agent's turn until a person answers it (`quiesce permit|deny`, the page's Allow / Deny),
 * the turn is cancelled or ends, or the agent withdraws it; until then it is reported as pending
 * (`PermissionRequested`), which keeps the runtime resident (C4).
 */
import type * as Acp from "@agentclientprotocol/sdk"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { ProviderFailed } from "../../../domain/errors.ts"
import type { SessionEvent } from "../../../domain/provider.ts"

/** What ACP asks a client to answer every open request with once it cancels the turn. */
const cancelled: Acp.RequestPermissionResponse = { outcome: { outcome: "cancelled" } }

/**
 * The outcome that carries a person's answer, from the options the agent offered: allow picks
 * `allow_once` (else `allow_always`), deny picks `reject_once` (else `reject_always`). A one-time
 * choice comes first: a person answered this one request. Deny without a reject option is
 * `cancelled`, the one refusal every request takes; allow without an allow option is undefined
 * (there is no way to say yes).
 */
export const outcomeFor = (
  options: ReadonlyArray<Acp.PermissionOption>,
  allow: boolean
): Acp.RequestPermissionOutcome | undefined => {
  const [once, always]: ReadonlyArray<Acp.PermissionOptionKind> = allow
    ? ["allow_once", "allow_always"]
    : ["reject_once", "reject_always"]
  const option = options.find((candidate) => candidate.kind === once) ??
    options.find((candidate) => candidate.kind === always)
  if (option !== undefined) return { outcome: "selected", optionId: option.optionId }
  return allow ? undefined : cancelled.outcome
}

/** The open requests of one agent process. */
export interface OpenPermissions {
  /**
   * Reports the request as pending and resolves with its answer. `withdrawn` aborts when the
   * agent takes the request back (`$/cancel_request`) or the connection closes: the request is
   * then resolved (`cancelled`) without an answer from anyone.
   */
  readonly ask: (request: Acp.RequestPermissionRequest, withdrawn: AbortSignal) => Promise<Acp.RequestPermissionResponse>
  /**
   * Answers one open request with the option that says allow or deny (`outcomeFor`). An id that
   * is not open (answered, cancelled, withdrawn) is a no-op. Allow fails, leaving the request
   * open, when the agent offered no allow option.
   */
  readonly answer: (id: string, allow: boolean) => Effect.Effect<void, ProviderFailed>
  /** Answers every open request `cancelled`: what ACP asks of a client that cancels its turn (or whose turn ended). */
  readonly cancelAll: () => void
}

/** The open requests of one agent process, reported through `onEvent` as they open and resolve. */
export const makeOpenPermissions = (
  provider: string,
  onEvent: (event: SessionEvent) => void
): OpenPermissions => {
  const open = new Map<string, {
    readonly options: ReadonlyArray<Acp.PermissionOption>
    readonly settle: (response: Acp.RequestPermissionResponse) => void
  }>()
  const settle = (id: string, response: Acp.RequestPermissionResponse) => open.get(id)?.settle(response)

  return {
    ask: (request, withdrawn) =>
      new Promise((resolve) => {
        if (withdrawn.aborted) return resolve(cancelled)
        // Random, not counted: an answer meant for a request of an earlier process (one that
        // died while asking) must not reach a new request of the resumed session.
        const id = `permission-${randomBytes(4).toString("hex")}`
        const onWithdrawn = () => settle(id, cancelled)
        open.set(id, {
          options: request.options,
          settle: (response) => {
            if (!open.delete(id)) return
            withdrawn.removeEventListener("abort", onWithdrawn)
            onEvent({ _tag: "PermissionResolved", id })
            resolve(response)
          }
        })
        withdrawn.addEventListener("abort", onWithdrawn, { once: true })
        onEvent({ _tag: "PermissionRequested", id })
      }),
    answer: (id, allow) =>
      Effect.suspend(() => {
        const request = open.get(id)
        if (request === undefined) return Effect.void
        const outcome = outcomeFor(request.options, allow)
        if (outcome === undefined) {
          const offered = request.options.map((option) => option.kind).join(", ")
          return Effect.fail(
            new ProviderFailed({
              provider,
              operation: "session/request_permission",
              message: `the agent offers no option to allow ${id} (offered: ${offered === "" ? "none" : offered}); deny it instead`,
              refused: true
            })
          )
        }
        settle(id, { outcome })
        return Effect.void
      }),
    cancelAll: () => {
      for (const id of [...open.keys()]) settle(id, cancelled)
    }
  }
}
