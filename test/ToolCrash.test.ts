// Crash proofs of the T1/T2 boundary (docs/spec/03-tool-boundary.md): a real child process SIGKILLed at every boundary, on SQLite and
// JSONL; the resolver, the projections, a re-drive from a new process and the side-effect counter are checked.
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { runToolRow, TOOL_EXPECTED, TOOL_FAILPOINTS } from "../harness/ToolHarness.js"
import type { ToolRowDetail } from "../harness/ToolHarness.js"

const freshDetail = (): ToolRowDetail => ({ counter: null, redrive: null, printed: [], operationDecision: null })

describe("tool boundary crash proofs", () => {
  for (const store of ["sqlite", "jsonl"] as const) {
    it.live(`${store}: SIGKILL at every boundary; decision, projections, re-drive and counter hold`, () =>
      Effect.gen(function*() {
        const results = yield* Effect.forEach(TOOL_FAILPOINTS, (failpoint) =>
          Effect.gen(function*() {
            const detail = freshDetail()
            const row = yield* runToolRow(store, failpoint, {}, detail)
            return { failpoint, row, detail }
          }), { concurrency: 2 })
        for (const { detail, failpoint, row } of results) {
          const where = `${store} ${failpoint}: ${row.error?._tag}: ${row.error?.message}`
          assert.isTrue(row.pass, where)
          assert.strictEqual(detail.operationDecision, TOOL_EXPECTED[failpoint].decision, where)
          assert.include(TOOL_EXPECTED[failpoint].counter, detail.counter, where)
          assert.notStrictEqual(detail.counter, 2, where)
          assert.strictEqual(detail.redrive, "refused AppendRejected duplicate_dispatch", where)
          // Only the delivered row printed a result, and it had its committed response (checked by the row).
          assert.strictEqual(detail.printed.length, failpoint === "T/delivered" ? 1 : 0, where)
        }
      }).pipe(Effect.provide(NodeContext.layer)), 300_000)
  }

  it.live("a deliberately broken runtime that runs the implementation after a refused T1 fails the check", () =>
    Effect.gen(function*() {
      const detail = freshDetail()
      const row = yield* runToolRow("sqlite", "T/before_t2", { broken: true }, detail)
      assert.isFalse(row.pass)
      assert.strictEqual(detail.counter, 2)
      assert.include(row.error?.message ?? "", "side-effect counter reads 2")
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)
})
