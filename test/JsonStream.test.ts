// The streamed `--json` writer against the native serialiser: the same text, piece size whatever it is.
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { stringifyInPieces } from "../src/Cli/internal/jsonStream.js"

const joined = (value: unknown, size: number): string | undefined => {
  const parts = [...stringifyInPieces(value, size)]
  return parts.length === 0 ? undefined : parts.join("")
}

describe("stringifyInPieces", () => {
  it("gives the text of JSON.stringify(value, null, 2) for any JSON-like value and piece size", () => {
    fc.assert(
      fc.property(fc.anything({ maxDepth: 8, withBoxedValues: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true }), fc.integer({ min: 1, max: 300 }), (value, size) => {
        let native: string | undefined
        try {
          native = JSON.stringify(value, null, 2)
        } catch {
          return // bigint and the like: the native call throws, and so does ours (not compared)
        }
        assert.strictEqual(joined(value, size), native)
      }),
      { numRuns: 400 }
    )
  })

  it("toJSON (with its key), skipped members and array holes as the native call", () => {
    const doc = {
      a: undefined,
      b: [undefined, () => 1, Symbol("s"), { toJSON: (k: string) => `at ${k}` }],
      c: { toJSON: () => undefined },
      d: new Date(0),
      e: { nested: [[[[[{ deep: [1, { x: "y\n" }] }]]]]] },
      f: { toJSON: (k: string) => ({ key: k, list: [1, 2] }) }
    }
    for (const size of [1, 16, 1 << 20]) assert.strictEqual(joined(doc, size), JSON.stringify(doc, null, 2))
    assert.isUndefined(joined(undefined, 8))
    assert.strictEqual(joined("top", 8), JSON.stringify("top", null, 2))
  })

  it("writes runs of plain array members in one native call, byte-identical at every depth and around every odd member", () => {
    // Wide arrays at every depth, mixing plain leaves with the members that must take the member-by-member path
    // (toJSON at its index, undefined, functions, symbols, holes, boxed values, deep containers).
    const odd = fc.constantFrom<unknown>(
      undefined,
      () => 1,
      Symbol("s"),
      { toJSON: (k: string) => `at ${k}` },
      { toJSON: (k: string) => ({ key: k, deep: [[[[k]]]] }) },
      new Date(0),
      new Number(1),
      new String("boxed"),
      { toJSON: 5, a: "not callable" }
    )
    const leaf = fc.oneof(fc.string(), fc.double(), fc.boolean(), fc.constant(null), fc.object({ maxDepth: 3 }))
    const member = fc.oneof({ arbitrary: leaf, weight: 6 }, { arbitrary: odd, weight: 1 })
    const wide = (depth: number): fc.Arbitrary<unknown> =>
      depth === 0
        ? fc.array(member, { maxLength: 2100 })
        : fc.oneof(fc.array(member, { maxLength: 40 }), fc.array(wide(depth - 1), { maxLength: 3 }), fc.record({ x: wide(depth - 1), y: member }))
    fc.assert(
      fc.property(wide(6), fc.integer({ min: 1, max: 5000 }), fc.boolean(), (value, size, holes) => {
        if (holes && Array.isArray(value) && value.length > 3) delete value[1]
        assert.strictEqual(joined(value, size), JSON.stringify(value, null, 2))
      }),
      { numRuns: 300 }
    )
  })

  it("a plan's replay ids and operations: one native call per run of members, the same text", () => {
    const doc = {
      runs: [{
        plan: {
          operations: Array.from({ length: 3000 }, (_, i) => ({ callId: `c${i}`, name: "tool\n\u2028", status: "succeeded", callSeq: i + 1 })),
          replay: Array.from({ length: 5000 }, (_, i) => i % 1777 === 0 ? `id "${i}"\n` : `event-${i}`)
        }
      }]
    }
    for (const size of [1, 4096, 1 << 20]) assert.strictEqual(joined(doc, size), JSON.stringify(doc, null, 2))
  })

  it("hands out pieces as it goes: a large array arrives in many pieces", () => {
    const doc = { runs: [{ plan: { replay: Array.from({ length: 20_000 }, (_, i) => ({ seq: i + 1, id: `run:${i + 1}` })) } }] }
    const parts = [...stringifyInPieces(doc, 4096)]
    assert.isAbove(parts.length, 100)
    assert.strictEqual(parts.join(""), JSON.stringify(doc, null, 2))
  })
})
