/**
 * The OpenCode runtime safety probe (P4): reads the server's inventories over HTTP, validates
 * every answer, and decides with `safety.ts`.
 *
 * Every answer must be `200` with a JSON content type and a body that decodes with its schema;
 * anything else (the HTML the server gives every unknown route, malformed JSON, an error status, a
 * value the schema does not know) fails the probe with `RuntimeProbeFailed`, which retains the
 * runtime. The v2 inbox and shell inventories are not served by current releases: an HTML or 404
 * answer there is recorded as absent, which the decision treats as unknown unless the host opted in
 * to `trustMissingInventories` for a release known to lack them.
 */
import { Effect, Schema } from "effect"
import { RuntimeProbeFailed } from "../../../domain/errors.ts"
import type { StopAnswer } from "../../../domain/provider.ts"
import {
  InboxResponse,
  PtyList,
  PtyListV2,
  Session,
  SessionActiveResponse,
  SessionList,
  SessionStatusMap,
  ShellListResponse
} from "./apiTypes.ts"
import { BadAnswer, getJson, type Query } from "./http.ts"
import { canStop, type Decision, decide, type Inventories, type Optional, type TreeNode, treeDirectories } from "./safety.ts"

export interface ProbeConfig {
  /** The agent the probe answers for (carried by the error). */
  readonly agentId: string
  /** The server, e.g. `http://127.0.0.1:4096`. */
  readonly baseUrl: string
  /** OpenCode's own session id (`ses…`). */
  readonly sessionId: string
  /** Extra headers, e.g. `Authorization` when `OPENCODE_SERVER_PASSWORD` is set. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** A tree larger than this is an unknown (default 500 sessions). */
  readonly maxTreeSize?: number | undefined
  /**
   * Off by default: an inventory the server does not serve is an unknown, which retains. When
   * given, with the server's version (from `GET /global/health` at start: a server's release does
   * not change while it runs), the absence of the v2 inbox and shell list is read as empty for
   * releases known to lack them (`releasesWithoutInboxOrShells`). See `safety.ts`.
   */
  readonly trustMissingInventories?: { readonly serverVersion: string } | undefined
}

/** An inventory the release may not serve: an HTML or 404 answer is absent; other faults fail. */
const getOptional = <S extends Schema.Top & { readonly DecodingServices: never }>(
  config: ProbeConfig,
  path: string,
  query: Query,
  schema: S
): Effect.Effect<Optional<S["Type"]>, BadAnswer> =>
  getJson(config, path, query, schema).pipe(
    Effect.map((value): Optional<S["Type"]> => ({ _tag: "Read", value })),
    Effect.catch((bad) =>
      bad.kind === "html" || bad.kind === "not-found"
        ? Effect.succeed<Optional<S["Type"]>>({ _tag: "Absent", reason: bad.message })
        : Effect.fail(bad)
    )
  )

const sessionPath = (id: string, rest = ""): string => `session/${encodeURIComponent(id)}${rest}`

/** The session and its descendants, breadth first, each child checked to name its parent. */
const fetchTree = (config: ProbeConfig): Effect.Effect<ReadonlyArray<TreeNode>, BadAnswer> =>
  Effect.gen(function*() {
    const limit = config.maxTreeSize ?? 500
    const root = yield* getJson(config, sessionPath(config.sessionId), {}, Session)
    if (root.id !== config.sessionId) {
      return yield* new BadAnswer({
        kind: "schema",
        message: `GET /session/${config.sessionId} answered for ${root.id}`
      })
    }
    const tree: Array<TreeNode> = [{ id: root.id, directory: root.directory }]
    const seen = new Set([root.id])
    for (let index = 0; index < tree.length; index++) {
      const parent = tree[index]!
      const children = yield* getJson(
        config,
        sessionPath(parent.id, "/children"),
        { directory: parent.directory },
        SessionList
      )
      for (const child of children) {
        if (child.parentID !== undefined && child.parentID !== parent.id) {
          return yield* new BadAnswer({
            kind: "schema",
            message: `child ${child.id} of ${parent.id} names parent ${child.parentID}`
          })
        }
        if (seen.has(child.id)) continue
        seen.add(child.id)
        tree.push({ id: child.id, directory: child.directory })
        if (tree.length > limit) {
          return yield* new BadAnswer({ kind: "schema", message: `session tree exceeds ${limit} sessions` })
        }
      }
    }
    return tree
  })

/** Reads every inventory the decision needs. */
export const fetchInventories = (config: ProbeConfig): Effect.Effect<Inventories, RuntimeProbeFailed> =>
  Effect.gen(function*() {
    const tree = yield* fetchTree(config)
    const directories = treeDirectories(tree)
    // The inventories are independent reads: one round trip's wait for all of them, not one each.
    const { active, inboxes, perDirectory, trustMissingFor } = yield* Effect.all({
      perDirectory: Effect.forEach(
        directories,
        (directory) =>
          Effect.all({
            directory: Effect.succeed(directory),
            status: getJson(config, "session/status", { directory }, SessionStatusMap),
            pty: getJson(config, "pty", { directory }, PtyList),
            ptyV2: getJson(config, "api/pty", { "location[directory]": directory }, PtyListV2),
            shells: getOptional(config, "api/shell", { "location[directory]": directory }, ShellListResponse)
          }, { concurrency: "unbounded" }),
        { concurrency: 4 }
      ),
      active: getJson(config, "api/session/active", {}, SessionActiveResponse),
      inboxes: Effect.forEach(
        tree,
        (node) =>
          getOptional(config, `api/${sessionPath(node.id, "/inbox")}`, {}, InboxResponse).pipe(
            Effect.map((inbox) => [node.id, inbox] as const)
          ),
        { concurrency: 4 }
      ),
      trustMissingFor: Effect.succeed(
        config.trustMissingInventories === undefined ? undefined : { version: config.trustMissingInventories.serverVersion }
      )
    }, { concurrency: "unbounded" })
    return {
      trustMissingFor,
      sessionId: config.sessionId,
      tree,
      statusByDirectory: new Map(perDirectory.map((entry) => [entry.directory, entry.status])),
      ptyByDirectory: new Map(perDirectory.map((entry) => [entry.directory, entry.pty])),
      active,
      ptyV2ByDirectory: new Map(perDirectory.map((entry) => [entry.directory, entry.ptyV2])),
      inboxBySession: new Map(inboxes),
      shellsByDirectory: new Map(perDirectory.map((entry) => [entry.directory, entry.shells]))
    } satisfies Inventories
  }).pipe(
    Effect.mapError((bad) => new RuntimeProbeFailed({ agentId: config.agentId, message: `opencode: ${bad.message}` }))
  )

/** The decision over freshly read inventories. */
export const probeDecision = (config: ProbeConfig): Effect.Effect<Decision, RuntimeProbeFailed> =>
  Effect.map(fetchInventories(config), decide)

/**
 * `canStopRuntime` for an OpenCode session: a veto names what the inventories found (the busy
 * session, the PTY, the shell, the undelivered inbox item); an unknown decision fails the probe.
 */
export const canStopRuntime = (config: ProbeConfig): Effect.Effect<StopAnswer, RuntimeProbeFailed> =>
  Effect.flatMap(fetchInventories(config), (inventories) => {
    const result = canStop(inventories)
    if (result !== undefined) return Effect.succeed(result)
    const decision = decide(inventories)
    return Effect.fail(
      new RuntimeProbeFailed({
        agentId: config.agentId,
        message: `opencode: ${decision._tag === "Unknown" ? decision.reason : "unknown"}`
      })
    )
  })
