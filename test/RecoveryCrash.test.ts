// The crash and race proofs of spec 05 with real child processes: a SIGKILL at each kill point on SQLite and JSONL,
// then new processes run a host's start again; and two processes settling one operation at once on SQLite.
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { HARNESS_STORES } from "../harness/Child.js"
import {
  RECOVERY_CRASH_POINTS,
  RECOVERY_EXPECTED,
  type RecoveryCrashDetail,
  runRecoveryCrashRow
} from "../harness/RecoveryHarness.js"

const emptyDetail = (): RecoveryCrashDetail => ({
  decisions: [],
  reference: [],
  continuation: null,
  referenceContinuation: null,
  providerCalls: {},
  executions: [],
  t1Key: null,
  problems: []
})

describe("recovery crash proofs: SIGKILL at each kill point of spec 05", () => {
  for (const store of HARNESS_STORES) {
    for (const point of RECOVERY_CRASH_POINTS) {
      it.live(`${store}: killed at ${point}, a new start converges on the uninterrupted run's decisions`, () =>
        Effect.gen(function*() {
          const detail = emptyDetail()
          const row = yield* runRecoveryCrashRow(store, point, detail)
          assert.isTrue(row.pass, row.error?.message)
          assert.strictEqual(row.markerWritten, false)
          assert.strictEqual(row.deterministic, true)
          assert.strictEqual(row.ledgerUnchanged, true)
          const expected = RECOVERY_EXPECTED[point]
          assert.deepStrictEqual(detail.decisions.map((d) => [d.disposition, d.reasonCode, d.kind]), expected.decisions.map((d) => [...d]))
          assert.strictEqual(detail.continuation, expected.continuation)
        }).pipe(Effect.provide(NodeContext.layer)), 120_000)
    }
  }
})
