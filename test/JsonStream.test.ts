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

  it("hands out pieces as it goes: a large array arrives in many pieces", () => {
    const doc = { runs: [{ plan: { replay: Array.from({ length: 20_000 }, (_, i) => ({ seq: i + 1, id: `run:${i + 1}` })) } }] }
    const parts = [...stringifyInPieces(doc, 4096)]
    assert.isAbove(parts.length, 100)
    assert.strictEqual(parts.join(""), JSON.stringify(doc, null, 2))
  })
})
