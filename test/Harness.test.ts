// Tests of the Phase 0 crash harness: all 24 (failpoint, store) rows pass under a real SIGKILL on real files,
// and each of its checks (marker, literal table, unchanged ledger) can fail. Rows spawn child processes: `it.live`.
import { NodeContext } from "@effect/platform-node"
import { FileSystem, Path } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Effect, Schema } from "effect"
import { EXPECTED_PLANS, HARNESS_RUN_ID } from "../harness/Expected.js"
import type { ExpectedPlan } from "../harness/Expected.js"
import {
  HarnessRow,
  planMismatches,
  runHarness,
  runRow,
  snapshotDifference,
  snapshotLedger
} from "../harness/Harness.js"
import type { LedgerSnapshot } from "../harness/Harness.js"
import { RUNTIME_RESUME_FAILPOINTS } from "../src/Domain/Failpoints.js"
import type { Failpoint, FailpointId } from "../src/Domain/Failpoints.js"
import { RunId } from "../src/Domain/Ids.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import { LEDGER_FILES } from "../src/Layers/NodeRuntimeEventStore.js"
import * as HarnessLedger from "../src/Testing/HarnessLedger.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

// The seed contract's table, written out again here so the test does not trust the harness's own copy.
const CONTRACT: ReadonlyArray<readonly [FailpointId, string]> = [
  ["P0", "before_function_call"],
  ["P1", "after_function_call"],
  ["P2", "after_function_call"],
  ["P3", "after_function_call"],
  ["P4", "after_function_call"],
  ["P5", "after_function_response"],
  ["P6", "after_function_response"],
  ["P7", "after_function_response"],
  ["P8", "after_function_response"],
  ["P9", "after_terminal_event"],
  ["P10", "after_terminal_event"],
  ["P11", "after_terminal_event"]
]
const DECISION_OF_PREFIX: Readonly<Record<string, string>> = {
  before_function_call: "safe_replay",
  after_function_call: "blocked",
  after_function_response: "safe_replay",
  after_terminal_event: "safe_replay"
}

const failpoint = (id: FailpointId): Failpoint => RUNTIME_RESUME_FAILPOINTS.find((f) => f.id === id)!

// The plan of a committed prefix, from the memory store: no child, no disk.
const memoryPlan = (prefix: keyof typeof HarnessLedger.PREFIX_LENGTH) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const runId = RunId.make(HARNESS_RUN_ID)
    for (const event of HarnessLedger.prefixEvents(prefix, HARNESS_RUN_ID)) yield* store.append(runId, [event])
    return yield* planResume(yield* store.readRun(runId))
  }).pipe(Effect.provide(MemoryRuntimeEventStore.layer))

describe("crash harness", () => {
  it.live("runs 24 rows, P0–P11 on sqlite then jsonl, and every row passes", () =>
    Effect.gen(function*() {
      const rows = yield* runHarness()
      assert.strictEqual(rows.length, 24)
      assert.deepStrictEqual(
        rows.map((row) => [row.store, row.failpoint, row.committedPrefix]),
        ["sqlite", "jsonl"].flatMap((store) => CONTRACT.map(([id, prefix]) => [store, id, prefix]))
      )
      for (const row of rows) {
        const where = `${row.store} ${row.failpoint}: ${row.error?._tag}: ${row.error?.message}`
        assert.isTrue(row.pass, where)
        assert.isUndefined(row.error, where)
        assert.strictEqual(row.markerWritten, false, where)
        assert.strictEqual(row.deterministic, true, where)
        assert.strictEqual(row.ledgerUnchanged, true, where)
        assert.strictEqual(row.decision, DECISION_OF_PREFIX[row.committedPrefix], where)
        assert.strictEqual(row.expected, DECISION_OF_PREFIX[row.committedPrefix], where)
        // The docs/spec/06-cli.md JSON shape, exactly these keys on a passing row.
        assert.deepStrictEqual(Schema.decodeUnknownSync(HarnessRow)(JSON.parse(JSON.stringify(row))), row)
        assert.deepStrictEqual(Object.keys(row).sort(), [
          "committedPrefix",
          "decision",
          "deterministic",
          "expected",
          "failpoint",
          "ledgerUnchanged",
          "markerWritten",
          "pass",
          "store"
        ])
      }
    }).pipe(Effect.provide(NodeContext.layer)), 300_000)

  it.live("narrows to the given stores and failpoints, still in table order", () =>
    Effect.gen(function*() {
      const rows = yield* runHarness({ stores: ["jsonl"], failpoints: ["P9", "P1"] })
      assert.deepStrictEqual(rows.map((row) => [row.store, row.failpoint, row.pass]), [
        ["jsonl", "P1", true],
        ["jsonl", "P9", true]
      ])
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)

  describe("each check can fail", () => {
    it.live("a child ended by SIGTERM runs its finalizer: the marker is written and the row fails", () =>
      Effect.gen(function*() {
        const row = yield* runRow("jsonl", failpoint("P3"), { signal: "SIGTERM" })
        assert.isFalse(row.pass)
        assert.strictEqual(row.markerWritten, true)
        assert.include(row.error?.message, "cleanup-marker")
        // The ledger itself was still fine: only the crash check failed.
        assert.strictEqual(row.deterministic, true)
        assert.strictEqual(row.ledgerUnchanged, true)
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)

    it.live("a child that cannot open its store fails the row with the child's own error", () =>
      Effect.gen(function*() {
        const row = yield* runRow("sqlite", failpoint("P3"), {
          // A folder where the database file should be: the child's store cannot open.
          beforeSpawn: (workspace) =>
            Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeDirectory(`${workspace}/${LEDGER_FILES.sqlite}`)).pipe(
              Effect.provide(NodeContext.layer)
            )
        })
        assert.isFalse(row.pass)
        assert.strictEqual(row.error?._tag, "HarnessStepFailed")
        assert.include(row.error?.message, "before signalling readiness")
        assert.include(row.error?.message, "StoreReadFailed")
        assert.isNull(row.decision)
        assert.isNull(row.markerWritten)
        assert.isNull(row.ledgerUnchanged)
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)

    it.live("a wrong literal expectation fails the row, though the decision matches", () =>
      Effect.gen(function*() {
        const wrong: ExpectedPlan = {
          ...EXPECTED_PLANS.after_function_response,
          replay: ["harness-run:2", "harness-run:4"]
        }
        const row = yield* runRow("sqlite", failpoint("P5"), { expected: wrong })
        assert.isFalse(row.pass)
        assert.strictEqual(row.decision, "safe_replay")
        assert.strictEqual(row.expected, "safe_replay")
        assert.strictEqual(row.markerWritten, false)
        assert.strictEqual(row.deterministic, true)
        assert.strictEqual(row.ledgerUnchanged, true)
        assert.include(row.error?.message, "replay: expected")
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)

    it.live("JSONL: a byte flipped in the ledger between the snapshots fails the row", () =>
      Effect.gen(function*() {
        const row = yield* runRow("jsonl", failpoint("P9"), {
          beforeFinalSnapshot: (workspace) =>
            Effect.gen(function*() {
              const fs = yield* FileSystem.FileSystem
              const path = yield* Path.Path
              const file = path.join(workspace, LEDGER_FILES.jsonl)
              const bytes = yield* fs.readFile(file)
              // Same length, one byte flipped: only the hash can tell.
              const tampered = Uint8Array.from(bytes)
              tampered[10] = tampered[10]! ^ 1
              yield* fs.writeFile(file, tampered)
            }).pipe(Effect.provide(NodeContext.layer))
        })
        assert.isFalse(row.pass)
        assert.strictEqual(row.ledgerUnchanged, false)
        assert.strictEqual(row.deterministic, true)
        assert.include(row.error?.message, "the JSONL ledger changed")
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)

    it.live("SQLite: an event row removed between the snapshots fails the row", () =>
      Effect.gen(function*() {
        const row = yield* runRow("sqlite", failpoint("P9"), {
          beforeFinalSnapshot: (workspace) =>
            Effect.sync(() => {
              const db = new Sqlite(`${workspace}/${LEDGER_FILES.sqlite}`, { fileMustExist: true })
              try {
                // The last committed event (the terminal) disappears, as a lost commit would.
                db.exec("DELETE FROM events WHERE pos = (SELECT max(pos) FROM events)")
              } finally {
                db.close()
              }
            })
        })
        assert.isFalse(row.pass)
        assert.strictEqual(row.ledgerUnchanged, false)
        assert.strictEqual(row.deterministic, true)
        assert.include(row.error?.message, "the rows of SQLite table events changed (5 before, 4 after")
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)
  })

  describe("planMismatches (the literal table comparison)", () => {
    it.effect("a plan matching its prefix's entry has no mismatches; each wrong field is named", () =>
      Effect.gen(function*() {
        for (const prefix of Object.keys(EXPECTED_PLANS) as Array<keyof typeof EXPECTED_PLANS>) {
          const plan = yield* memoryPlan(prefix)
          assert.deepStrictEqual(planMismatches(plan, EXPECTED_PLANS[prefix]), [], prefix)
        }
        const plan = yield* memoryPlan("after_terminal_event")
        const right = EXPECTED_PLANS.after_terminal_event
        const wrongs: ReadonlyArray<readonly [keyof ExpectedPlan, ExpectedPlan]> = [
          ["decision", { ...right, decision: "blocked" }],
          ["reasons", { ...right, reasons: ["dangling_tool_state"] }],
          ["operations", { ...right, operations: [{ callId: "tool-1", name: "Bash", status: "failed" }] }],
          ["replay", { ...right, replay: ["harness-run:2"] }],
          ["requiresVerification", { ...right, requiresVerification: true }],
          ["terminal", { ...right, terminal: null }],
          ["terminal", { ...right, terminal: { status: "completed", failureClass: "harness_terminal", seq: 5 } }],
          ["highWaterSeq", { ...right, highWaterSeq: 4 }]
        ]
        for (const [field, wrong] of wrongs) {
          const mismatches = planMismatches(plan, wrong)
          assert.strictEqual(mismatches.length, 1, `${field}: ${mismatches.join("; ")}`)
          assert.isTrue(mismatches[0]!.startsWith(`${field}: expected`), mismatches[0])
        }
        // The entry of another prefix does not match.
        assert.isAbove(planMismatches(plan, EXPECTED_PLANS.after_function_call).length, 0)
      }))
  })

  describe("snapshots", () => {
    it.effect("snapshotDifference names what changed", () =>
      Effect.sync(() => {
        const jsonl: LedgerSnapshot = { kind: "jsonl", bytes: 10, sha256: "aa" }
        assert.isUndefined(snapshotDifference(jsonl, { ...jsonl }))
        assert.include(snapshotDifference(jsonl, { ...jsonl, sha256: "ab" }), "the JSONL ledger changed")
        const sqlite: LedgerSnapshot = { kind: "sqlite", userVersion: 1, tables: [{ name: "events", rows: ["a", "b"] }] }
        assert.isUndefined(snapshotDifference(sqlite, { ...sqlite, tables: [{ name: "events", rows: ["a", "b"] }] }))
        assert.include(
          snapshotDifference(sqlite, { ...sqlite, tables: [{ name: "events", rows: ["a"] }] }),
          "first removed: b"
        )
        assert.include(
          snapshotDifference(sqlite, { ...sqlite, tables: [...sqlite.tables, { name: "extra", rows: [] }] }),
          "extra appeared"
        )
        assert.include(snapshotDifference(sqlite, { ...sqlite, userVersion: 2 }), "user_version")
        assert.include(snapshotDifference(sqlite, jsonl), "from sqlite to jsonl")
      }))

    it.scopedLive("a workspace without a ledger cannot be snapshotted, and nothing is created", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-harness-test-" })
        for (const store of ["sqlite", "jsonl"] as const) {
          const error = yield* Effect.flip(snapshotLedger(store, workspace))
          assert.strictEqual(error._tag, "HarnessStepFailed")
        }
        assert.deepStrictEqual(yield* fs.readDirectory(workspace), [])
      }).pipe(Effect.provide(NodeContext.layer)))
  })
})
