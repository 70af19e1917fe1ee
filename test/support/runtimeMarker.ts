/**
 * Runtime markers for the provider tests: a fresh one per session (as the registry mints one per
 * runtime), what a live process carries, and a process that carries one from outside the
 * runtime's tree (what a job that escaped the runtime looks like to the probe).
 */
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import type { SessionConfig, SessionEvent } from "../../src/domain/provider.ts"
import { runtimeMarkerName } from "../../src/platform/escapedProcesses.ts"

/** A fresh marker for one runtime. */
export const freshMarker = (): string => randomBytes(12).toString("hex")

/**
 * The config of a session a test opens on an adapter directly: a runtime marker of its own, as the
 * registry gives every runtime.
 */
export const sessionConfig = (cwd: string, onEvent: (event: SessionEvent) => void = () => {}): SessionConfig => ({
  agentId: "a1",
  cwd,
  labels: {},
  runtimeMarker: freshMarker(),
  onEvent
})

/** The marker a live process was started with (its `QUIESCE_RUNTIME`), or undefined when it has none. */
export const markerOf = (pid: number): string | undefined => {
  const prefix = `${runtimeMarkerName}=`
  const entry = readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").find((line) => line.startsWith(prefix))
  return entry?.slice(prefix.length)
}

/**
 * A `sleep` started by the test (so outside every runtime's tree) whose environment carries the
 * marker; its pid once it runs. Killed when the scope closes.
 */
export const markedStray = (marker: string) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly pid: number; readonly kill: () => void }, Error>((resume) => {
      const child = spawn("sleep", ["60"], { env: { ...process.env, [runtimeMarkerName]: marker }, stdio: "ignore" })
      child.once("error", (error) => resume(Effect.fail(error)))
      child.once("spawn", () => resume(Effect.succeed({ pid: child.pid!, kill: () => void child.kill("SIGKILL") })))
    }),
    (stray) => Effect.sync(stray.kill)
  )
