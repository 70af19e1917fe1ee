import { Context, type Effect } from "effect"

/** Where the API's admission of mutating requests is: before ready, admitting, or closed for good. */
export type AdmissionState = "opening" | "open" | "closed"

/**
 * Whether the API admits mutating requests. A daemon's API starts `opening` (503 `StillOpening`)
 * and admits once every part of it is ready (H1). Closing it at shutdown makes every POST answer
 * 503 `ShuttingDown` (a prompt repeating a recorded client message id still gets its turn), stops
 * the registry's admission and answers every caller still waiting on a turn; reads keep working.
 * The layers: `layers/http/admission.ts`.
 */
export class Admission extends Context.Service<Admission, {
  /** Starts admitting, unless it was closed already. */
  readonly admit: Effect.Effect<void>
  readonly close: Effect.Effect<void>
  readonly state: Effect.Effect<AdmissionState>
}>()("quiesce/http/Admission") {}
