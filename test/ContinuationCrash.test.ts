// The continuation crash and race proofs of docs/spec/04-continuation.md with real child processes: a SIGKILL at each of the five points
// on SQLite and JSONL, then repair, live claims, provider calls and source rows checked; and the 50-round race.
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { join } from "node:path"
import { HARNESS_STORES } from "../harness/Child.js"
import { PROVIDER_CALLS_FILE, SOURCE_RUN_ID } from "../harness/ContinuationChild.js"
import {
  buildSource,
  checkInvariants,
  CONTINUATION_EXPECTED,
  type CrashDetail,
  planDecision,
  type RaceDetail,
  ContinuationRow,
  runContinuationCrashRow,
  runContinuationRace,
  runContinuationRows,
  snapshotSource,
  sourceDifference
} from "../harness/ContinuationHarness.js"
import { CONTINUATION_POINTS, type ContinuationPoint } from "../src/Services/ContinuationFailpoints.js"

// The claims each point leaves on the source boundary, in order (`supersedes` or `-`), once everything ran.
const CLAIMS: Record<ContinuationPoint, ReadonlyArray<"first" | "supersedes-first">> = {
  run_created: ["first"],
  claim_committed: ["first", "supersedes-first"],
  start_committed: ["first"],
  terminal_event_committed: ["first"],
  terminal_header_committed: ["first"]
}

// Provider calls recorded once everything ran: by the killed child, plus one by the second execution when there was one.
const CALLS: Record<ContinuationPoint, number> = {
  run_created: 1,
  claim_committed: 1,
  start_committed: 0,
  terminal_event_committed: 1,
  terminal_header_committed: 1
}

describe("continuation crash proofs: SIGKILL at each point of docs/spec/04-continuation.md", () => {
  for (const store of HARNESS_STORES) {
    for (const point of CONTINUATION_POINTS) {
      it.live(`${store}: killed at ${point}, repair converges, one live claim, no call without a start, source unchanged`, () =>
        Effect.gen(function*() {
          const detail: CrashDetail = { providerCalls: [], headers: [], claims: [], second: null }
          const row = yield* runContinuationCrashRow(store, point, detail)
          assert.isTrue(row.pass, row.error?.message)
          assert.strictEqual(row.failpoint, `C/${point}`)
          assert.strictEqual(row.markerWritten, false)
          assert.strictEqual(row.deterministic, true)
          assert.strictEqual(row.ledgerUnchanged, true)
          assert.strictEqual(row.decision, CONTINUATION_EXPECTED[point].decision)
          assert.strictEqual(detail.providerCalls.length, CALLS[point])
          // The headers of the killed child's continuation after repair (none when it died before its one write).
          const header = CONTINUATION_EXPECTED[point].header
          assert.deepStrictEqual(detail.headers.map((h) => h.split(" ").slice(1).join(" ")), header === undefined ? [] : [header.join(" ")])
          const claims = detail.claims.map((c) => c.split(" "))
          assert.strictEqual(claims.length, CLAIMS[point].length)
          assert.strictEqual(claims[0]![1], "-")
          if (CLAIMS[point].length === 2) assert.strictEqual(claims[1]![1], claims[0]![0])
          // A second execution ran only after a kill before the start committed, and it continued.
          const second = detail.second
          if (CONTINUATION_EXPECTED[point].decision === "continue") {
            assert.strictEqual(second?._tag, "Continued")
            assert.strictEqual(detail.providerCalls[0]!.runId, second?._tag === "Continued" ? second.runId : "?")
          } else assert.isNull(second)
        }).pipe(Effect.provide(NodeContext.layer)))
    }
  }
})

describe("continuation rows for `runtime-resume harness`", () => {
  it.live("runContinuationRows narrowed to one store and point gives that row, in the row schema", () =>
    Effect.gen(function*() {
      const rows = yield* runContinuationRows({ stores: ["jsonl"], points: ["start_committed"], race: false })
      assert.deepStrictEqual(rows.map((r) => [r.failpoint, r.store, r.committedPrefix, r.decision, r.expected, r.pass]), [
        ["C/start_committed", "jsonl", "start", "continuation_already_exists", "continuation_already_exists", true]
      ])
      assert.deepStrictEqual(Schema.decodeUnknownSync(Schema.Array(ContinuationRow))(JSON.parse(JSON.stringify(rows))), rows)
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("continuation crash proofs: the checks can fail", () => {
  it.scopedLive("a provider call for a run without a committed ContinuationStarted is reported", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-cont-check-" })
      yield* buildSource("sqlite", workspace)
      assert.deepStrictEqual((yield* checkInvariants("sqlite", workspace)).problems, [])
      assert.strictEqual(yield* planDecision("sqlite", workspace), "continue")
      yield* fs.writeFileString(join(workspace, PROVIDER_CALLS_FILE), `{"runId":"${SOURCE_RUN_ID}","claimId":"k","pid":1}\n`)
      const { problems } = yield* checkInvariants("sqlite", workspace)
      assert.strictEqual(problems.length, 1)
      assert.include(problems[0]!, "whose first committed event is RunOpened")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a changed source row or a rewritten JSONL prefix is a difference", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-cont-check-" })
      yield* buildSource("jsonl", workspace)
      const before = yield* snapshotSource("jsonl", workspace)
      assert.isUndefined(sourceDifference(before, yield* snapshotSource("jsonl", workspace)))
      assert.include(sourceDifference(before, { ...before, rows: before.rows.slice(1) }) ?? "", "rows changed")
      const [name, bytes] = Object.entries(before.files)[0]!
      const grown = { ...before, files: { ...before.files, [name]: `${bytes}more\n` } }
      assert.isUndefined(sourceDifference(before, grown))
      const rewritten = { ...before, files: { ...before.files, [name]: `x${bytes.slice(1)}` } }
      assert.include(sourceDifference(before, rewritten) ?? "", `of ${name}`)
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("continuation race: two processes resume the same boundary", () => {
  for (const store of HARNESS_STORES) {
    it.live(`${store}: 50 rounds, each exactly one provider call; the loser is WorkspaceLocked or continuation_already_exists`, () =>
      Effect.gen(function*() {
        const detail: RaceDetail = { rounds: 0, oneCall: 0, losers: {}, elapsedMs: 0 }
        const row = yield* runContinuationRace(store, { rounds: 50 }, detail)
        yield* Effect.logInfo(`race on ${store}: ${detail.rounds} rounds in ${detail.elapsedMs} ms, losers ${JSON.stringify(detail.losers)}`)
        assert.isTrue(row.pass, row.error?.message)
        assert.strictEqual(detail.rounds, 50)
        assert.strictEqual(detail.oneCall, 50)
        assert.strictEqual(Object.values(detail.losers).reduce((a, b) => a + b, 0), 50)
      }).pipe(Effect.provide(NodeContext.layer)), 300_000)
  }

  for (const store of HARNESS_STORES) {
    it.live(`${store}: a winner holding the lock past the loser's wait makes the loser WorkspaceLocked, with no call`, () =>
      Effect.gen(function*() {
        const detail: RaceDetail = { rounds: 0, oneCall: 0, losers: {}, elapsedMs: 0 }
        // The provider answers after 1 s; the loser waits at most 200 ms for the owner lock.
        const row = yield* runContinuationRace(store, { rounds: 3, delayMs: 1_000, lockWaitMs: 200 }, detail)
        assert.isTrue(row.pass, row.error?.message)
        assert.strictEqual(detail.oneCall, 3)
        assert.isAtLeast(detail.losers["WorkspaceLocked"] ?? 0, 1, JSON.stringify(detail.losers))
      }).pipe(Effect.provide(NodeContext.layer)))
  }
})
