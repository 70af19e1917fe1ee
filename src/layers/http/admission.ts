/** The API's admission (`Admission`), kept in a Ref; closing it also stops the registry's admission. */
import { Effect, Layer, Ref } from "effect"
import { Admission, type AdmissionState } from "../../services/Admission.ts"
import { AgentRegistry, type RegistryAdmission } from "../../services/AgentRegistry.ts"

/** Admission starting `initial`. */
export const layerWith = (initial: "opening" | "open"): Layer.Layer<Admission, never, AgentRegistry> =>
  Layer.effect(
    Admission,
    Effect.gen(function*() {
      const registry: RegistryAdmission = yield* AgentRegistry
      const state = yield* Ref.make<AdmissionState>(initial)
      return Admission.of({
        admit: Ref.update(state, (current) => current === "closed" ? current : "open"),
        close: Ref.set(state, "closed").pipe(Effect.andThen(registry.stopAdmission)),
        state: Ref.get(state)
      })
    })
  )

/** Admitting from the start (tests, and hosts that have nothing to finish first). */
export const layer = layerWith("open")
