/**
 * The OpenCode safety decision (P4) as a pure function: executing sessions anywhere in the tree,
 * PTYs in any of the tree's directories (v1 and v2 registries), v2 inbox and shells; any inventory
 * not read is an unknown, never an empty list. Also the answer schemas against real answers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"
import {
  PtyList,
  PtyListV2,
  Session,
  SessionActiveResponse,
  SessionStatusMap
} from "../../../../src/layers/providers/opencode/apiTypes.ts"
import { stopPermitted } from "../../../../src/domain/provider.ts"
import {
  canStop,
  decide,
  entryLabel,
  type Inventories,
  type TreeNode
} from "../../../../src/layers/providers/opencode/safety.ts"

const pty = (cwd: string) => ({ id: "pty_1", title: "t", command: "sleep", args: ["9"], cwd, status: "running" as const, pid: 7 })

/** The veto's reason; a permit or an unknown fails the test. */
const vetoed = (inv: Inventories): string => {
  const answer = canStop(inv)
  if (answer === undefined) return assert.fail("the answer is unknown")
  return answer.canStop ? assert.fail("the answer permits") : answer.reason
}

const base = (tree: ReadonlyArray<TreeNode>): Inventories => {
  const dirs = [...new Set(tree.map((node) => node.directory))]
  return {
    sessionId: tree[0]!.id,
    tree,
    statusByDirectory: new Map(dirs.map((d) => [d, {}])),
    ptyByDirectory: new Map(dirs.map((d) => [d, []])),
    active: { data: {} },
    ptyV2ByDirectory: new Map(dirs.map((d) => [d, { location: { directory: d }, data: [] }])),
    inboxBySession: new Map(tree.map((node) => [node.id, { _tag: "Read", value: { data: [] } }])),
    shellsByDirectory: new Map(dirs.map((d) => [d, { _tag: "Read", value: { data: [] } }]))
  }
}

const tree: ReadonlyArray<TreeNode> = [
  { id: "ses_root", directory: "/a" },
  { id: "ses_child", directory: "/b" },
  { id: "ses_grandchild", directory: "/c" }
]

describe("opencode safety: decide (P4)", () => {
  it("permits when every inventory is read and empty", () => {
    assert.deepStrictEqual(decide(base(tree)), { _tag: "Idle" })
    assert.deepStrictEqual(canStop(base(tree)), stopPermitted)
    assert.deepStrictEqual(canStop(base([{ id: "ses_x", directory: "/x" }])), stopPermitted)
  })

  it("idle statuses and other sessions' activity do not veto", () => {
    const inv = base(tree)
    assert.deepStrictEqual(canStop({
      ...inv,
      statusByDirectory: new Map<string, SessionStatusMap>([
        ["/a", { ses_root: { type: "idle" }, ses_other: { type: "busy" } }],
        ["/b", {}],
        ["/c", {}]
      ]),
      active: { data: { ses_other: { type: "running" } } }
    }), stopPermitted)
  })

  it("a busy or retrying session anywhere in the tree vetoes (v1)", () => {
    for (const [id, dir] of [["ses_root", "/a"], ["ses_child", "/b"], ["ses_grandchild", "/c"]] as const) {
      for (const type of ["busy", "retry"] as const) {
        const inv = base(tree)
        const statusByDirectory = new Map(inv.statusByDirectory)
        statusByDirectory.set(dir, { [id]: { type } })
        const decision = decide({ ...inv, statusByDirectory })
        assert.strictEqual(decision._tag, "Busy", `${id} ${type}`)
        assert.strictEqual(
          vetoed({ ...inv, statusByDirectory }),
          `session ${id} is ${type === "retry" ? "retrying" : "busy"} in ${dir} (v1)`
        )
      }
    }
  })

  it("a tree session reported busy in any directory's status vetoes", () => {
    const inv = base(tree)
    const statusByDirectory = new Map(inv.statusByDirectory)
    statusByDirectory.set("/a", { ses_grandchild: { type: "busy" } })
    assert.strictEqual(vetoed({ ...inv, statusByDirectory }), "session ses_grandchild is busy in /a (v1)")
  })

  it("an active session anywhere in the tree vetoes (v2)", () => {
    for (const id of ["ses_root", "ses_child", "ses_grandchild"]) {
      assert.strictEqual(vetoed({ ...base(tree), active: { data: { [id]: { type: "running" } } } }), `session ${id} is active (v2)`)
    }
  })

  it("a PTY in any directory of the tree vetoes, in either registry, running or exited", () => {
    for (const dir of ["/a", "/b", "/c"]) {
      const inv = base(tree)
      assert.strictEqual(
        vetoed({ ...inv, ptyByDirectory: new Map([...inv.ptyByDirectory, [dir, [pty(dir)]]]) }),
        `PTY pty_1 \`sleep 9\` (running, pid 7) in ${dir} (v1)`
      )
      assert.strictEqual(
        vetoed({
          ...inv,
          ptyByDirectory: new Map([...inv.ptyByDirectory, [dir, [{ ...pty(dir), status: "exited" as const }]]])
        }),
        `PTY pty_1 \`sleep 9\` (exited, pid 7) in ${dir} (v1)`
      )
      assert.strictEqual(
        vetoed({
          ...inv,
          ptyV2ByDirectory: new Map([...inv.ptyV2ByDirectory, [dir, { location: { directory: dir }, data: [pty(dir)] }]])
        }),
        `PTY pty_1 \`sleep 9\` (running, pid 7) in ${dir} (v2)`
      )
    }
  })

  it("inbox messages or shells veto (v2), including a further page", () => {
    const inv = base(tree)
    assert.strictEqual(
      vetoed({
        ...inv,
        inboxBySession: new Map([...inv.inboxBySession, ["ses_child", { _tag: "Read", value: { data: [{ m: 1 }] } }]])
      }),
      "session ses_child has 1 inbox item not yet delivered (v2)"
    )
    assert.strictEqual(
      vetoed({
        ...inv,
        inboxBySession: new Map([...inv.inboxBySession, ["ses_root", {
          _tag: "Read",
          value: { data: [], cursor: { next: "c2" } }
        }]])
      }),
      "session ses_root has inbox items (on a further page) not yet delivered (v2)"
    )
    assert.strictEqual(
      vetoed({
        ...inv,
        shellsByDirectory: new Map([...inv.shellsByDirectory, ["/c", { _tag: "Read", value: { data: [{ s: 1 }] } }]])
      }),
      "1 shell in /c (v2)"
    )
    assert.strictEqual(
      vetoed({
        ...inv,
        shellsByDirectory: new Map([...inv.shellsByDirectory, ["/c", {
          _tag: "Read",
          value: {
            data: [{ id: "sh_1", command: "npm run dev" }, { id: "sh_2" }, { type: "bash" }, { id: "sh_4" }, {}],
            cursor: { next: "c2" }
          }
        }]])
      }),
      "5 shells: sh_1 `npm run dev`, sh_2, `bash` and 1 more (and more on a further page) in /c (v2)"
    )
  })

  it("an entry of an unspecified inventory is named by what it has", () => {
    assert.strictEqual(entryLabel({ id: "msg_1", type: "completion" }), "msg_1 `completion`")
    assert.strictEqual(entryLabel({ command: `${"x".repeat(100)}` }), `\`${"x".repeat(80)}…\``)
    assert.strictEqual(entryLabel({ id: 3, command: ["not", "a", "string"] }), undefined)
    assert.isUndefined(entryLabel("text"))
    assert.isUndefined(entryLabel(null))
  })

  it("an inventory not read is unknown, never empty", () => {
    const inv = base(tree)
    const without = <K, V>(map: ReadonlyMap<K, V>, key: K) => new Map([...map].filter(([k]) => k !== key))
    const cases: ReadonlyArray<[string, Inventories]> = [
      ["status", { ...inv, statusByDirectory: without(inv.statusByDirectory, "/b") }],
      ["pty", { ...inv, ptyByDirectory: without(inv.ptyByDirectory, "/c") }],
      ["ptyV2", { ...inv, ptyV2ByDirectory: without(inv.ptyV2ByDirectory, "/a") }],
      ["ptyV2 wrong location", {
        ...inv,
        ptyV2ByDirectory: new Map([...inv.ptyV2ByDirectory, ["/a", { location: { directory: "/elsewhere" }, data: [] }]])
      }],
      ["inbox missing", { ...inv, inboxBySession: without(inv.inboxBySession, "ses_grandchild") }],
      ["inbox absent", {
        ...inv,
        inboxBySession: new Map([...inv.inboxBySession, ["ses_root", { _tag: "Absent", reason: "html" }]])
      }],
      ["shells missing", { ...inv, shellsByDirectory: without(inv.shellsByDirectory, "/a") }],
      ["shells absent", {
        ...inv,
        shellsByDirectory: new Map([...inv.shellsByDirectory, ["/b", { _tag: "Absent", reason: "html" }]])
      }],
      ["root not in tree", { ...inv, sessionId: "ses_missing" }]
    ]
    for (const [name, inventories] of cases) {
      assert.strictEqual(decide(inventories)._tag, "Unknown", name)
      assert.isUndefined(canStop(inventories), name)
    }
  })

  it("an unknown is reported even when something is also busy", () => {
    const inv = base(tree)
    const decision = decide({
      ...inv,
      active: { data: { ses_root: { type: "running" } } },
      shellsByDirectory: new Map([...inv.shellsByDirectory, ["/a", { _tag: "Absent", reason: "html" }]])
    })
    assert.strictEqual(decision._tag, "Unknown")
  })
})

describe("opencode answer schemas", () => {
  const decode = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S, value: unknown) =>
    Effect.runSyncExit(Schema.decodeUnknownEffect(schema)(value))

  it("decodes real 1.18.33 answers", () => {
    // As answered by `opencode serve` 1.18.33 (GET /session/{id}, /pty?directory=, /api/pty, /api/session/active).
    assert.isTrue(Exit.isSuccess(decode(Session, {
      id: "ses_dd62497f4ffe7w50TeMrLzVG0W",
      slug: "jolly-panda",
      projectID: "global",
      directory: "/tmp/proj",
      path: "tmp/proj",
      cost: 0,
      tokens: { input: 0, output: 0, reasoning: 0, cache: { read: 0, write: 0 } },
      title: "New session",
      version: "1.18.33",
      time: { created: 1, updated: 1 }
    })))
    assert.isTrue(Exit.isSuccess(decode(PtyList, [{
      id: "pty_229db7782001V53JQXurcHdTmh",
      title: "Terminal dTmh",
      command: "sleep",
      args: ["100"],
      cwd: "/tmp/proj2",
      status: "running",
      pid: 17682
    }])))
    assert.isTrue(Exit.isSuccess(decode(PtyListV2, {
      location: { directory: "/tmp/proj", project: { id: "global", directory: "/" } },
      data: []
    })))
    assert.isTrue(Exit.isSuccess(decode(SessionActiveResponse, { data: {} })))
    assert.isTrue(Exit.isSuccess(decode(SessionStatusMap, {})))
    assert.isTrue(Exit.isSuccess(decode(SessionStatusMap, {
      ses_a: { type: "busy" },
      ses_b: { type: "retry", attempt: 1, message: "m", next: 5 }
    })))
  })

  it("rejects unknown statuses and wrong shapes", () => {
    assert.isTrue(Exit.isFailure(decode(SessionStatusMap, { ses_a: { type: "paused" } })))
    assert.isTrue(Exit.isFailure(decode(SessionStatusMap, [])))
    assert.isTrue(Exit.isFailure(decode(SessionActiveResponse, { data: { ses_a: { type: "waiting" } } })))
    assert.isTrue(Exit.isFailure(decode(SessionActiveResponse, {})))
    assert.isTrue(Exit.isFailure(decode(PtyList, { data: [] })))
    assert.isTrue(Exit.isFailure(decode(PtyList, [{ id: "pty_1", cwd: "/a", status: "zombie" }])))
    assert.isTrue(Exit.isFailure(decode(PtyListV2, { data: [] })))
    assert.isTrue(Exit.isFailure(decode(Session, { id: "ses_1" })))
  })
})

describe("opencode safety: trustMissingInventories (opt-in)", () => {
  const absent = (inv: Inventories): Inventories => ({
    ...inv,
    inboxBySession: new Map(inv.tree.map((node) => [node.id, { _tag: "Absent", reason: "answered HTML" }])),
    shellsByDirectory: new Map([...inv.shellsByDirectory.keys()].map((d) => [d, { _tag: "Absent", reason: "answered HTML" }]))
  })

  it("without the opt-in, an absent inbox or shell list is unknown", () => {
    assert.strictEqual(decide(absent(base(tree)))._tag, "Unknown")
  })

  it("with the opt-in, a release known to lack them reads their absence as empty", () => {
    assert.deepStrictEqual(decide({ ...absent(base(tree)), trustMissingFor: { version: "1.18.33" } }), { _tag: "Idle" })
  })

  it("with the opt-in, every inventory the release serves still vetoes", () => {
    const inv: Inventories = { ...absent(base(tree)), trustMissingFor: { version: "1.18.33" } }
    const busyChild: SessionStatusMap = { ses_child: { type: "busy" } }
    assert.strictEqual(decide({ ...inv, statusByDirectory: new Map([...inv.statusByDirectory].map(([d]) => [d, d === "/b" ? busyChild : {}])) })._tag, "Busy")
    assert.strictEqual(decide({ ...inv, ptyByDirectory: new Map([...inv.ptyByDirectory].map(([d]) => [d, d === "/c" ? [pty(d)] : []])) })._tag, "Busy")
    assert.strictEqual(decide({ ...inv, active: { data: { ses_grandchild: { type: "running" } } } })._tag, "Busy")
    assert.strictEqual(
      decide({ ...inv, ptyV2ByDirectory: new Map([...inv.ptyV2ByDirectory].map(([d]) => [d, { location: { directory: d }, data: d === "/a" ? [pty(d)] : [] }])) })._tag,
      "Busy"
    )
    assert.strictEqual(decide({ ...inv, statusByDirectory: new Map() })._tag, "Unknown", "an inventory it serves but was not read")
  })

  it("with the opt-in, any other release keeps the absence unknown and says why", () => {
    const decision = decide({ ...absent(base(tree)), trustMissingFor: { version: "1.19.0" } })
    assert.strictEqual(decision._tag, "Unknown")
    assert.include(decision._tag === "Unknown" ? decision.reason : "", "release 1.19.0 is not known to lack it")
  })
})
