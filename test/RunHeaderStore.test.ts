// Tests of the RunHeaderStore (docs/spec/04-continuation.md): one conformance suite run against the memory, JSONL and SQLite layers,
// then what only JSONL has (records, torn and malformed lines) and what only SQLite has (the database's own guards, races).
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Equal from "effect/Equal"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { InvocationId, RunId, SessionId, TurnId } from "../src/Domain/Ids.js"
import { ContinuationClaim, RunHeader } from "../src/Domain/RunHeader.js"
import { ContinuationSource, SourceHighWater } from "../src/Domain/RuntimeEvent.js"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as PgRunHeaderStore from "../src/Layers/PgRunHeaderStore.js"
import * as SqliteRunHeaderStore from "../src/Layers/SqliteRunHeaderStore.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import type { RunHeaderStoreShape } from "../src/Services/RunHeaderStore.js"
import { pgUrl, workspaceFor } from "./support/pg.js"

const DIGEST_A = `sha256:${"a".repeat(64)}`
const DIGEST_B = `sha256:${"b".repeat(64)}`
const SOURCE = RunId.make("run-source")

/** An ordinary run's header. */
const header = (runId: string, fields: Partial<ConstructorParameters<typeof RunHeader>[0]> = {}) =>
  new RunHeader({
    runId: RunId.make(runId),
    sessionId: SessionId.make("session-1"),
    invocationId: InvocationId.make(`inv-${runId}`),
    turnId: TurnId.make(`turn-${runId}`),
    status: "created",
    workspaceId: "ws-uuid-1",
    createdAt: 1000,
    updatedAt: 1000,
    ...fields
  })

/** A claim on `SOURCE` at `seq`/`digest`, and its continuation run's header. */
const claimPair = (
  claimId: string,
  runId: string,
  options: { readonly seq?: number; readonly digest?: string; readonly supersedes?: string; readonly source?: RunId } = {}
) => {
  const source = options.source ?? SOURCE
  const seq = options.seq ?? 7
  const digest = options.digest ?? DIGEST_A
  const claim = new ContinuationClaim({
    claimId,
    sourceRunId: source,
    sourceSeq: seq,
    sourceDigest: digest,
    continuationRunId: RunId.make(runId),
    ...(options.supersedes !== undefined ? { supersedes: options.supersedes } : {}),
    createdAt: 2000
  })
  const continuation = header(runId, {
    parentRunId: source,
    claimId,
    continuationSource: new ContinuationSource({
      sessionId: SessionId.make("session-1"),
      invocationId: InvocationId.make(`inv-${source}`),
      runId: source,
      turnId: TurnId.make(`turn-${source}`),
      highWater: new SourceHighWater({ seq, digest })
    }),
    createdAt: 2000,
    updatedAt: 2000
  })
  return { claim, header: continuation }
}

const failure = <A, E>(result: Either.Either<A, E>): E => {
  assert.isTrue(Either.isLeft(result), `expected a failure, got ${JSON.stringify(result)}`)
  return (result as Either.Left<E, A>).left
}

const tempWorkspace = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-headers-" }))

/** Builds a store from a layer within the current scope. */
const build = (layer: Layer.Layer<RunHeaderStore, unknown>) =>
  Effect.map(Layer.build(layer), (ctx) => Context.get(ctx, RunHeaderStore))

interface Target {
  readonly name: string
  readonly layer: (workspace: string) => Layer.Layer<RunHeaderStore, unknown>
  readonly persistent: boolean
}

const targets: ReadonlyArray<Target> = [
  { name: "memory", layer: () => MemoryRunHeaderStore.layer, persistent: false },
  {
    name: "jsonl",
    layer: (ws) => JsonlRunHeaderStore.layer({ workspace: ws }).pipe(Layer.provide(NodeContext.layer)),
    persistent: true
  },
  {
    name: "sqlite",
    layer: (ws) => SqliteRunHeaderStore.layer({ workspace: ws }).pipe(Layer.provide(NodeContext.layer)),
    persistent: true
  },
  // Each temp folder stands for its own workspace of the shared test server.
  { name: "postgres", layer: (ws) => PgRunHeaderStore.layer({ url: pgUrl(), workspace: workspaceFor(ws) }), persistent: true }
]

// Runs a test body with a store over a fresh temp workspace.
const withStore = (target: Target, body: (store: RunHeaderStoreShape, workspace: string) => Effect.Effect<void, unknown>) =>
  Effect.gen(function*() {
    const ws = yield* tempWorkspace
    const store = yield* build(target.layer(ws))
    yield* body(store, ws)
  }).pipe(Effect.provide(NodeContext.layer))

for (const target of targets) {
  describe(`RunHeaderStore conformance: ${target.name}`, () => {
    it.scopedLive("creates, gets and lists headers in creation order; an unknown run has none", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = header("run-a")
          const b = header("run-b", { status: "running", statusReason: "process_interrupted" })
          assert.isTrue(Equal.equals(yield* store.create(a), a))
          yield* store.create(b)
          const got = yield* store.get(RunId.make("run-b"))
          assert.isTrue(Option.isSome(got) && Equal.equals(got.value, b))
          assert.isTrue(Option.isNone(yield* store.get(RunId.make("run-missing"))))
          const all = yield* store.list()
          assert.deepStrictEqual(all.map((h) => h.runId), ["run-a", "run-b"])
          assert.isTrue(Equal.equals(all[0], a) && Equal.equals(all[1], b))
        })))

    it.scopedLive("refuses a second header for a run and keeps the first", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          yield* store.create(header("run-a"))
          const error = failure(yield* Effect.either(store.create(header("run-a", { workspaceId: "other" }))))
          assert.strictEqual(error._tag, "RunHeaderExists")
          assert.include(error.message, "run-a")
          const all = yield* store.list()
          assert.strictEqual(all.length, 1)
          assert.strictEqual(all[0]!.workspaceId, "ws-uuid-1")
        })))

    it.scopedLive("changes only the status fields, forward only, and never a terminal header", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = header("run-a")
          yield* store.create(a)
          const running = yield* store.setStatus(a.runId, "running", { at: 1500, reason: "process_interrupted" })
          assert.strictEqual(running.status, "running")
          assert.strictEqual(running.statusReason, "process_interrupted")
          const back = failure(yield* Effect.either(store.setStatus(a.runId, "created", { at: 1600 })))
          assert.strictEqual(back._tag, "RunHeaderUpdateRefused")
          assert.strictEqual(back._tag === "RunHeaderUpdateRefused" ? back.reason : "", "status_backwards")
          const done = yield* store.setStatus(a.runId, "completed", { at: 1700 })
          // Without a reason the header keeps none; every other field is the created one.
          assert.isTrue(Equal.equals(done, header("run-a", { status: "completed", updatedAt: 1700 })))
          const stored = yield* store.get(a.runId)
          assert.isTrue(Option.isSome(stored) && Equal.equals(stored.value, done))
          for (const status of ["failed", "running", "completed"] as const) {
            const refused = failure(yield* Effect.either(store.setStatus(a.runId, status, { at: 1800 })))
            assert.strictEqual(refused._tag, "RunHeaderUpdateRefused")
            assert.strictEqual(refused._tag === "RunHeaderUpdateRefused" ? refused.reason : "", "header_terminal")
            assert.include(refused.message, "run-a")
          }
          const after = yield* store.get(a.runId)
          assert.isTrue(Option.isSome(after) && Equal.equals(after.value, done))
          const missing = failure(yield* Effect.either(store.setStatus(RunId.make("run-none"), "running", { at: 1 })))
          assert.strictEqual(missing._tag, "RunHeaderNotFound")
        })))

    it.scopedLive("a claim and its continuation's header commit together; a second claim on the boundary writes nothing", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const first = claimPair("claim-1", "run-c1")
          assert.isTrue(Equal.equals(yield* store.claim(first.claim, first.header), first.claim))
          const stored = yield* store.get(first.header.runId)
          assert.isTrue(Option.isSome(stored) && Equal.equals(stored.value, first.header))
          const boundary = { sourceRunId: SOURCE, sourceSeq: 7, sourceDigest: DIGEST_A }
          const at = yield* store.claimsAt(boundary)
          assert.strictEqual(at.length, 1)
          assert.isTrue(Equal.equals(at[0], first.claim))

          const second = claimPair("claim-2", "run-c2")
          const error = failure(yield* Effect.either(store.claim(second.claim, second.header)))
          assert.strictEqual(error._tag, "ContinuationAlreadyExists")
          if (error._tag === "ContinuationAlreadyExists") {
            assert.strictEqual(error.reason, "continuation_already_exists")
            assert.strictEqual(error.existingClaimId, "claim-1")
            assert.include(error.message, "run-source")
          }
          assert.isTrue(Option.isNone(yield* store.get(second.header.runId)), "a refused claim left its header")
          assert.strictEqual((yield* store.claimsAt(boundary)).length, 1)

          // Another boundary of the same source (a later high-water) is a boundary of its own.
          const later = claimPair("claim-3", "run-c3", { seq: 9, digest: DIGEST_B })
          yield* store.claim(later.claim, later.header)
          assert.deepStrictEqual((yield* store.claims(SOURCE)).map((c) => c.claimId), ["claim-1", "claim-3"])
          assert.deepStrictEqual((yield* store.claims(RunId.make("run-other"))).length, 0)
        })))

    it.scopedLive("refuses a claim whose header is not its continuation's, a taken claim id, and an existing run, writing nothing", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const pair = claimPair("claim-1", "run-c1")
          const mismatches = [
            header("run-c1", { claimId: "claim-1", parentRunId: SOURCE }), // no continuationSource
            new RunHeader({ ...pair.header, claimId: "claim-other" }),
            new RunHeader({ ...pair.header, parentRunId: RunId.make("run-else") }),
            claimPair("claim-1", "run-c1", { seq: 8 }).header,
            claimPair("claim-1", "run-c1", { digest: DIGEST_B }).header,
            claimPair("claim-1", "run-c9").header
          ]
          for (const wrong of mismatches) {
            const error = failure(yield* Effect.either(store.claim(pair.claim, wrong)))
            assert.strictEqual(error._tag, "ClaimRefused")
            assert.strictEqual(error._tag === "ClaimRefused" ? error.reason : "", "claim_header_mismatch")
          }
          assert.strictEqual((yield* store.list()).length, 0)
          assert.strictEqual((yield* store.claims(SOURCE)).length, 0)

          yield* store.create(header("run-c1"))
          const exists = failure(yield* Effect.either(store.claim(pair.claim, pair.header)))
          assert.strictEqual(exists._tag, "RunHeaderExists")
          assert.strictEqual((yield* store.claims(SOURCE)).length, 0)

          const ok = claimPair("claim-x", "run-c3", { seq: 9 })
          yield* store.claim(ok.claim, ok.header)
          const dup = claimPair("claim-x", "run-c4", { seq: 11 })
          const duplicate = failure(yield* Effect.either(store.claim(dup.claim, dup.header)))
          assert.strictEqual(duplicate._tag === "ClaimRefused" ? duplicate.reason : "", "duplicate_claim_id")
          assert.isTrue(Option.isNone(yield* store.get(RunId.make("run-c4"))))
        })))

    it.scopedLive("supersedes an abandoned claim once, recording what it supersedes", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const boundary = { sourceRunId: SOURCE, sourceSeq: 7, sourceDigest: DIGEST_A }
          const early = claimPair("claim-0", "run-c0", { supersedes: "claim-none" })
          const nothing = failure(yield* Effect.either(store.claim(early.claim, early.header)))
          assert.strictEqual(nothing._tag === "ClaimRefused" ? nothing.reason : "", "superseded_claim_missing")

          const first = claimPair("claim-1", "run-c1")
          yield* store.claim(first.claim, first.header)
          const second = claimPair("claim-2", "run-c2", { supersedes: "claim-1" })
          // Live (not abandoned): superseding is refused.
          const live = failure(yield* Effect.either(store.claim(second.claim, second.header)))
          assert.strictEqual(live._tag, "ContinuationAlreadyExists")
          yield* store.setStatus(first.header.runId, "failed", { at: 2100 })
          // Failed, but for another reason: still refused.
          const notAbandoned = failure(yield* Effect.either(store.claim(second.claim, second.header)))
          assert.strictEqual(notAbandoned._tag, "ContinuationAlreadyExists")
          assert.isTrue(Option.isNone(yield* store.get(second.header.runId)))

          // A second boundary whose claim is abandoned as repair closes it.
          const b2 = { seq: 20, digest: DIGEST_B }
          const firstB = claimPair("claim-b1", "run-b1", b2)
          yield* store.claim(firstB.claim, firstB.header)
          yield* store.setStatus(firstB.header.runId, "failed", { at: 2100, reason: "continuation_abandoned_before_provider_call" })
          const wrongName = claimPair("claim-b2", "run-b2", { ...b2, supersedes: "claim-1" })
          const mismatch = failure(yield* Effect.either(store.claim(wrongName.claim, wrongName.header)))
          assert.strictEqual(mismatch._tag === "ClaimRefused" ? mismatch.reason : "", "superseded_claim_missing")
          const plain = claimPair("claim-b2", "run-b2", b2)
          const noSupersede = failure(yield* Effect.either(store.claim(plain.claim, plain.header)))
          assert.strictEqual(noSupersede._tag, "ContinuationAlreadyExists")

          const secondB = claimPair("claim-b2", "run-b2", { ...b2, supersedes: "claim-b1" })
          yield* store.claim(secondB.claim, secondB.header)
          const atB = yield* store.claimsAt({ sourceRunId: SOURCE, sourceSeq: 20, sourceDigest: DIGEST_B })
          assert.deepStrictEqual(atB.map((c) => [c.claimId, c.supersedes ?? null]), [["claim-b1", null], ["claim-b2", "claim-b1"]])

          // Once: even abandoned, the superseding claim is never superseded.
          yield* store.setStatus(secondB.header.runId, "failed", { at: 2200, reason: "continuation_abandoned_before_provider_call" })
          const third = claimPair("claim-b3", "run-b3", { ...b2, supersedes: "claim-b2" })
          const once = failure(yield* Effect.either(store.claim(third.claim, third.header)))
          assert.strictEqual(once._tag, "ContinuationAlreadyExists")
          assert.strictEqual(once._tag === "ContinuationAlreadyExists" ? once.existingClaimId : "", "claim-b2")
          const again = claimPair("claim-b4", "run-b4", { ...b2, supersedes: "claim-b1" })
          assert.strictEqual(failure(yield* Effect.either(store.claim(again.claim, again.header)))._tag, "ContinuationAlreadyExists")
          assert.strictEqual((yield* store.claimsAt({ sourceRunId: SOURCE, sourceSeq: 20, sourceDigest: DIGEST_B })).length, 2)
          assert.isTrue(Option.isNone(yield* store.get(RunId.make("run-b3"))))
          assert.strictEqual((yield* store.claimsAt(boundary)).length, 1)
        })))

    if (target.persistent) {
      it.scopedLive("a reopened store holds every header, status and claim", () =>
        Effect.gen(function*() {
          const ws = yield* tempWorkspace
          const first = claimPair("claim-1", "run-c1")
          yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* build(target.layer(ws))
            yield* store.create(header("run-a"))
            yield* store.setStatus(RunId.make("run-a"), "running", { at: 1100 })
            yield* store.claim(first.claim, first.header)
            yield* store.setStatus(first.header.runId, "failed", { at: 2100, reason: "continuation_abandoned_before_provider_call" })
          }))
          const reopened = yield* build(target.layer(ws))
          const all = yield* reopened.list()
          assert.deepStrictEqual(all.map((h) => [h.runId, h.status, h.statusReason ?? null]), [
            ["run-a", "running", null],
            ["run-c1", "failed", "continuation_abandoned_before_provider_call"]
          ])
          assert.isTrue(Equal.equals(all[1]!.continuationSource, first.header.continuationSource))
          const claims = yield* reopened.claims(SOURCE)
          assert.strictEqual(claims.length, 1)
          assert.isTrue(Equal.equals(claims[0], first.claim))
          const second = claimPair("claim-2", "run-c2", { supersedes: "claim-1" })
          yield* reopened.claim(second.claim, second.header)
        }).pipe(Effect.provide(NodeContext.layer)))
    }
  })
}

describe("JsonlRunHeaderStore", () => {
  const open = (workspace: string, readOnly = false) =>
    JsonlRunHeaderStore.make({ workspace, ...(readOnly ? { readOnly } : {}) })
  const fileOf = (ws: string) => join(ws, JsonlRunHeaderStore.FILE_NAME)

  it.scopedLive("appends one canonical record per change (last per run wins), 0600; the claim rides on the continuation's record", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const store = yield* open(ws)
      yield* store.create(header("run-a"))
      yield* store.setStatus(RunId.make("run-a"), "running", { at: 1100 })
      yield* store.setStatus(RunId.make("run-a"), "completed", { at: 1200 })
      const pair = claimPair("claim-1", "run-c1")
      yield* store.claim(pair.claim, pair.header)
      const text = yield* fs.readFileString(fileOf(ws))
      const lines = text.split("\n")
      assert.strictEqual(lines.pop(), "")
      assert.strictEqual(lines.length, 4)
      const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
      assert.deepStrictEqual(records.map((r) => r.status), ["created", "running", "completed", "created"])
      assert.isUndefined(records[0]!.claim)
      assert.deepStrictEqual((records[3]!.claim as Record<string, unknown>).claimId, "claim-1")
      assert.strictEqual(lines[0], JSON.stringify(Object.fromEntries(Object.entries(records[0]!).sort(([a], [b]) => a < b ? -1 : 1))))
      const got = yield* store.get(RunId.make("run-a"))
      assert.strictEqual(Option.getOrThrow(got).status, "completed")
      assert.strictEqual((yield* store.list()).length, 2)
      const info = yield* fs.stat(fileOf(ws))
      assert.strictEqual(info.mode & 0o777, 0o600)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a torn last line is a typed error naming the file and line, for an open, a live store and a reader", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const store = yield* open(ws)
      yield* store.create(header("run-a"))
      yield* store.create(header("run-b"))
      const before = yield* fs.readFileString(fileOf(ws))
      yield* fs.writeFileString(fileOf(ws), before + before.split("\n")[0]!.slice(0, 40), { flag: "w" })
      for (const attempt of [store.list(), Effect.flatMap(open(ws), (s) => s.list()), Effect.flatMap(open(ws, true), (s) => s.list())]) {
        const error = failure(yield* Effect.either(attempt))
        assert.strictEqual(error._tag, "RunHeaderCorruption")
        if (error._tag === "RunHeaderCorruption") {
          assert.strictEqual(error.reason, "torn_line")
          assert.strictEqual(error.line, 3)
          assert.strictEqual(error.file, fileOf(ws))
          assert.include(error.message, "line 3")
        }
      }
      // Writes are refused too, and the torn bytes stay where they are.
      assert.strictEqual(failure(yield* Effect.either(store.create(header("run-c"))))._tag, "RunHeaderCorruption")
      assert.strictEqual(yield* fs.readFileString(fileOf(ws)), before + before.split("\n")[0]!.slice(0, 40))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a malformed, non-canonical or rule-breaking complete line is a typed error naming the line", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const store = yield* open(ws)
      yield* store.create(header("run-a"))
      yield* store.setStatus(RunId.make("run-a"), "completed", { at: 1100 })
      const good = yield* fs.readFileString(fileOf(ws))
      const [created, completed] = good.split("\n") as [string, string]
      const cases: ReadonlyArray<readonly [string, string, number]> = [
        [`${created}\n{not json\n`, "invalid_json", 2],
        [`${created}\n${JSON.stringify({ ...JSON.parse(created), status: "running" }, null, 1).replace(/\n/g, "")}\n`, "non_canonical", 2],
        [`${created}\n${created.replace('"created","turnId"', '"nonsense","turnId"')}\n`, "schema_invalid", 2],
        [`${created}\n${completed.replace('"ws-uuid-1"', '"ws-uuid-2"')}\n`, "immutable_field_changed", 2],
        [`${good}${completed.replace('"completed"', '"failed"').replace("1100", "1200")}\n`, "terminal_changed", 3]
      ]
      for (const [text, reason, line] of cases) {
        yield* fs.writeFileString(fileOf(ws), text)
        const error = failure(yield* Effect.either(Effect.flatMap(open(ws, true), (s) => s.list())))
        assert.strictEqual(error._tag, "RunHeaderCorruption", text)
        if (error._tag === "RunHeaderCorruption") {
          assert.strictEqual(error.reason, reason, text)
          assert.strictEqual(error.line, line, text)
          assert.include(error.message, `line ${line}`)
        }
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  // Each operation reads the whole file but folds only the lines after those the instance folded before, which it
  // compares byte for byte: a change to a line folded before is still found, and another instance's appends are seen.
  it.scopedLive("a live store folds only new lines, yet finds a change to a line it folded before and sees others' appends", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const [one, two] = yield* Effect.all([open(ws), open(ws)])
      yield* one.create(header("run-a"))
      yield* one.create(header("run-b"))
      assert.deepStrictEqual((yield* one.list()).map((h) => h.runId), ["run-a", "run-b"])
      const good = yield* fs.readFileString(fileOf(ws))
      const [first] = good.split("\n") as [string]
      // The same length, still JSON, but not a header any more: the line folded before is checked again.
      const tampered = first.replace('"created"', '"creaTed"')
      assert.strictEqual(tampered.length, first.length)
      assert.notStrictEqual(tampered, first)
      yield* fs.writeFileString(fileOf(ws), good.replace(first, tampered))
      const error = failure(yield* Effect.either(one.list()))
      assert.strictEqual(error._tag, "RunHeaderCorruption")
      if (error._tag === "RunHeaderCorruption") assert.strictEqual(error.line, 1)
      yield* fs.writeFileString(fileOf(ws), good)
      assert.deepStrictEqual((yield* one.list()).map((h) => h.runId), ["run-a", "run-b"])
      // Another instance's records, folded onto the kept state; a status change of a run folded before.
      yield* two.create(header("run-c"))
      yield* two.setStatus(RunId.make("run-a"), "running", { at: 1100 })
      assert.deepStrictEqual((yield* one.list()).map((h) => [h.runId, h.status]), [
        ["run-a", "running"],
        ["run-b", "created"],
        ["run-c", "created"]
      ])
      yield* one.setStatus(RunId.make("run-a"), "completed", { at: 1200 })
      // A rule-breaking record appended after the kept state is reported with its line number in the file.
      const now = yield* fs.readFileString(fileOf(ws))
      const last = now.split("\n")[4]!
      yield* fs.writeFileString(fileOf(ws), `${now}${last.replace('"completed"', '"failed"').replace("1200", "1300")}\n`)
      const broken = failure(yield* Effect.either(one.get(RunId.make("run-a"))))
      assert.strictEqual(broken._tag, "RunHeaderCorruption")
      if (broken._tag === "RunHeaderCorruption") {
        assert.strictEqual(broken.reason, "terminal_changed")
        assert.strictEqual(broken.line, 6)
      }
      // A file that shrank (moved aside and rewritten by a person) is folded whole again.
      yield* fs.writeFileString(fileOf(ws), `${good.split("\n")[0]!}\n`)
      assert.deepStrictEqual((yield* one.list()).map((h) => h.runId), ["run-a"])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a claim is checked against every earlier record, including another instance's", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const [one, two] = yield* Effect.all([open(ws), open(ws)])
      const a = claimPair("claim-a", "run-a")
      yield* one.claim(a.claim, a.header)
      const b = claimPair("claim-b", "run-b")
      const error = failure(yield* Effect.either(two.claim(b.claim, b.header)))
      assert.strictEqual(error._tag, "ContinuationAlreadyExists")
      assert.strictEqual(error._tag === "ContinuationAlreadyExists" ? error.existingClaimId : "", "claim-a")
      yield* two.setStatus(a.header.runId, "failed", { at: 2100, reason: "continuation_abandoned_before_provider_call" })
      const c = claimPair("claim-c", "run-c", { supersedes: "claim-a" })
      yield* one.claim(c.claim, c.header)
      assert.deepStrictEqual((yield* two.claims(SOURCE)).map((x) => x.claimId), ["claim-a", "claim-c"])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a read-only store creates nothing, sees no headers without a file, and refuses writes", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const reader = yield* open(ws, true)
      assert.deepStrictEqual(yield* reader.list(), [])
      const refused = failure(yield* Effect.either(reader.create(header("run-a"))))
      assert.strictEqual(refused._tag, "StoreWriteFailed")
      assert.isFalse(yield* fs.exists(fileOf(ws)))
      const writer = yield* open(ws)
      yield* writer.create(header("run-a"))
      assert.deepStrictEqual((yield* reader.list()).map((h) => h.runId), ["run-a"])
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("SqliteRunHeaderStore", () => {
  const open = (workspace: string, readOnly = false) =>
    SqliteRunHeaderStore.make({ workspace, ...(readOnly ? { readOnly } : {}) })
  const dbPath = (ws: string) => join(ws, SqliteRuntimeEventStore.FILE_NAME)
  const raw = (ws: string) => Effect.acquireRelease(Effect.sync(() => new Database(dbPath(ws))), (db) => Effect.sync(() => db.close()))

  it.scopedLive("two stores over one file claiming one boundary at once: exactly one commits, the other gets continuation_already_exists", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      for (let round = 0; round < 10; round++) {
        const [one, two] = yield* Effect.all([open(ws), open(ws)])
        const boundary = { seq: round, digest: DIGEST_A }
        const a = claimPair(`claim-a-${round}`, `run-a-${round}`, boundary)
        const b = claimPair(`claim-b-${round}`, `run-b-${round}`, boundary)
        const results = yield* Effect.all([Effect.either(one.claim(a.claim, a.header)), Effect.either(two.claim(b.claim, b.header))], {
          concurrency: "unbounded"
        })
        assert.strictEqual(results.filter(Either.isRight).length, 1)
        const loser = failure(results.find(Either.isLeft)!)
        assert.strictEqual(loser._tag, "ContinuationAlreadyExists")
        const claims = yield* one.claimsAt({ sourceRunId: SOURCE, sourceSeq: round, sourceDigest: DIGEST_A })
        assert.strictEqual(claims.length, 1)
        const headers = yield* two.list()
        assert.strictEqual(headers.filter((h) => h.continuationSource?.highWater.seq === round).length, 1)
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("the database itself refuses a second live claim, a change to a terminal header, and any delete", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* open(ws)
      const pair = claimPair("claim-1", "run-c1")
      yield* store.claim(pair.claim, pair.header)
      yield* store.create(header("run-a"))
      yield* store.setStatus(RunId.make("run-a"), "completed", { at: 1100 })
      const db = yield* raw(ws)
      const attempt = (sql: string) => {
        try {
          db.prepare(sql).run()
          return "committed"
        } catch (e) {
          return (e as Error).message
        }
      }
      assert.include(
        attempt(`INSERT INTO continuation_claims (claim_id, source_run_id, source_seq, source_digest, generation,
          continuation_run_id, created_at) VALUES ('claim-x', 'run-source', 7, '${DIGEST_A}', 0, 'run-a', 1)`),
        "UNIQUE constraint failed"
      )
      assert.include(attempt("UPDATE run_headers SET status = 'failed' WHERE run_id = 'run-a'"), "only the status fields")
      assert.include(attempt("UPDATE run_headers SET workspace_id = 'x' WHERE run_id = 'run-c1'"), "only the status fields")
      assert.include(attempt("DELETE FROM run_headers WHERE run_id = 'run-c1'"), "never deleted")
      assert.include(attempt("DELETE FROM continuation_claims"), "never deleted")
      assert.include(attempt("UPDATE continuation_claims SET created_at = 5"), "never changed")
      // The store still reads its rows as they were.
      const again = yield* store.claimsAt({ sourceRunId: SOURCE, sourceSeq: 7, sourceDigest: DIGEST_A })
      assert.isTrue(Equal.equals(again[0], pair.claim))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a read-only open creates nothing, and sees no headers in a ledger without the tables", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const missing = failure(yield* Effect.either(open(ws, true)))
      assert.strictEqual(missing._tag, "WorkspaceNotFound")
      yield* Effect.scoped(SqliteRuntimeEventStore.make({ workspace: ws }))
      const reader = yield* open(ws, true)
      assert.deepStrictEqual(yield* reader.list(), [])
      assert.deepStrictEqual(yield* reader.claims(SOURCE), [])
      const db = yield* raw(ws)
      const tables = db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'run_headers'").get() as { n: number }
      assert.strictEqual(tables.n, 0, "a read-only open created the tables")
      assert.strictEqual(failure(yield* Effect.either(reader.create(header("run-a"))))._tag, "StoreWriteFailed")
      const writer = yield* open(ws)
      yield* writer.create(header("run-a"))
      assert.deepStrictEqual((yield* reader.list()).map((h) => h.runId), ["run-a"])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.live("two processes claiming one boundary without any lock: exactly one commits", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-headers-race-" })
      yield* Effect.scoped(open(ws))
      const go = join(ws, "go")
      const projectRoot = fileURLToPath(new URL("..", import.meta.url))
      const storeModule = fileURLToPath(new URL("../src/Layers/SqliteRunHeaderStore.ts", import.meta.url))
      const headerModule = fileURLToPath(new URL("../src/Domain/RunHeader.ts", import.meta.url))
      const eventModule = fileURLToPath(new URL("../src/Domain/RuntimeEvent.ts", import.meta.url))
      const script = (who: string) => `
        import * as Effect from "effect/Effect"
        import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
        import { existsSync } from "node:fs"
        import * as Store from ${JSON.stringify(storeModule)}
        import { ContinuationClaim, RunHeader } from ${JSON.stringify(headerModule)}
        import { ContinuationSource, SourceHighWater } from ${JSON.stringify(eventModule)}
        const source = new ContinuationSource({ sessionId: "session-1", invocationId: "inv-src", runId: "run-source",
          turnId: "turn-src", highWater: new SourceHighWater({ seq: 7, digest: ${JSON.stringify(DIGEST_A)} }) })
        const claim = new ContinuationClaim({ claimId: "claim-${who}", sourceRunId: "run-source", sourceSeq: 7,
          sourceDigest: ${JSON.stringify(DIGEST_A)}, continuationRunId: "run-${who}", createdAt: 1 })
        const header = new RunHeader({ runId: "run-${who}", sessionId: "session-1", invocationId: "inv-${who}",
          turnId: "turn-${who}", status: "created", parentRunId: "run-source", continuationSource: source,
          claimId: "claim-${who}", workspaceId: "ws", createdAt: 1, updatedAt: 1 })
        const program = Effect.gen(function*() {
          const store = yield* Store.make({ workspace: ${JSON.stringify(ws)} })
          process.stdout.write("ready\\n")
          while (!existsSync(${JSON.stringify(go)})) yield* Effect.sleep(1)
          const result = yield* Effect.either(store.claim(claim, header))
          process.stdout.write((result._tag === "Right" ? "claimed" : result.left._tag) + "\\n")
        }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer))
        Effect.runPromise(program).catch((e) => { console.error(e); process.exit(2) })
      `
      const start = (who: string) =>
        Effect.gen(function*() {
          const child = yield* Command.make("node", "--import", "tsx", "--input-type=module", "-e", script(who)).pipe(
            Command.workingDirectory(projectRoot),
            Command.start
          )
          const stderr = yield* Effect.fork(Stream.decodeText(child.stderr).pipe(Stream.runCollect, Effect.map(Chunk.join(""))))
          const pull = yield* Stream.decodeText(child.stdout).pipe(Stream.splitLines, Stream.toPull)
          const buffered: Array<string> = []
          const nextLine = Effect.gen(function*() {
            while (buffered.length === 0) {
              const chunk = yield* Effect.either(pull)
              if (Either.isLeft(chunk)) return `(no line; stderr: ${yield* stderr.await.pipe(Effect.flatten, Effect.orElseSucceed(() => ""))})`
              buffered.push(...chunk.right)
            }
            return buffered.shift()!
          })
          return { child, nextLine }
        })
      const children = [yield* start("one"), yield* start("two")]
      // Both are open and waiting before either may claim.
      const outputs: Array<Array<string>> = []
      for (const c of children) outputs.push([yield* Effect.timeoutFail(c.nextLine, { duration: "45 seconds", onTimeout: () => "no ready line" })])
      yield* fs.writeFileString(go, "")
      for (let i = 0; i < children.length; i++) {
        outputs[i]!.push(yield* children[i]!.nextLine)
        yield* children[i]!.child.exitCode.pipe(Effect.ignore)
      }
      const verdicts = outputs.map((lines) => lines.filter((l) => l !== "ready" && l !== ""))
      assert.deepStrictEqual(outputs.map((lines) => lines[0]), ["ready", "ready"], JSON.stringify(outputs))
      assert.deepStrictEqual(verdicts.flat().sort(), ["ContinuationAlreadyExists", "claimed"], JSON.stringify(outputs))
      const store = yield* open(ws, true)
      assert.strictEqual((yield* store.claimsAt({ sourceRunId: SOURCE, sourceSeq: 7, sourceDigest: DIGEST_A })).length, 1)
      assert.strictEqual((yield* store.list()).length, 1)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 60_000)
})
