// `planResume` over a store's own verified read (Domain/Rules/VerifiedRead.ts): the planner shares the reader's
// verifier (one call index, built once), plans exactly as over the same rows verified afresh, and a stored row whose
// bytes are not the canonical encoding of its event still fails the read with a typed error naming the run and seq.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Either, Equal, Layer, Stream } from "effect"
import { join } from "node:path"
import * as Digest from "../src/Domain/Digest.js"
import { LedgerCorruption } from "../src/Domain/Errors.js"
import { RunId } from "../src/Domain/Ids.js"
import { CommittedRow } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import type * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import * as RecoveryResolver from "../src/Domain/Rules/RecoveryResolver.js"
import * as ResumePlanner from "../src/Domain/Rules/ResumePlanner.js"
import * as RunVerifier from "../src/Domain/Rules/RunVerifier.js"
import * as VerifiedRead from "../src/Domain/Rules/VerifiedRead.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import { inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { RuntimeEventStore, type RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import * as ScanRuns from "../src/Services/ScanRuns.js"

const rid = (s: string) => RunId.make(s)

const tempWorkspace = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-reopen-plan-" }))

const rawConnection = (workspace: string) =>
  Effect.acquireRelease(
    Effect.sync(() => new Database(join(workspace, SqliteRuntimeEventStore.FILE_NAME))),
    (db) => Effect.sync(() => db.close())
  )

// Every kind of row the planner treats apart: replayed text, answered and dangling calls, a hidden call and its
// hidden response, a visible call whose response is hidden (it leaves the replay), a diagnostic.
const runEvents = (name: string) => {
  const b = EventBuilder.make(name)
  return [
    b.opened(),
    b.user("hello"),
    b.call("c1", "Read", { path: "/a" }),
    b.response("c1", "Read", { text: "caf\u00e9" }),
    b.call("c2", "Bash", { cmd: "ls" }, { hidden: true }),
    b.response("c2", "Bash", { out: "" }, { hidden: true }),
    b.call("c3", "Grep", { pattern: "x" }),
    b.response("c3", "Grep", { n: 0 }, { hidden: true }),
    b.diagnostic("note"),
    b.model("thinking"),
    b.call("c4", "Write", { path: "/b", text: "x" }),
    b.user("bye")
  ]
}

// The same rows as fresh objects (no reader's mark): the planner verifies every one of them itself.
const fresh = (rows: ReadonlyArray<CommittedRow>) =>
  rows.map((r) => new CommittedRow({ digest: r.digest, end: r.end, event: r.event, seq: r.seq }))

describe("planResume over a store's verified read", () => {
  it.scopedLive("shares the reader's verifier and plans as over the same rows verified afresh", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* SqliteRuntimeEventStore.make({ workspace: ws })
      const events = runEvents("run-share")
      yield* store.append(rid("run-share"), events.slice(0, 5))
      yield* store.append(rid("run-share"), events.slice(5))
      const rows = yield* store.readRun(rid("run-share"))
      const expected = yield* planResume(fresh(rows))
      assert.strictEqual(expected.decision, "blocked")
      assert.deepStrictEqual(expected.replay.map((r) => r.seq), [2, 3, 4, 10, 12])
      for (const pageSize of [1, 2, 5, 1000]) {
        const pages = store.readRunPages(rid("run-share"), pageSize)
        assert.isDefined(VerifiedRead.followOf(pages))
        const plan = yield* planResume(pages)
        assert.isTrue(Equal.equals(plan, expected), `pages of ${pageSize}`)
        // With the run named, and through the planner's own fold over the followed read.
        assert.isTrue(Equal.equals(yield* planResume(pages, { runId: "run-share" }), expected))
        const state = ResumePlanner.initial()
        let shared: RunVerifier.RunVerifier | undefined
        yield* Stream.runForEach(
          VerifiedRead.followOf(pages)!((verifier) => {
            shared = verifier
            assert.isTrue(ResumePlanner.follow(state, verifier))
          }),
          (row) => Effect.sync(() => ResumePlanner.step(state, row))
        )
        assert.isTrue(state.following)
        assert.strictEqual(state.verifier, shared)
        assert.deepStrictEqual([...shared!.calls.keys()], ["c1", "c2", "c3", "c4"])
        assert.isTrue(Equal.equals(Either.getOrThrow(ResumePlanner.finish(state)), expected))
      }
      // A stream made from the store's read is another stream: the planner verifies it as any other.
      const taken = Stream.take(store.readRunPages(rid("run-share"), 2), 7)
      assert.isUndefined(VerifiedRead.followOf(taken))
      const cut = yield* planResume(taken)
      assert.isTrue(Equal.equals(cut, yield* planResume(fresh(rows.slice(0, 7)))))
      // Another run named: the planner does not follow, and refuses the rows as before.
      const other = yield* Effect.either(planResume(store.readRunPages(rid("run-share"), 3), { runId: "run-other" }))
      assert.isTrue(Either.isLeft(other) && other.left._tag === "LedgerCorruption", String(other))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a planner that follows a reader refuses to plan rows it was not given, or given out of order", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* SqliteRuntimeEventStore.make({ workspace: ws })
      yield* store.append(rid("run-follow"), runEvents("run-follow"))
      const rows = yield* store.readRun(rid("run-follow"))
      // A reader's verifier that accepted every row.
      const verifier = RunVerifier.make("run-follow", {}, { marks: false, deferArgsHash: true })
      for (const row of fresh(rows)) assert.isUndefined(RunVerifier.step(verifier, row))
      const whole = ResumePlanner.initial()
      assert.isTrue(ResumePlanner.follow(whole, verifier))
      ResumePlanner.stepAll(whole, rows)
      assert.isTrue(Either.isRight(ResumePlanner.finish(whole)))
      // The last row not given: the reader's tail is past the planner's, so there is no plan.
      const cut = ResumePlanner.initial()
      assert.isTrue(ResumePlanner.follow(cut, verifier))
      ResumePlanner.stepAll(cut, rows.slice(0, -1))
      const cutPlan = ResumePlanner.finish(cut)
      assert.isTrue(Either.isLeft(cutPlan) && cutPlan.left._tag === "LedgerCorruption" && cutPlan.left.reason === "seq_gap")
      // A row skipped.
      const skipped = ResumePlanner.initial()
      assert.isTrue(ResumePlanner.follow(skipped, verifier))
      ResumePlanner.stepAll(skipped, [rows[0]!, rows[2]!])
      assert.strictEqual(skipped.failure?.reason, "seq_gap")
      assert.strictEqual(skipped.failure?.seq, 3)
      // Only a fresh state of the same run follows.
      const started = ResumePlanner.step(ResumePlanner.initial(), fresh(rows)[0]!)
      assert.isFalse(ResumePlanner.follow(started, verifier))
      assert.isFalse(ResumePlanner.follow(ResumePlanner.initial("run-other"), verifier))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a stored row that is not the canonical encoding of its event fails the followed read, though its digest chains", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* SqliteRuntimeEventStore.make({ workspace: ws })
      const db = yield* rawConnection(ws)
      // Each damage keeps the value the bytes parse to: only the canonical re-check can see it.
      const damages: Record<string, (text: string) => string> = {
        "run-space": (text) => text.replace("\"body\":", "\"body\": "),
        "run-order": (text) => {
          const value = JSON.parse(text) as Record<string, unknown>
          const { body, ...rest } = value
          return JSON.stringify({ ...rest, body })
        },
        "run-escape": (text) => text.replace("\"bye\"", "\"\\u0062ye\""),
        "run-number": (text) => text.replace(/"ts":(\d+)/, "\"ts\":$1.0")
      }
      for (const [name, damage] of Object.entries(damages)) {
        yield* store.append(rid(name), runEvents(name))
        // The last row damaged, its digest and the runs table's high-water recomputed over the damaged bytes.
        const last = db.prepare("SELECT seq, bytes FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1").get(name) as {
          seq: number
          bytes: Buffer
        }
        const before = (db.prepare("SELECT digest FROM events WHERE run_id = ? AND seq = ?").get(name, last.seq - 1) as { digest: string }).digest
        const text = damage(last.bytes.toString("utf8"))
        assert.notStrictEqual(text, last.bytes.toString("utf8"), name)
        assert.deepStrictEqual(JSON.parse(text), JSON.parse(last.bytes.toString("utf8")), name)
        const digest = Digest.next(before, last.seq, text)
        db.prepare("UPDATE events SET bytes = ?, digest = ? WHERE run_id = ? AND seq = ?").run(Buffer.from(text, "utf8"), digest, name, last.seq)
        db.prepare("UPDATE runs SET tail_digest = ? WHERE run_id = ?").run(digest, name)
        for (const pageSize of [1, 1000]) {
          const planned = yield* Effect.either(planResume(store.readRunPages(rid(name), pageSize)))
          assert.isTrue(Either.isLeft(planned), `${name}, pages of ${pageSize}`)
          const error = (planned as Either.Left<unknown, unknown>).left
          assert.instanceOf(error, LedgerCorruption)
          const corruption = error as LedgerCorruption
          assert.strictEqual(corruption.reason, "non_canonical", `${name}: ${corruption.message}`)
          assert.strictEqual(corruption.seq, last.seq)
          assert.strictEqual(corruption.runId, name)
          assert.include(corruption.message, `run ${name}`)
        }
        const read = yield* Effect.either(Stream.runCollect(store.readRunPages(rid(name), 1000)))
        assert.isTrue(Either.isLeft(read) && read.left._tag === "LedgerCorruption" && read.left.reason === "non_canonical")
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it("operationStatus reads off a call what toolOperationStatus(decideCall(call)) says, for every kind of call", () => {
    const recoveries: ReadonlyArray<LedgerRules.RecoveryEntry | undefined> = [
      undefined,
      { kind: "reconciler", disposition: "completed", reasonCode: "observed", actor: "r", decidedSeq: 9 },
      { kind: "manual", disposition: "parked", reasonCode: "operator_hold", actor: "me", decidedSeq: 9 }
    ]
    let n = 0
    for (const recovery of recoveries) {
      for (const responseSeq of [undefined, 5]) {
        for (const isError of [undefined, false, true]) {
          for (const dispatchSeq of [undefined, 3]) {
            for (const toolBoundary of [undefined, "none", "t1_after_preflight_v1"] as const) {
              const call: LedgerRules.CallEntry = {
                callId: "c",
                name: "Tool",
                argsHash: "",
                callSeq: 2,
                hidden: false,
                ...(dispatchSeq !== undefined ? { dispatchSeq, operationId: "op" } : {}),
                ...(responseSeq !== undefined ? { responseSeq } : {}),
                ...(isError !== undefined ? { isError } : {}),
                ...(recovery !== undefined ? { recovery } : {})
              }
              const expected = RecoveryResolver.toolOperationStatus(RecoveryResolver.decideCall(call, toolBoundary))
              assert.strictEqual(RecoveryResolver.operationStatus(call, toolBoundary), expected, JSON.stringify({ call, toolBoundary }))
              n++
            }
          }
        }
      }
    }
    assert.strictEqual(n, 108)
  })
})

// The store with its scan wrapped: `followed` counts the followed scans run; `plain` hides the registration (the scan
// is then another stream, which its consumer verifies as any other).
const scanCounted = (store: RuntimeEventStoreShape, plain: boolean) => {
  const counts = { followed: 0 }
  const wrapped: RuntimeEventStoreShape = {
    ...store,
    scanRuns: (pageSize, runId) => {
      const scan = store.scanRuns!(pageSize, runId)
      if (plain) return Stream.map(scan, (item) => item)
      const follow = VerifiedRead.scanFollowOf(scan)!
      return VerifiedRead.registerScan(scan, (onVerifier) => {
        counts.followed++
        return follow(onVerifier)
      })
    }
  }
  return { counts, layer: Layer.succeed(RuntimeEventStore, wrapped) }
}

describe("inspect over a store's verified scan", () => {
  it.scopedLive("plans each run following its reader's verifier, as over the same rows verified afresh; a damaged run fails with its run and seq", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* SqliteRuntimeEventStore.make({ workspace: ws })
      const db = yield* rawConnection(ws)
      const names = ["run-a", "run-b", "run-bad", "run-c"]
      for (const name of names) {
        const events = runEvents(name)
        yield* store.append(rid(name), events.slice(0, 4))
        yield* store.append(rid(name), events.slice(4))
      }
      // run-bad's seq 7 no longer the canonical encoding of its event (its digest and the chain after it recomputed).
      const rows = db.prepare("SELECT seq, bytes FROM events WHERE run_id = 'run-bad' ORDER BY seq").all() as Array<{ seq: number; bytes: Buffer }>
      let digest = (db.prepare("SELECT digest FROM events WHERE run_id = 'run-bad' AND seq = 6").get() as { digest: string }).digest
      for (const row of rows.slice(6)) {
        const text = row.seq === 7 ? row.bytes.toString("utf8").replace("\"body\":", "\"body\": ") : row.bytes.toString("utf8")
        digest = Digest.next(digest, row.seq, text)
        db.prepare("UPDATE events SET bytes = ?, digest = ? WHERE run_id = 'run-bad' AND seq = ?").run(Buffer.from(text, "utf8"), digest, row.seq)
      }
      db.prepare("UPDATE runs SET tail_digest = ? WHERE run_id = 'run-bad'").run(digest)
      for (const pageSize of [1, 3, 1000]) {
        const scan = ScanRuns.scanRuns(store, pageSize)
        assert.isDefined(VerifiedRead.scanFollowOf(scan))
        // Each run's verifier comes before its first row, and a planner that follows it plans what fresh rows give.
        const states = new Map<string, ResumePlanner.ResumePlannerState>()
        const failed = new Map<string, LedgerCorruption>()
        yield* Stream.runForEach(
          VerifiedRead.scanFollowOf(scan)!((verifier) => {
            assert.isFalse(states.has(verifier.runId))
            const state = ResumePlanner.initial(verifier.runId)
            assert.isTrue(ResumePlanner.follow(state, verifier))
            states.set(verifier.runId, state)
          }),
          (item) =>
            Effect.sync(() => {
              if (item._tag === "Failed") failed.set(item.runId, item.error)
              else ResumePlanner.step(states.get(item.row.event.runId)!, item.row)
            })
        )
        assert.deepStrictEqual([...states.keys()], names)
        assert.deepStrictEqual([...failed.keys()], ["run-bad"])
        assert.strictEqual(failed.get("run-bad")!.reason, "non_canonical")
        assert.strictEqual(failed.get("run-bad")!.seq, 7)
        for (const name of ["run-a", "run-b", "run-c"]) {
          const state = states.get(name)!
          assert.isTrue(state.following, name)
          assert.deepStrictEqual([...state.verifier!.calls.keys()], ["c1", "c2", "c3", "c4"])
          const expected = yield* planResume(fresh(yield* store.readRun(rid(name))))
          assert.isTrue(Equal.equals(Either.getOrThrow(ResumePlanner.finish(state)), expected), `${name}, pages of ${pageSize}`)
        }
        // inspect follows the scan, and shows what it shows over a scan it cannot follow.
        const followed = scanCounted(store, false)
        const inspected = yield* inspectWorkspace({ pageSize }).pipe(Effect.provide(followed.layer))
        assert.strictEqual(followed.counts.followed, 1)
        const plain = scanCounted(store, true)
        const unfollowed = yield* inspectWorkspace({ pageSize }).pipe(Effect.provide(plain.layer))
        assert.strictEqual(plain.counts.followed, 0)
        assert.deepStrictEqual(inspected, unfollowed)
        assert.deepStrictEqual(inspected.runs.map((r) => [r.runId, r.decision, r.error?._tag === "LedgerCorruption" ? r.error.reason : undefined, r.error?._tag === "LedgerCorruption" ? r.error.seq : undefined]), [
          ["run-a", "blocked", undefined, undefined],
          ["run-b", "blocked", undefined, undefined],
          ["run-bad", unfollowed.runs[2]!.decision, "non_canonical", 7],
          ["run-c", "blocked", undefined, undefined]
        ])
        assert.include(inspected.runs[2]!.error!.message, "run run-bad (seq 7")
      }
    }).pipe(Effect.provide(NodeContext.layer)))
})
