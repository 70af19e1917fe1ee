/**
 * A cluster runner's death as a user sees it: the runner is SIGKILLed, and each of the agents it
 * hosted is prompted at once through a runner that lives, each prompt with a client id of its
 * own that appends that id to `runs.txt` in the agents' working directory. Used by the cluster
 * e2e test (which asserts a bound) and the cluster bench (which reports the figures).
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { type Daemon, exited, prompt } from "./daemonProcess.ts"

export interface Failover {
  /** From the SIGKILL to the first answer of a moved agent, in ms. */
  readonly firstAnswerMs: number
  /** From the SIGKILL to the last answer, in ms. */
  readonly lastAnswerMs: number
  /** Each agent's client id, as sent. */
  readonly clientIds: ReadonlyArray<string>
  /** How many times each client id ran (lines of `runs.txt` naming it). */
  readonly runs: ReadonlyMap<string, number>
  /** Each prompt's answer: its turn id and output. */
  readonly answers: ReadonlyArray<{ readonly agentId: string; readonly turnId: string; readonly output: string }>
}

/**
 * SIGKILLs `victim`, then prompts each of `agents` (hosted by it) through `via`, repeating a
 * prompt answered 503 (the cluster was not ready for it) with the same client id until
 * `timeoutMs`. `cwd` is the agents' working directory.
 */
export const killAndPrompt = async (
  victim: Daemon,
  via: Daemon,
  agents: ReadonlyArray<string>,
  cwd: string,
  tag: string,
  timeoutMs = 60_000
): Promise<Failover> => {
  const killedAt = performance.now()
  process.kill(victim.process.pid!, "SIGKILL")
  const deadline = Date.now() + timeoutMs
  const clientIds = agents.map((_, i) => `${tag}-${i}`)
  const answeredAt: Array<number> = []
  const answers = await Promise.all(agents.map(async (agentId, i) => {
    const clientMessageId = clientIds[i]!
    while (true) {
      const answer = await prompt(via, agentId, { text: `echo ${clientMessageId} >> runs.txt; echo ${clientMessageId}`, wait: true, clientMessageId })
      if (answer.status === 200) {
        answeredAt.push(performance.now() - killedAt)
        return { agentId, turnId: String(answer.body.turnId), output: String(answer.body.output).trim() }
      }
      if (answer.status !== 503 || Date.now() > deadline) {
        throw new Error(`a moved agent's prompt answered ${answer.status}: ${JSON.stringify(answer.body)}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }))
  await exited(victim.process)
  const lines = readFileSync(join(cwd, "runs.txt"), "utf8").split("\n").filter((line) => line !== "")
  const runs = new Map(clientIds.map((id) => [id, lines.filter((line) => line === id).length]))
  return { firstAnswerMs: Math.min(...answeredAt), lastAnswerMs: Math.max(...answeredAt), clientIds, runs, answers }
}
