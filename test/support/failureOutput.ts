/**
 * Tests are quiet unless they fail. What a child process or an in-process daemon says is kept in
 * memory and printed only when the test that started it fails, as the last part of it (a bounded
 * tail), named by what said it.
 */
import { onTestFailed } from "vitest"

/** How much of what was said is printed on a failure: its last this many characters. */
export const failureTailChars = 20_000

/** The last `chars` characters of `text`, saying how much was cut. */
export const tail = (text: string, chars = failureTailChars) =>
  text.length <= chars ? text : `… (${text.length - chars} earlier characters left out)\n${text.slice(-chars)}`

/**
 * Prints `output()` (its tail) under `label` if the running test fails. Outside a test (a hook at
 * the file's level) there is no test to fail, and nothing is registered.
 */
export const showOnFailure = (label: string, output: () => string) => {
  try {
    onTestFailed(() => {
      const said = output()
      console.error(`--- ${label} ---\n${said === "" ? "(nothing)" : tail(said)}\n--- end of ${label} ---`)
    })
  } catch {
    // Not inside a test.
  }
}
