// `inspect`'s plan view: operations encoded without the schema machinery where the schema would plainly pass them,
// the same JSON as `Schema.encodeSync(ToolOperation)` for every operation (or the same refusal).
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Schema from "effect/Schema"
import { unsafeMake } from "../src/Domain/RuntimeEvent.js"
import { RecoveryProvenance } from "../src/Domain/RuntimeEvent.js"
import { RecoveryInfo, ToolOperation } from "../src/Domain/ToolOperation.js"
import { encodeOperationView } from "../src/Programs/InspectWorkspace.js"

const encode = Schema.encodeSync(ToolOperation)

// The schema's answer and ours: the JSON text, or that it threw.
const outcome = (f: () => unknown): string => {
  try {
    return JSON.stringify(f())
  } catch {
    return "threw"
  }
}

const id = fc.oneof(
  { arbitrary: fc.string({ minLength: 1, maxLength: 8 }), weight: 8 },
  { arbitrary: fc.constantFrom("", "a\ud800", "\udc00b", "ok\ud83d\ude00"), weight: 1 }
)
const seq = fc.oneof(
  { arbitrary: fc.integer({ min: 1, max: 2 ** 40 }), weight: 8 },
  { arbitrary: fc.constantFrom(0, -1, 1.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN), weight: 1 }
)
const operationId = fc.oneof(
  { arbitrary: fc.stringMatching(/^op_[0-9a-f]{32}$/), weight: 8 },
  { arbitrary: fc.constantFrom("op_", "op_" + "A".repeat(32), "x"), weight: 1 }
)
const status = fc.oneof(
  { arbitrary: fc.constantFrom("succeeded", "failed", "indeterminate", "not_dispatched", "parked"), weight: 8 },
  { arbitrary: fc.constantFrom("done", ""), weight: 1 }
)
const recovery = fc.record({
  disposition: fc.constantFrom("completed" as const, "parked" as const),
  reasonCode: fc.string(),
  kind: fc.constantFrom("reconciler" as const, "manual" as const),
  actor: fc.string({ minLength: 1 }),
  decidedSeq: fc.integer({ min: 1, max: 1000 })
}).map((r) => new RecoveryInfo({ disposition: r.disposition, reasonCode: r.reasonCode, provenance: new RecoveryProvenance({ kind: r.kind, actor: r.actor }), decidedSeq: r.decidedSeq }))

// The planner builds its operations field by field with `unsafeMake` (no validation): so do these, present keys only,
// sometimes with a key present as undefined.
const operation = fc.record({
  callId: id,
  name: fc.oneof(fc.string(), fc.constant("a\ud800")),
  status,
  callSeq: seq,
  dispatchSeq: fc.option(seq, { nil: undefined }),
  responseSeq: fc.option(seq, { nil: undefined }),
  operationId: fc.option(operationId, { nil: undefined }),
  recovery: fc.option(recovery, { freq: 4, nil: undefined }),
  undefinedKey: fc.option(fc.constantFrom("dispatchSeq", "responseSeq", "operationId", "recovery"), { freq: 8, nil: undefined })
}).map((r) => {
  const props: Record<string, unknown> = { callId: r.callId, name: r.name, status: r.status, callSeq: r.callSeq }
  if (r.dispatchSeq !== undefined) props["dispatchSeq"] = r.dispatchSeq
  if (r.responseSeq !== undefined) props["responseSeq"] = r.responseSeq
  if (r.operationId !== undefined) props["operationId"] = r.operationId
  if (r.recovery !== undefined) props["recovery"] = r.recovery
  if (r.undefinedKey !== undefined) props[r.undefinedKey] = undefined
  return unsafeMake(ToolOperation, props as never)
})

describe("encodeOperationView", () => {
  it("gives the JSON Schema.encodeSync(ToolOperation) gives, or throws where it throws", () => {
    fc.assert(
      fc.property(operation, (op) => {
        assert.strictEqual(outcome(() => encodeOperationView(op)), outcome(() => encode(op)))
      }),
      { numRuns: 3000 }
    )
  })

  it("keys in the schema's order, absent optional fields absent", () => {
    const op = unsafeMake(ToolOperation, { operationId: "op_" + "0".repeat(32), responseSeq: 3, dispatchSeq: 2, callSeq: 1, status: "succeeded", name: "n", callId: "c" } as never)
    assert.strictEqual(JSON.stringify(encodeOperationView(op)), JSON.stringify(encode(op)))
    assert.deepStrictEqual(Object.keys(encodeOperationView(op)), ["callId", "name", "status", "callSeq", "dispatchSeq", "responseSeq", "operationId"])
  })
})
