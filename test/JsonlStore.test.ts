// Tests of the JSONL RuntimeEventStore on real files: the conformance suite, every corruption of docs/spec/01-ledger.md read as its
// typed error without touching the file, torn-tail quarantine, the writer lock, file modes, and one write + fsync per append.
import * as Command from "@effect/platform/Command"
import * as PlatformError from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Exit, Layer, Option, Stream } from "effect"
import { createHash } from "node:crypto"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import * as CanonicalJson from "../src/Domain/CanonicalJson.js"
import * as Digest from "../src/Domain/Digest.js"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { conformance } from "./support/conformance.js"

const { APPEND_LOCK_FILE_NAME, FILE_NAME, LOCK_FILE_NAME, QUARANTINE_LOG_NAME } = JsonlRuntimeEventStore

// The first layer over a workspace is the writer; the conformance suite's reopen over the same folder (while the
// writer is still open in the same scope) is a reader, since a second writer would get WorkspaceLocked.
const openedWorkspaces = new Set<string>()
conformance({
  name: "jsonl",
  layer: (workspace) => {
    const readOnly = openedWorkspaces.has(workspace)
    openedWorkspaces.add(workspace)
    return JsonlRuntimeEventStore.layer({ workspace, ...(readOnly ? { readOnly: true } : {}) }).pipe(
      Layer.provide(Layer.merge(NodeFileSystem.layer, NodeWorkspaceLock.layerNode))
    )
  },
  persistent: true
})

const TestLayer = Layer.merge(NodeContext.layer, NodeWorkspaceLock.layerNode)
const rid = (s: string) => RunId.make(s)
const text = (e: RuntimeEvent) => Either.getOrThrow(canonicalText(e))
const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")
const projectRoot = fileURLToPath(new URL("..", import.meta.url))
const lockHolder = fileURLToPath(new URL("./fixtures/lock-holder.ts", import.meta.url))

/** Builds ledger bytes line by line with valid chains, except where a case breaks them on purpose. */
const ledger = () => {
  const tails = new Map<string, { seq: number; digest: string }>()
  const parts: Array<Uint8Array> = []
  const lines: Array<string> = []
  const api = {
    /** One append group of `chainRun`'s chain (default: each event's own run); events or raw event texts. */
    group: (events: ReadonlyArray<RuntimeEvent | string>, options: { chainRun?: string; skipSeq?: number } = {}) => {
      const runId = options.chainRun ?? (events[0] as RuntimeEvent).runId
      let { seq, digest } = tails.get(runId) ?? { seq: 0, digest: Digest.genesis(runId) }
      seq += options.skipSeq ?? 0
      const end = seq + events.length
      for (const e of events) {
        const t = typeof e === "string" ? e : text(e)
        seq += 1
        digest = Digest.next(digest, seq, t)
        api.line(jsonlLine(seq, end, digest, t))
      }
      tails.set(runId, { seq, digest })
      return api
    },
    /** Each event as its own single-line group. */
    singles: (events: ReadonlyArray<RuntimeEvent>) => {
      for (const e of events) api.group([e])
      return api
    },
    line: (s: string) => {
      lines.push(s)
      parts.push(Buffer.from(s, "utf8"))
      return api
    },
    bytes: (b: Uint8Array) => {
      parts.push(b)
      return api
    },
    /** The line a group would produce next, without adding it. */
    peekLine: (event: RuntimeEvent) => {
      const { seq, digest } = tails.get(event.runId) ?? { seq: 0, digest: Digest.genesis(event.runId) }
      return jsonlLine(seq + 1, seq + 1, Digest.next(digest, seq + 1, text(event)), text(event))
    },
    highWater: (runId: string) => tails.get(runId)!,
    lines,
    build: () => Buffer.concat(parts)
  }
  return api
}

const workspaceWith = (bytes: Uint8Array) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
    yield* fs.writeFile(NodePath.join(workspace, FILE_NAME), bytes, { mode: 0o600 })
    return workspace
  })

const fileHash = (path: string) => Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.map(fs.readFile(path), sha))

const reader = (workspace: string) => JsonlRuntimeEventStore.make({ workspace, readOnly: true })

/** The error an effect fails with; an unexpected success fails the test with a plain message (vitest can hang
 * pretty-printing Effect class instances, so the success value is never thrown). */
const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<E, never, R> =>
  Effect.flatMap(
    Effect.either(effect),
    Either.match({
      onLeft: (e) => Effect.succeed(e),
      onRight: () => Effect.dieMessage("expected a failure, but the effect succeeded")
    })
  )

/** The error an effect fails with, seen through the fields errors of docs/spec/01-ledger.md may have. */
const corruptionOf = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(failureOf(effect), (e): {
    _tag: string
    reason?: string
    runId?: string
    seq?: number
    line?: number
    eventId?: string
    message: string
  } => e)

// The events most cases start from.
const baseRun = (name = "run-a") => {
  const b = EventBuilder.make(name)
  return { b, opened: b.opened(), user: b.user("hello"), call: b.call("c1", "Bash", { cmd: "ls" }) }
}

interface BadCase {
  readonly name: string
  readonly bytes: Uint8Array
  readonly runId: string
  readonly reason: string
  readonly seq?: number
  readonly line: number
  readonly eventId?: string
  /** Other runs that must fail with the same reason (a line that cannot be tied to a run fails every run). */
  readonly alsoFails?: ReadonlyArray<string>
}

const badCases = (): Array<BadCase> => {
  const cases: Array<BadCase> = []
  {
    const { b, opened, user, call } = baseRun()
    const l = ledger().singles([opened, user, call])
    const next = l.peekLine(b.response("c1", "Bash", "ok"))
    cases.push({ name: "a torn last line", bytes: l.line(next.slice(0, 40)).build(), runId: "run-a", reason: "torn_row", line: 4 })
  }
  {
    const { b, opened } = baseRun()
    const l = ledger().singles([opened]).group([b.user("u"), b.call("c1", "Bash", {}), b.model("m")])
    const bytes = Buffer.from(l.lines.slice(0, 3).join(""), "utf8")
    cases.push({ name: "a cut multi-line append (no seq == end line)", bytes, runId: "run-a", reason: "torn_row", line: 2 })
  }
  {
    const { opened, user } = baseRun()
    const other = EventBuilder.make("run-b")
    const bytes = ledger().singles([other.opened(), opened]).line("{not json\n").singles([user]).build()
    cases.push({ name: "a complete line of invalid JSON before a complete group", bytes, runId: "run-a", reason: "invalid_json", line: 3, alsoFails: ["run-b", "run-unknown"] })
  }
  {
    const { opened, user } = baseRun()
    const l = ledger().singles([opened, user])
    const spaced = l.lines[1]!.replace(`"end":2,`, `"end": 2,`)
    const bytes = Buffer.from(l.lines[0]! + spaced, "utf8")
    cases.push({ name: "non-canonical bytes (a space)", bytes, runId: "run-a", reason: "non_canonical", seq: 2, line: 2, eventId: user.id })
  }
  {
    const { opened, user } = baseRun()
    const l = ledger().singles([opened, user])
    const row = JSON.parse(l.lines[1]!) as Record<string, unknown>
    const reordered = `{"seq":${row["seq"]},"end":${row["end"]},"digest":"${row["digest"]}","event":${text(user)}}\n`
    const bytes = Buffer.from(l.lines[0]! + reordered, "utf8")
    cases.push({ name: "non-canonical bytes (keys reordered)", bytes, runId: "run-a", reason: "non_canonical", seq: 2, line: 2, eventId: user.id })
  }
  {
    // The event member twice: JSON.parse keeps the second, and the text between `"event":` and `,"seq":` holds both
    // values, with the digest chained over that text. The fast row path once confirmed the slice as canonical (the
    // scanner took `{…},"event":{…}` for one value) and accepted the row with that text; it is non_canonical.
    const { b, opened, user } = baseRun()
    const second = b.model("second")
    const bytes = ledger().singles([opened]).group([`${text(user)},"event":${text(second)}`], { chainRun: "run-a" }).build()
    cases.push({ name: "the event member given twice, the digest chained over both", bytes, runId: "run-a", reason: "non_canonical", seq: 2, line: 2, eventId: second.id })
  }
  {
    // A digest in uppercase hex that is otherwise the right one: schema_invalid (its form), never digest_mismatch.
    const { opened, user } = baseRun()
    const l = ledger().singles([opened, user])
    const row = JSON.parse(l.lines[1]!) as { digest: string }
    const upper = l.lines[1]!.replace(row.digest, `sha256:${row.digest.slice(7).toUpperCase()}`)
    const bytes = Buffer.from(l.lines[0]! + upper, "utf8")
    cases.push({ name: "a digest in uppercase hex", bytes, runId: "run-a", reason: "schema_invalid", seq: 2, line: 2, eventId: user.id })
  }
  {
    const { opened, user } = baseRun()
    const withKey = CanonicalJson.encode({ ...JSON.parse(text(user)), extra: 1 })
    assert.strictEqual(withKey._tag, "Ok")
    const bytes = ledger().singles([opened]).group([(withKey as { text: string }).text], { chainRun: "run-a" }).build()
    cases.push({ name: "an unknown key in the event", bytes, runId: "run-a", reason: "schema_invalid", seq: 2, line: 2, eventId: user.id })
  }
  {
    const { b, opened } = baseRun()
    const bad = text(b.custom(b.user("x").body)).replace(`"_tag":"UserMessage"`, `"_tag":"NoSuchTag"`)
    const bytes = ledger().singles([opened]).group([bad], { chainRun: "run-a" }).build()
    cases.push({ name: "a schema-invalid event (unknown tag)", bytes, runId: "run-a", reason: "schema_invalid", seq: 2, line: 2 })
  }
  {
    const { b, opened } = baseRun()
    const deep = text(b.call("c9", "Bash", "__DEEP__")).replace(`"__DEEP__"`, "[".repeat(300) + "]".repeat(300))
    assert.isDefined(JSON.parse(deep))
    const bytes = ledger().singles([opened]).group([deep], { chainRun: "run-a" }).build()
    cases.push({ name: "an event nested 300 deep (parses fine)", bytes, runId: "run-a", reason: "schema_invalid", seq: 2, line: 2 })
  }
  {
    const { b, opened } = baseRun()
    const l = ledger().singles([opened, b.user("h\u00e9llo")])
    const line = Buffer.from(l.lines[1]!, "utf8")
    const at = line.indexOf(Buffer.from("\u00e9", "utf8"))
    line[at] = 0xff
    const rest = ledger().singles([opened]).group([b.user("h\u00e9llo")]).singles([b.model("after")])
    const bytes = Buffer.concat([Buffer.from(l.lines[0]!, "utf8"), line, Buffer.from(rest.lines[2]!, "utf8")])
    cases.push({ name: "invalid UTF-8 inside a line before a complete group", bytes, runId: "run-a", reason: "invalid_json", line: 2 })
    cases.push({ name: "invalid UTF-8 inside the last line", bytes: Buffer.concat([Buffer.from(l.lines[0]!, "utf8"), line]), runId: "run-a", reason: "torn_row", line: 2 })
  }
  {
    const { opened, user } = baseRun()
    const bytes = ledger().singles([opened]).group([user], { skipSeq: 1 }).build()
    cases.push({ name: "a seq gap", bytes, runId: "run-a", reason: "seq_gap", seq: 3, line: 2, eventId: user.id })
  }
  {
    const { opened, user } = baseRun()
    const l = ledger().singles([opened, user])
    const flipped = l.lines[1]!.replace(`"text":"hello"`, `"text":"hellp"`)
    const bytes = Buffer.from(l.lines[0]! + flipped, "utf8")
    cases.push({ name: "a flipped byte", bytes, runId: "run-a", reason: "digest_mismatch", seq: 2, line: 2, eventId: user.id })
  }
  {
    const { opened, user } = baseRun()
    const bRun = EventBuilder.make("run-b")
    const dup = bRun.custom(bRun.user("x").body, { id: user.id })
    const bytes = ledger().singles([opened, user, bRun.opened(), dup]).build()
    cases.push({ name: "a duplicate event id across runs", bytes, runId: "run-b", reason: "duplicate_event_id", seq: 2, line: 4, eventId: user.id })
  }
  {
    const { opened, user } = baseRun()
    const bRun = EventBuilder.make({ ...EventBuilder.idsFor("run-b"), invocationId: "inv-run-a" })
    const bytes = ledger().singles([opened, user, bRun.opened()]).build()
    cases.push({ name: "an invocation shared by two runs", bytes, runId: "run-b", reason: "identity_mismatch", seq: 1, line: 3 })
  }
  {
    const { b, opened, call } = baseRun()
    const again = b.call("c1", "Bash", { cmd: "ls" })
    cases.push({ name: "a duplicate call", bytes: ledger().singles([opened, call, again]).build(), runId: "run-a", reason: "duplicate_call", seq: 3, line: 3, eventId: again.id })
  }
  {
    const { b, opened } = baseRun()
    const orphan = b.response("c7", "Bash", 1)
    cases.push({ name: "an orphan response", bytes: ledger().singles([opened, orphan]).build(), runId: "run-a", reason: "orphan_response", seq: 2, line: 2 })
  }
  {
    const { b, opened } = baseRun()
    const resp = b.response("c2", "Bash", 1)
    const call = b.call("c2", "Bash", {})
    cases.push({ name: "a response before its call", bytes: ledger().singles([opened, resp, call]).build(), runId: "run-a", reason: "orphan_response", seq: 2, line: 2 })
  }
  {
    const { b, opened, call } = baseRun()
    const bytes = ledger().singles([opened, call, b.response("c1", "Bash", 1), b.response("c1", "Bash", 2)]).build()
    cases.push({ name: "two responses", bytes, runId: "run-a", reason: "duplicate_response", seq: 4, line: 4 })
  }
  {
    const { b, opened, call } = baseRun()
    const bytes = ledger().singles([opened, call, b.response("c1", "Read", 1)]).build()
    cases.push({ name: "a response naming another tool", bytes, runId: "run-a", reason: "name_mismatch", seq: 3, line: 3 })
  }
  {
    const { b, opened } = baseRun()
    const intruder = EventBuilder.make("run-b").user("not mine")
    const bytes = ledger().singles([opened]).group([b.user("1"), intruder, b.model("3")], { chainRun: "run-a" }).build()
    cases.push({ name: "an event of another run inside a run's group", bytes, runId: "run-a", reason: "identity_mismatch", seq: 3, line: 3, eventId: intruder.id })
  }
  {
    const { b, opened, user } = baseRun()
    const late = b.model("late")
    const bytes = ledger().singles([opened, user, b.terminated("completed"), late]).build()
    cases.push({ name: "an event after the terminal event", bytes, runId: "run-a", reason: "event_after_terminal", seq: 4, line: 4, eventId: late.id })
  }
  {
    const { opened, user } = baseRun()
    const bytes = ledger().singles([opened, user]).bytes(Buffer.alloc(512)).build()
    cases.push({ name: "NULs at the tail", bytes, runId: "run-a", reason: "torn_row", line: 3 })
  }
  {
    const { opened, user } = baseRun()
    const bytes = ledger().singles([opened, user]).line("\u0000\u0000\u0000\n").bytes(Buffer.alloc(64)).build()
    cases.push({ name: "NULs at the tail, with a newline among them", bytes, runId: "run-a", reason: "torn_row", line: 3 })
  }
  return cases
}

const assertCorruption = (
  label: string,
  error: { _tag: string; reason?: string; runId?: string; seq?: number; line?: number; eventId?: string; message: string },
  expected: { readonly runId: string; readonly reason: string; readonly seq?: number; readonly line: number; readonly eventId?: string }
) => {
  assert.strictEqual(error._tag, "LedgerCorruption", `${label}: ${error.message}`)
  assert.strictEqual(error.reason, expected.reason, `${label}: ${error.message}`)
  assert.strictEqual(error.runId, expected.runId, `${label}: runId`)
  assert.strictEqual(error.line, expected.line, `${label}: line (${error.message})`)
  if (expected.seq !== undefined) assert.strictEqual(error.seq, expected.seq, `${label}: seq (${error.message})`)
  if (expected.eventId !== undefined) assert.strictEqual(error.eventId, expected.eventId, `${label}: eventId`)
  assert.include(error.message, expected.runId, `${label}: the message names the run`)
  assert.include(error.message, `line ${expected.line}`, `${label}: the message names the line`)
}

describe("JSONL store: bad input reads as the typed error of docs/spec/01-ledger.md and never changes the file", () => {
  for (const c of badCases()) {
    it.scopedLive(c.name, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const workspace = yield* workspaceWith(c.bytes)
        const path = NodePath.join(workspace, FILE_NAME)
        const before = yield* fileHash(path)

        const store = yield* reader(workspace)
        assertCorruption(`${c.name} (readRun)`, yield* corruptionOf(store.readRun(rid(c.runId))), c)
        assertCorruption(
          `${c.name} (readRunPages)`,
          yield* corruptionOf(Stream.runCollect(store.readRunPages(rid(c.runId), 2))),
          c
        )
        assertCorruption(`${c.name} (highWater)`, yield* corruptionOf(store.highWater(rid(c.runId))), c)
        for (const other of c.alsoFails ?? []) {
          const e = yield* corruptionOf(store.readRun(rid(other)))
          assertCorruption(`${c.name} (run ${other})`, e, { runId: other, reason: c.reason, line: c.line })
        }
        const exported = yield* corruptionOf(Stream.runCollect(store.exportRows()))
        assert.strictEqual(exported.reason, c.reason, `${c.name} (exportRows): ${exported.message}`)
        assert.strictEqual(exported.line, c.line)

        // A writer refuses to open over it (a torn tail included), and opening it changes nothing.
        const opened = yield* Effect.scoped(JsonlRuntimeEventStore.make({ workspace })).pipe(failureOf)
        assert.strictEqual(opened._tag, "LedgerCorruption")
        assert.strictEqual((opened as { reason?: string }).reason, c.reason, `${c.name} (writer open): ${opened.message}`)

        assert.strictEqual(yield* fileHash(path), before, "the file changed")
        assert.deepStrictEqual((yield* fs.readDirectory(workspace)).filter((f) => f !== LOCK_FILE_NAME && f !== APPEND_LOCK_FILE_NAME), [FILE_NAME])
      }).pipe(Effect.provide(TestLayer)))
  }

  it.scopedLive("other runs of the file read fine when the corruption is tied to one run", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const bRun = EventBuilder.make("run-b")
      const bytes = ledger().singles([bRun.opened(), a.opened(), bRun.user("ok"), a.response("zz", "Bash", 1)]).build()
      const store = yield* reader(yield* workspaceWith(bytes))
      assert.strictEqual((yield* corruptionOf(store.readRun(rid("run-a")))).reason, "orphan_response")
      assert.deepStrictEqual((yield* store.readRun(rid("run-b"))).map((r) => r.seq), [1, 2])
      assert.deepStrictEqual(yield* store.listRuns(), [rid("run-b"), rid("run-a")])
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("readRunPages streams the complete groups, then fails at the end on a torn tail; listRuns still lists", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const t = EventBuilder.make("run-t")
      const l = ledger().singles([a.opened(), a.user("1"), a.model("2")]).group([t.opened(), t.user("x")])
      const bytes = Buffer.from(l.lines.join("").slice(0, -10), "utf8")
      const store = yield* reader(yield* workspaceWith(bytes))
      let seen = 0
      const exit = yield* Effect.exit(Stream.runForEach(store.readRunPages(rid("run-a"), 1), () => Effect.sync(() => seen++)))
      assert.strictEqual(seen, 3)
      assert.isTrue(Exit.isFailure(exit))
      const failure = yield* corruptionOf(Stream.runDrain(store.readRunPages(rid("run-a"), 1)))
      assert.strictEqual(failure.reason, "torn_row")
      assert.strictEqual(failure.line, 4)
      assert.deepStrictEqual(yield* store.listRuns(), [rid("run-a"), rid("run-t")])
      assert.strictEqual((yield* corruptionOf(store.readRun(rid("run-t")))).reason, "torn_row")
    }).pipe(Effect.provide(TestLayer)))
})

describe("JSONL store: torn-tail quarantine", () => {
  it.scopedLive("a writer refuses a torn tail; quarantine moves it aside, truncates, logs; the chain then continues", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const a = EventBuilder.make("run-a")
      const c = EventBuilder.make("run-c")
      const l = ledger().singles([a.opened(), c.opened(), a.user("1")]).group([c.user("x"), c.model("y")])
      const complete = l.build()
      const aHigh = l.highWater("run-a")
      const cHigh = l.highWater("run-c")
      const torn = Buffer.from(l.peekLine(a.model("lost")).slice(0, 57), "utf8")
      const workspace = yield* workspaceWith(Buffer.concat([complete, torn]))
      const path = NodePath.join(workspace, FILE_NAME)

      const refused = yield* Effect.scoped(JsonlRuntimeEventStore.make({ workspace })).pipe(failureOf)
      assert.strictEqual(refused._tag, "LedgerCorruption")
      assert.strictEqual((refused as { reason: string }).reason, "torn_row")
      assert.strictEqual((refused as { line: number }).line, 6)

      const result = yield* JsonlRuntimeEventStore.quarantineTornTail(workspace)
      assert.isTrue(result.quarantined)
      assert.strictEqual(result.offset, complete.length)
      assert.strictEqual(result.length, torn.length)
      assert.strictEqual(result.sha256, `sha256:${sha(torn)}`)
      assert.strictEqual(result.file, NodePath.join(workspace, `${FILE_NAME}.quarantine-1`))
      const quarantined = yield* fs.readFile(result.file!)
      assert.isTrue(Buffer.from(quarantined).equals(torn), "the quarantine file holds exactly the torn bytes")
      assert.strictEqual((yield* fs.stat(result.file!)).mode & 0o777, 0o600)
      assert.isTrue(Buffer.from(yield* fs.readFile(path)).equals(complete), "the ledger is its complete groups")

      const log = (yield* fs.readFileString(NodePath.join(workspace, QUARANTINE_LOG_NAME))).split("\n")
      assert.strictEqual(log.length, 2)
      assert.strictEqual(log[1], "")
      const entry = JSON.parse(log[0]!) as Record<string, unknown>
      assert.deepStrictEqual(Object.keys(entry), ["file", "length", "offset", "sha256", "ts"])
      assert.deepStrictEqual(
        { ...entry, ts: undefined },
        { file: `${FILE_NAME}.quarantine-1`, length: torn.length, offset: complete.length, sha256: result.sha256, ts: undefined }
      )
      assert.isTrue(typeof entry["ts"] === "number" && entry["ts"] > 1_600_000_000_000)
      assert.strictEqual((yield* fs.stat(NodePath.join(workspace, QUARANTINE_LOG_NAME))).mode & 0o777, 0o600)

      // High-waters of the complete runs are unchanged; a new writer appends and the chain continues.
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* JsonlRuntimeEventStore.make({ workspace })
        const hwA = yield* store.highWater(rid("run-a"))
        assert.deepStrictEqual([hwA.seq, hwA.digest], [aHigh.seq, aHigh.digest])
        const hwC = yield* store.highWater(rid("run-c"))
        assert.deepStrictEqual([hwC.seq, hwC.digest], [cHigh.seq, cHigh.digest])
        const next = a.model("again")
        const rows = yield* store.append(rid("run-a"), [next], { expectedHighWater: { seq: aHigh.seq, digest: aHigh.digest } })
        assert.strictEqual(rows[0]!.seq, aHigh.seq + 1)
        assert.strictEqual(rows[0]!.digest, Digest.next(aHigh.digest, aHigh.seq + 1, text(next)))
      }))
      const read = yield* (yield* reader(workspace)).readRun(rid("run-a"))
      assert.deepStrictEqual(read.map((r) => r.seq), [1, 2, 3])

      const again = yield* JsonlRuntimeEventStore.quarantineTornTail(workspace)
      assert.deepStrictEqual(again, { quarantined: false, offset: Number((yield* fs.stat(path)).size), length: 0 })
      assert.strictEqual((yield* fs.readFileString(NodePath.join(workspace, QUARANTINE_LOG_NAME))).split("\n").length, 2)
      assert.isFalse(yield* fs.exists(NodePath.join(workspace, `${FILE_NAME}.quarantine-2`)))
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a cut group and NULs are quarantined whole; the next quarantine file gets the next number", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const a = EventBuilder.make("run-a")
      const l = ledger().singles([a.opened()]).group([a.user("1"), a.model("2"), a.user("3")])
      const complete = Buffer.from(l.lines[0]!, "utf8")
      const tail = Buffer.concat([Buffer.from(l.lines[1]! + l.lines[2]!, "utf8"), Buffer.alloc(100)])
      const workspace = yield* workspaceWith(Buffer.concat([complete, tail]))
      yield* fs.writeFileString(NodePath.join(workspace, `${FILE_NAME}.quarantine-1`), "an older quarantine\n")
      const result = yield* JsonlRuntimeEventStore.quarantineTornTail(workspace)
      assert.strictEqual(result.file, NodePath.join(workspace, `${FILE_NAME}.quarantine-2`))
      assert.isTrue(Buffer.from(yield* fs.readFile(result.file!)).equals(tail))
      assert.strictEqual(yield* fs.readFileString(NodePath.join(workspace, `${FILE_NAME}.quarantine-1`)), "an older quarantine\n")
      assert.deepStrictEqual((yield* (yield* reader(workspace)).readRun(rid("run-a"))).map((r) => r.seq), [1])
    }).pipe(Effect.provide(TestLayer)))

  const refusedCases = () =>
    badCases().filter((c) => c.reason === "invalid_json" || c.reason === "non_canonical" || c.reason === "schema_invalid")

  for (const c of refusedCases()) {
    it.scopedLive(`quarantine refuses ${c.name} (${c.reason}), changing nothing`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        // With a torn tail after it too, so that there is something quarantine could have moved.
        const workspace = yield* workspaceWith(Buffer.concat([c.bytes, Buffer.from(`{"digest":"sha`, "utf8")]))
        const path = NodePath.join(workspace, FILE_NAME)
        const before = yield* fileHash(path)
        const error = yield* corruptionOf(JsonlRuntimeEventStore.quarantineTornTail(workspace))
        assert.strictEqual(error._tag, "LedgerCorruption")
        assert.strictEqual(error.reason, c.reason, error.message)
        assert.strictEqual(error.line, c.line)
        assert.strictEqual(yield* fileHash(path), before)
        assert.deepStrictEqual((yield* fs.readDirectory(workspace)).sort(), [FILE_NAME, APPEND_LOCK_FILE_NAME, LOCK_FILE_NAME].sort())
      }).pipe(Effect.provide(TestLayer)))
  }

  it.scopedLive("quarantine refuses a tail line that is JSON but not canonical, changing nothing", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const l = ledger().singles([a.opened()]).group([a.user("1"), a.model("2")])
      const bytes = Buffer.from(l.lines[0]! + l.lines[1]!.replace(`"end":3,`, `"end": 3,`), "utf8")
      const workspace = yield* workspaceWith(bytes)
      const before = yield* fileHash(NodePath.join(workspace, FILE_NAME))
      const error = yield* corruptionOf(JsonlRuntimeEventStore.quarantineTornTail(workspace))
      assert.strictEqual(error.reason, "non_canonical")
      assert.strictEqual(error.line, 2)
      assert.strictEqual(yield* fileHash(NodePath.join(workspace, FILE_NAME)), before)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("quarantine on a folder without a ledger is WorkspaceNotFound and creates nothing", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      const error = yield* failureOf(JsonlRuntimeEventStore.quarantineTornTail(workspace))
      assert.strictEqual(error._tag, "WorkspaceNotFound")
      assert.deepStrictEqual(yield* fs.readDirectory(workspace), [])
    }).pipe(Effect.provide(TestLayer)))
})

// Starts test/fixtures/lock-holder.ts holding the lock in another process; returns once it printed "ready".
const spawnLockHolder = (lockPath: string) =>
  Effect.gen(function*() {
    const proc = yield* Command.make("node", "--import", "tsx", lockHolder, lockPath, "exclusive").pipe(
      Command.workingDirectory(projectRoot),
      Command.start
    )
    const ready = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.filter((line) => line === "ready"),
      Stream.runHead,
      Effect.timeout("30 seconds")
    )
    assert.isTrue(Option.isSome(ready), "the lock holder did not get ready")
    return proc
  })

describe("JSONL store: the writer lock", () => {
  it.scopedLive("a reader ignores a torn tail while a writer in another process holds the lock", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const l = ledger().singles([a.opened(), a.user("1")])
      const inFlight = l.peekLine(a.model("in flight"))
      const workspace = yield* workspaceWith(Buffer.concat([l.build(), Buffer.from(inFlight.slice(0, 30), "utf8")]))
      const store = yield* reader(workspace)
      const lockPath = NodePath.join(workspace, LOCK_FILE_NAME)

      const child = yield* spawnLockHolder(lockPath)
      const rows = yield* store.readRun(rid("run-a"))
      assert.deepStrictEqual(rows.map((r) => r.seq), [1, 2])
      assert.strictEqual((yield* store.highWater(rid("run-a"))).seq, 2)
      assert.strictEqual(Chunk.size(yield* Stream.runCollect(store.exportRows())), 2)
      assert.deepStrictEqual(yield* store.listRuns(), [rid("run-a")])

      yield* child.kill("SIGKILL")
      yield* Effect.either(child.exitCode)
      // The holder is gone: the same tail is now torn.
      assert.strictEqual((yield* corruptionOf(store.readRun(rid("run-a")))).reason, "torn_row")
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a reader in the writer's process ignores bytes beyond the writer's last acknowledged append", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = NodePath.join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" }), "ws")
      const writer = yield* JsonlRuntimeEventStore.make({ workspace })
      const a = EventBuilder.make("run-a")
      yield* writer.append(rid("run-a"), [a.opened(), a.user("1")])
      // Simulate an append in flight: half a line after the acknowledged end (the ledger, never the lock file).
      yield* Effect.scoped(Effect.flatMap(fs.open(NodePath.join(workspace, FILE_NAME), { flag: "a" }), (f) =>
        f.writeAll(Buffer.from(`{"digest":"sha256:0123`, "utf8"))))
      const store = yield* reader(workspace)
      assert.deepStrictEqual((yield* store.readRun(rid("run-a"))).map((r) => r.seq), [1, 2])
      assert.deepStrictEqual((yield* writer.readRun(rid("run-a"))).map((r) => r.seq), [1, 2])
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a second writer in the same process gets WorkspaceLocked naming this process", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      yield* JsonlRuntimeEventStore.make({ workspace })
      const error = yield* failureOf(Effect.scoped(JsonlRuntimeEventStore.make({ workspace })))
      assert.strictEqual(error._tag, "WorkspaceLocked")
      assert.strictEqual((error as { holderPid?: number }).holderPid, process.pid)
      // Readers are not locked out, and quarantine waits, then gives up, naming the holder.
      yield* reader(workspace)
      const q = yield* failureOf(JsonlRuntimeEventStore.quarantineTornTail(workspace))
      assert.strictEqual(q._tag, "WorkspaceLocked")
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a writer lock file removed under its writer (docs/reliability.md, File hygiene): no second writer gets in, the first stops, nothing acknowledged is lost", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      const b = EventBuilder.make("run-lost")
      const first = yield* JsonlRuntimeEventStore.make({ workspace })
      const acknowledged = yield* first.append(rid("run-lost"), [b.opened(), b.user("hello")])
      // An operator "clears a stale lock" while the writer runs.
      yield* fs.remove(NodePath.join(workspace, LOCK_FILE_NAME))
      const second = yield* failureOf(Effect.scoped(JsonlRuntimeEventStore.make({ workspace })))
      assert.strictEqual(second._tag, "WorkspaceLocked", second.message)
      assert.strictEqual((second as { holderPid?: number }).holderPid, process.pid)
      const refused = yield* failureOf(first.append(rid("run-lost"), [b.model("after the removal")]))
      assert.strictEqual(refused._tag, "StoreWriteFailed", refused.message)
      assert.include(refused.message, LOCK_FILE_NAME)
      const rows = yield* Effect.scoped(Effect.flatMap(reader(workspace), (r) => r.readRun(rid("run-lost"))))
      assert.deepStrictEqual(rows.map((r) => r.digest), acknowledged.map((r) => r.digest))
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a writer never writes over bytes another process appended to its ledger (docs/reliability.md, File hygiene)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      const b = EventBuilder.make("run-other")
      const first = yield* JsonlRuntimeEventStore.make({ workspace })
      yield* first.append(rid("run-other"), [b.opened()])
      // Another writer's line, appended behind this writer's back (as a second writer with a new lock file would).
      const ledger = NodePath.join(workspace, FILE_NAME)
      const other = "{\"another\":\"writer's acknowledged line\"}\n"
      yield* Effect.scoped(Effect.flatMap(fs.open(ledger, { flag: "a" }), (f) => f.writeAll(new TextEncoder().encode(other))))
      const before = yield* fs.readFileString(ledger)
      const refused = yield* failureOf(first.append(rid("run-other"), [b.user("hello")]))
      assert.strictEqual(refused._tag, "StoreWriteFailed", refused.message)
      assert.strictEqual(yield* fs.readFileString(ledger), before)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("the writer lock is released with the store's scope", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const lock = yield* WorkspaceLock
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      yield* Effect.scoped(Effect.gen(function*() {
        yield* JsonlRuntimeEventStore.make({ workspace })
        assert.strictEqual(yield* lock.probe(NodePath.join(workspace, LOCK_FILE_NAME)), "held")
      }))
      assert.strictEqual(yield* lock.probe(NodePath.join(workspace, LOCK_FILE_NAME)), "free")
      yield* JsonlRuntimeEventStore.make({ workspace })
    }).pipe(Effect.provide(TestLayer)))
})

describe("JSONL store: files", () => {
  it.scopedLive("a writer creates the folder 0700 and the ledger 0600", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = NodePath.join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" }), "nested", "ws")
      const store = yield* JsonlRuntimeEventStore.make({ workspace })
      const a = EventBuilder.make("run-a")
      yield* store.append(rid("run-a"), [a.opened()])
      assert.strictEqual((yield* fs.stat(workspace)).mode & 0o777, 0o700)
      assert.strictEqual((yield* fs.stat(NodePath.join(workspace, FILE_NAME))).mode & 0o777, 0o600)
      assert.strictEqual((yield* fs.stat(NodePath.join(workspace, LOCK_FILE_NAME))).mode & 0o777, 0o600)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("read-only on a folder without a ledger, or no folder, is WorkspaceNotFound and creates nothing", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      const error = yield* failureOf(reader(workspace))
      assert.strictEqual(error._tag, "WorkspaceNotFound")
      assert.deepStrictEqual(yield* fs.readDirectory(workspace), [])
      const missing = NodePath.join(workspace, "missing")
      assert.strictEqual((yield* failureOf(reader(missing)))._tag, "WorkspaceNotFound")
      assert.isFalse(yield* fs.exists(missing))
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a writer over a path that is a file is WorkspaceNotFound, not a crash", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      const file = NodePath.join(dir, "not-a-folder")
      yield* fs.writeFileString(file, "x")
      assert.strictEqual((yield* failureOf(Effect.scoped(JsonlRuntimeEventStore.make({ workspace: file }))))._tag, "WorkspaceNotFound")
      assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["not-a-folder"])
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a read-only store refuses appends and leaves the folder as it was", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const a = EventBuilder.make("run-a")
      const workspace = yield* workspaceWith(ledger().singles([a.opened()]).build())
      const store = yield* reader(workspace)
      assert.strictEqual((yield* failureOf(store.append(rid("run-a"), [a.user("x")])))._tag, "StoreWriteFailed")
      yield* store.readRun(rid("run-a"))
      yield* store.listRuns()
      assert.deepStrictEqual(yield* fs.readDirectory(workspace), [FILE_NAME])
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("an appendBatch writes one contiguous group per run, in order, as canonical lines", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      const store = yield* JsonlRuntimeEventStore.make({ workspace })
      const a = EventBuilder.make("run-a")
      const bRun = EventBuilder.make("run-b")
      const aEvents = [a.opened(), a.user("1")]
      const bEvents = [bRun.opened(), bRun.user("2"), bRun.model("3")]
      yield* store.appendBatch([{ runId: rid("run-b"), events: bEvents }, { runId: rid("run-a"), events: aEvents }])
      const expected = ledger().group(bEvents).group(aEvents).build()
      assert.isTrue(Buffer.from(yield* fs.readFile(NodePath.join(workspace, FILE_NAME))).equals(expected))
    }).pipe(Effect.provide(TestLayer)))
})

// A FileSystem that records, per path, every write, fsync and truncate made through files it opened, and can fail them.
const recordingFileSystem = () => {
  const log: Array<string> = []
  const failNext = { sync: 0, truncate: 0 }
  const failure = (method: string) =>
    new PlatformError.SystemError({ module: "FileSystem", method, reason: "Unknown", description: `injected ${method} failure` })
  const layer = Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) => {
      const wrap = (path: string, file: FileSystem.File): FileSystem.File => {
        const name = NodePath.basename(path)
        return {
          [FileSystem.FileTypeId]: FileSystem.FileTypeId,
          fd: file.fd,
          stat: file.stat,
          seek: (offset, from) => file.seek(offset, from),
          read: (buffer) => file.read(buffer),
          readAlloc: (size) => file.readAlloc(size),
          sync: Effect.suspend(() => {
            log.push(`sync ${name}`)
            if (failNext.sync > 0) {
              failNext.sync--
              return Effect.fail(failure("sync"))
            }
            return file.sync
          }),
          truncate: (length) =>
            Effect.suspend(() => {
              log.push(`truncate ${name} ${length}`)
              if (failNext.truncate > 0) {
                failNext.truncate--
                return Effect.fail(failure("truncate"))
              }
              return file.truncate(length)
            }),
          write: (buffer) => Effect.suspend(() => (log.push(`write ${name} ${buffer.length}`), file.write(buffer))),
          writeAll: (buffer) => Effect.suspend(() => (log.push(`writeAll ${name} ${buffer.length}`), file.writeAll(buffer)))
        }
      }
      return FileSystem.FileSystem.of({
        ...fs,
        open: (path, options) => Effect.map(fs.open(path, options), (file) => wrap(path, file))
      })
    })
  ).pipe(Layer.provide(NodeFileSystem.layer))
  return { log, failNext, layer }
}

describe("JSONL store: one write and one fsync per append (a recording FileSystem wrapped around Node's)", () => {
  it.scopedLive("append and appendBatch are each exactly one write of all their lines, then one fsync", () => {
    const recording = recordingFileSystem()
    return Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      const store = yield* JsonlRuntimeEventStore.make({ workspace })
      const a = EventBuilder.make("run-a")
      const bRun = EventBuilder.make("run-b")
      const size = () => Effect.map(fs.stat(NodePath.join(workspace, FILE_NAME)), (i) => Number(i.size))

      recording.log.length = 0
      yield* store.append(rid("run-a"), [a.opened()])
      const one = yield* size()
      assert.deepStrictEqual(recording.log, [`writeAll ${FILE_NAME} ${one}`, `sync ${FILE_NAME}`])

      recording.log.length = 0
      yield* store.appendBatch([
        { runId: rid("run-a"), events: [a.user("1"), a.model("2")] },
        { runId: rid("run-b"), events: [bRun.opened(), bRun.user("3")] }
      ])
      assert.deepStrictEqual(recording.log, [`writeAll ${FILE_NAME} ${(yield* size()) - one}`, `sync ${FILE_NAME}`])

      // Reads and refused appends write nothing.
      recording.log.length = 0
      yield* store.readRun(rid("run-a"))
      yield* Stream.runDrain(store.exportRows())
      yield* failureOf(store.append(rid("run-a"), [a.opened()]))
      assert.deepStrictEqual(recording.log, [])
    }).pipe(Effect.provide(Layer.merge(recording.layer, NodeWorkspaceLock.layerNode)))
  })

  it.scopedLive("a failed fsync truncates back to the acknowledged length; a failed rollback refuses everything until reopened", () => {
    const recording = recordingFileSystem()
    return Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-" })
      const path = NodePath.join(workspace, FILE_NAME)
      const a = EventBuilder.make("run-a")
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* JsonlRuntimeEventStore.make({ workspace })
        yield* store.append(rid("run-a"), [a.opened()])
        const acknowledged = Number((yield* fs.stat(path)).size)

        recording.log.length = 0
        recording.failNext.sync = 1
        const failed = yield* failureOf(store.append(rid("run-a"), [a.user("lost?")]))
        assert.strictEqual(failed._tag, "StoreWriteFailed")
        assert.strictEqual(recording.log[0]!.startsWith(`writeAll ${FILE_NAME}`), true)
        assert.deepStrictEqual(recording.log.slice(1), [`sync ${FILE_NAME}`, `truncate ${FILE_NAME} ${acknowledged}`, `sync ${FILE_NAME}`])
        assert.strictEqual(Number((yield* fs.stat(path)).size), acknowledged)

        // The store goes on: the next append gets seq 2.
        const rows = yield* store.append(rid("run-a"), [a.user("kept")])
        assert.strictEqual(rows[0]!.seq, 2)

        recording.failNext.sync = 1
        recording.failNext.truncate = 1
        assert.strictEqual((yield* failureOf(store.append(rid("run-a"), [a.model("x")])))._tag, "StoreWriteFailed")
        recording.log.length = 0
        const refused = yield* failureOf(store.append(rid("run-a"), [a.model("y")]))
        assert.strictEqual(refused._tag, "StoreWriteFailed")
        assert.include(refused.message, "until it is reopened")
        assert.deepStrictEqual(recording.log, [], "a broken store writes nothing")
      }))
      // The failed append's bytes are still in the file (the truncate failed): a torn or complete tail. Either way a
      // reopened writer and quarantine recover to a clean ledger holding seqs 1, 2 and maybe 3.
      const reopened = yield* Effect.either(Effect.scoped(JsonlRuntimeEventStore.make({ workspace })))
      if (Either.isLeft(reopened)) {
        assert.strictEqual((reopened.left as { reason?: string }).reason, "torn_row")
        yield* JsonlRuntimeEventStore.quarantineTornTail(workspace)
      }
      const store = yield* JsonlRuntimeEventStore.make({ workspace })
      const hw = yield* store.highWater(rid("run-a"))
      assert.isTrue(hw.seq === 2 || hw.seq === 3)
      const more = yield* store.append(rid("run-a"), [a.model("z")])
      assert.strictEqual(more[0]!.seq, hw.seq + 1)
    }).pipe(Effect.provide(Layer.merge(recording.layer, NodeWorkspaceLock.layerNode)))
  })
})

describe("JSONL store: lost blocks of an interrupted append (power loss with reordered pages)", () => {
  const BLOCK = 4096
  const big = (n: number, fill: string) => `${n}:${fill.repeat(3000)}`

  /** The 1-based line holding the first NUL. */
  const lineOfFirstNul = (bytes: Uint8Array) => {
    const at = bytes.indexOf(0)
    let line = 1
    for (let i = 0; i < at; i++) if (bytes[i] === 10) line++
    return line
  }

  /** A committed prefix, then an interrupted append (one group of run-a, optionally a second group of run-b). */
  const shape = (withBatch: boolean, laterAppend = false) => {
    const a = EventBuilder.make("run-a")
    const b = EventBuilder.make("run-b")
    const l = ledger().singles([a.opened(), b.opened(), a.user("committed")])
    const committed = l.build()
    const aHigh = l.highWater("run-a")
    const bHigh = l.highWater("run-b")
    const before = l.lines.length
    l.group([a.user(big(1, "x")), a.model(big(2, "y")), a.user(big(3, "z")), a.model("last of the group")])
    if (withBatch) l.group([b.user(big(4, "w")), b.model("b's last")])
    if (laterAppend) l.singles([a.user("a later append")])
    const full = Buffer.from(l.lines.join(""), "utf8")
    return { a, committed, full, aHigh, bHigh, appendLines: l.lines.slice(before) }
  }

  /** The bytes with the block `index` (of BLOCK bytes) read as NULs, as a lost page reads. */
  const loseBlock = (bytes: Uint8Array, index: number) => {
    const out = Buffer.from(bytes)
    out.fill(0, index * BLOCK, Math.min(out.length, (index + 1) * BLOCK))
    return out
  }

  const expectTornAndQuarantined = (bytes: Uint8Array, committed: Uint8Array, aHigh: { seq: number; digest: string }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* workspaceWith(bytes)
      const path = NodePath.join(workspace, FILE_NAME)
      const read = yield* corruptionOf((yield* reader(workspace)).readRun(rid("run-a")))
      assert.strictEqual(read.reason, "torn_row", read.message)
      assert.strictEqual(read.line, 4, read.message)
      const opened = yield* Effect.scoped(JsonlRuntimeEventStore.make({ workspace })).pipe(failureOf)
      assert.strictEqual((opened as { reason?: string }).reason, "torn_row", opened.message)

      const result = yield* JsonlRuntimeEventStore.quarantineTornTail(workspace)
      assert.isTrue(result.quarantined)
      assert.strictEqual(result.offset, committed.length)
      assert.strictEqual(result.length, bytes.length - committed.length)
      assert.isTrue(Buffer.from(yield* fs.readFile(result.file!)).equals(Buffer.from(bytes).subarray(committed.length)))
      assert.isTrue(Buffer.from(yield* fs.readFile(path)).equals(committed), "the ledger is its acknowledged part")
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* JsonlRuntimeEventStore.make({ workspace })
        const again = EventBuilder.make("run-a")
        const rows = yield* store.append(rid("run-a"), [again.custom(again.diagnostic("again").body, { id: "run-a:again" })], {
          expectedHighWater: aHigh
        })
        assert.strictEqual(rows[0]!.seq, aHigh.seq + 1)
      }))
      assert.deepStrictEqual((yield* (yield* reader(workspace)).readRun(rid("run-a"))).map((r) => r.seq), [1, 2, 3])
    })

  it.scopedLive("a lost block inside one group, its `seq == end` line persisted after it: torn_row, quarantined, appendable", () =>
    Effect.gen(function*() {
      const { committed, full, aHigh } = shape(false)
      // A block wholly inside the append, with the group's last line after it.
      const index = Math.ceil(committed.length / BLOCK)
      assert.isBelow((index + 1) * BLOCK, full.length - 100)
      yield* expectTornAndQuarantined(loseBlock(full, index), committed, aHigh)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a batch whose first group lost a block while the next group (of another run) persisted whole: torn_row", () =>
    Effect.gen(function*() {
      const { committed, full, aHigh, appendLines } = shape(true)
      const index = Math.ceil(committed.length / BLOCK)
      // The whole second group lies after the lost block: on its own it looks like a complete group.
      const secondGroup = Buffer.byteLength(appendLines.slice(4).join(""), "utf8")
      assert.isBelow((index + 1) * BLOCK, full.length - secondGroup)
      yield* expectTornAndQuarantined(loseBlock(full, index), committed, aHigh)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("the page holding the synced end lost its unsynced part (NULs from the committed end): torn_row", () =>
    Effect.gen(function*() {
      const { committed, full, aHigh } = shape(true)
      const bytes = Buffer.from(full)
      bytes.fill(0, committed.length, Math.ceil(committed.length / BLOCK) * BLOCK)
      yield* expectTornAndQuarantined(bytes, committed, aHigh)
    }).pipe(Effect.provide(TestLayer)))

  const expectCorruptionKept = (bytes: Uint8Array, line: number = lineOfFirstNul(bytes)) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* workspaceWith(bytes)
      const path = NodePath.join(workspace, FILE_NAME)
      const before = yield* fileHash(path)
      for (const run of ["run-a", "run-b"]) {
        const read = yield* corruptionOf((yield* reader(workspace)).readRun(rid(run)))
        assert.strictEqual(read.reason, "invalid_json", read.message)
        assert.strictEqual(read.line, line, read.message)
      }
      const opened = yield* Effect.scoped(JsonlRuntimeEventStore.make({ workspace })).pipe(failureOf)
      assert.strictEqual((opened as { reason?: string }).reason, "invalid_json", opened.message)
      const refused = yield* corruptionOf(JsonlRuntimeEventStore.quarantineTornTail(workspace))
      assert.strictEqual(refused.reason, "invalid_json", refused.message)
      assert.strictEqual(yield* fileHash(path), before, "the file changed")
      assert.deepStrictEqual((yield* fs.readDirectory(workspace)).sort(), [FILE_NAME, APPEND_LOCK_FILE_NAME, LOCK_FILE_NAME].sort())
    })

  it.scopedLive("a lost-looking block followed by a later append of the same run is committed data: invalid_json, never quarantined", () =>
    Effect.gen(function*() {
      // A second append of run-a after the group: the group was acknowledged before it, so its damage is corruption.
      const { committed, full } = shape(false, true)
      const bytes = loseBlock(full, Math.ceil(committed.length / BLOCK))
      yield* expectCorruptionKept(bytes)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("NULs that do not fill whole blocks, before complete groups, are corruption: invalid_json, never quarantined", () =>
    Effect.gen(function*() {
      const { committed, full } = shape(true)
      const bytes = Buffer.from(full)
      const start = Math.ceil(committed.length / BLOCK) * BLOCK + 100
      bytes.fill(0, start, start + 200)
      yield* expectCorruptionKept(bytes)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("quarantine refuses a torn-tail row that does not continue its run (a wrong digest, a skipped seq), changing nothing", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const l = ledger().singles([a.opened(), a.user("1")])
      const committed = l.build()
      const next = l.peekLine(a.model("2")).replace(`"end":3`, `"end":4`)
      const wrongDigest = next.replace(/"digest":"sha256:[0-9a-f]{4}/, `"digest":"sha256:0000`)
      const skipped = ledger().singles([a.opened(), a.user("1")]).group([a.model("2"), a.user("3")], { skipSeq: 1 }).lines[2]!
      for (const [row, reason] of [[wrongDigest, "digest_mismatch"], [skipped, "seq_gap"]] as const) {
        // A row of an open group and a partial line: no complete group follows, so this is a torn tail.
        const bytes = Buffer.concat([committed, Buffer.from(row, "utf8"), Buffer.from(`{"digest":"sha`, "utf8")])
        const workspace = yield* workspaceWith(bytes)
        const read = yield* corruptionOf((yield* reader(workspace)).readRun(rid("run-a")))
        assert.strictEqual(read.reason, "torn_row", read.message)
        const before = yield* fileHash(NodePath.join(workspace, FILE_NAME))
        const refused = yield* corruptionOf(JsonlRuntimeEventStore.quarantineTornTail(workspace))
        assert.strictEqual(refused.reason, reason, refused.message)
        assert.strictEqual(refused.line, 3, refused.message)
        assert.strictEqual(yield* fileHash(NodePath.join(workspace, FILE_NAME)), before)
      }
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a flipped byte in the middle of committed data, with lines after it that continue the chain: invalid_json", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const b = EventBuilder.make("run-b")
      const l = ledger().singles([a.opened(), b.opened(), a.user("one"), a.user("two"), b.user("three")])
      const bytes = Buffer.from(l.lines.join(""), "utf8")
      const third = Buffer.byteLength(l.lines.slice(0, 2).join(""), "utf8")
      bytes[third] = 0x7c // `{` -> `|`: line 3 is no longer JSON; lines 4 and 5 continue both chains
      yield* expectCorruptionKept(bytes, 3)
    }).pipe(Effect.provide(TestLayer)))
})
