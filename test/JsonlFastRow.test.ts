// The JSONL row decoder's cheaper checks against the plain ones they stand for: the digest's form without the regular
// expression, and the row line's shape (where the event's text lies) without building its head and tail strings.
// Each property fails on a naive version that gets an edge wrong (an off-by-one at an offset, uppercase hex, a missing
// closing brace, an empty event).
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { eventSpan, isDigestText } from "../src/Layers/internal/jsonlFold.js"

const DIGEST = /^sha256:[0-9a-f]{64}$/

// The check `eventSpan` replaces, as it was written.
const naiveSpan = (text: string, digest: string, end: number, seq: number) => {
  const head = `{"digest":"${digest}","end":${end},"event":`
  const tail = `,"seq":${seq}}`
  if (text.length <= head.length + tail.length || !text.startsWith(head) || !text.endsWith(tail)) return undefined
  return { from: head.length, to: text.length - tail.length }
}

const hex = fc.constantFrom(..."0123456789abcdefABCDEFg")
const digestLike = fc.oneof(
  fc.array(fc.constantFrom(..."0123456789abcdef"), { minLength: 64, maxLength: 64 }).map((cs) => `sha256:${cs.join("")}`),
  fc.array(hex, { minLength: 62, maxLength: 66 }).map((cs) => `sha256:${cs.join("")}`),
  fc.array(hex, { minLength: 64, maxLength: 64 }).map((cs) => `sha265:${cs.join("")}`),
  fc.string({ maxLength: 80 })
)

// A line as the store writes it, or one byte of it changed, cut or doubled.
const lineCase = fc.record({
  digest: digestLike,
  end: fc.integer({ min: 1, max: 2_000_000 }),
  seq: fc.integer({ min: 1, max: 2_000_000 }),
  event: fc.oneof(fc.constant(""), fc.constant("{}"), fc.json({ maxDepth: 2 })),
  mutate: fc.option(fc.record({ at: fc.nat(), kind: fc.constantFrom("drop", "change", "cut", "double"), ch: fc.constantFrom(..."\"{},:0123456789aesq ") }))
}).map(({ digest, end, seq, event, mutate }) => {
  let text = `{"digest":"${digest}","end":${end},"event":${event},"seq":${seq}}`
  if (mutate !== null) {
    const at = mutate.at % (text.length + 1)
    if (mutate.kind === "drop") text = text.slice(0, at) + text.slice(at + 1)
    else if (mutate.kind === "change") text = text.slice(0, at) + mutate.ch + text.slice(at + 1)
    else if (mutate.kind === "cut") text = text.slice(0, at)
    else text = text.slice(0, at) + text.slice(at, at + 1) + text.slice(at)
  }
  // Sometimes asked about a digest, end or seq other than the line's.
  return { text, digest, end, seq }
})

describe("JSONL fast row checks", () => {
  it("isDigestText is exactly /^sha256:[0-9a-f]{64}$/", () => {
    fc.assert(fc.property(digestLike, (s) => isDigestText(s) === DIGEST.test(s)), { numRuns: 5_000 })
    assert.isTrue(isDigestText(`sha256:${"0".repeat(64)}`))
    assert.isFalse(isDigestText(`sha256:${"A".repeat(64)}`))
    assert.isFalse(isDigestText(`sha256:${"0".repeat(63)}`))
    assert.isFalse(isDigestText(`sha256:${"0".repeat(64)}\n`))
  })

  it("eventSpan finds the event's text exactly where startsWith(head) && endsWith(tail) would", () => {
    fc.assert(
      fc.property(lineCase, fc.integer({ min: -1, max: 1 }), fc.integer({ min: -1, max: 1 }), (c, dEnd, dSeq) => {
        const end = Math.max(1, c.end + dEnd)
        const seq = Math.max(1, c.seq + dSeq)
        assert.deepStrictEqual(eventSpan(c.text, c.digest, end, seq), naiveSpan(c.text, c.digest, end, seq), c.text)
      }),
      { numRuns: 20_000 }
    )
    const d = `sha256:${"a".repeat(64)}`
    assert.isUndefined(eventSpan(`{"digest":"${d}","end":3,"event":,"seq":3}`, d, 3, 3), "an empty event")
    assert.isUndefined(eventSpan(`{"digest":"${d}","end":3,"event":{},"seq":3`, d, 3, 3), "no closing brace")
    assert.isUndefined(eventSpan(`{"digest":"${d}","end":13,"event":{},"seq":3}`, d, 3, 3), "end 13 is not end 3")
    assert.isUndefined(eventSpan(`{"digest":"${d}","end":3,"event":{},"seq":13}`, d, 3, 3), "seq 13 is not seq 3")
    assert.deepStrictEqual(eventSpan(`{"digest":"${d}","end":3,"event":{},"seq":3}`, d, 3, 3), { from: 100, to: 102 })
  })
})
