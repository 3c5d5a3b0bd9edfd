// import's write pass reads a proven line's run and id off its canonical text's end (`eventNames`) instead of parsing
// the line: for every canonical RuntimeEvent text it must read what JSON.parse reads, whatever the ids hold (quotes,
// backslashes, colons, commas, braces, non-ASCII), or the store's id checks would check the wrong ids.
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as fc from "effect/FastCheck"
import { canonicalText, jsonlLine } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { isDigestText as isDigestForm } from "../src/Domain/Digest.js"
import { eventNames, provenBytes, writtenSpan } from "../src/Programs/ImportLedger.js"
import * as Gen from "./support/fuzzGenerators.js"

// Ids of one or more characters, biased to the characters JSON escapes or a backward scan could trip on.
const awkwardId = fc.array(
  fc.oneof(
    fc.constantFrom(`"`, `\\`, `:`, `,`, `}`, `{`, `"id":"x"`, `\\"`, `\n`, `\u0001`, `é`, `😀`, `"runId":`, ` `),
    fc.fullUnicode().filter((c) => c.length > 0)
  ),
  { minLength: 1, maxLength: 12 }
).map((parts) => parts.join(""))

describe("eventNames reads what JSON.parse reads (docs/benchmarks.md)", () => {
  it("events with awkward ids, hidden or not, any body", () => {
    fc.assert(
      fc.property(awkwardId, awkwardId, awkwardId, awkwardId, awkwardId, fc.boolean(), fc.nat(), (id, runId, inv, sess, turn, hidden, ts) => {
        const b = EventBuilder.make({ runId, invocationId: inv, sessionId: sess, turnId: turn }, ts)
        const events = [b.opened(), b.user(`"id":"${id}"`), b.call(id, runId, { id, runId, "\\": [`"`] }, hidden ? { hidden: true } : undefined)]
        for (const e of [...events, b.custom(events[1]!.body, { id, ...(hidden ? { hidden: true as const } : {}) })]) {
          const text = Either.getOrThrow(canonicalText(e))
          const parsed = JSON.parse(text) as { id: string; runId: string }
          assert.deepStrictEqual(eventNames(text), { id: parsed.id, runId: parsed.runId }, text)
        }
      }),
      { numRuns: 500, seed: 1415 }
    )
  })

  it("the fuzz generators' runs", () => {
    const samples = fc.sample(fc.gen().map((g) => Gen.grow(g, Gen.startRun(g, 0), 0, 40, true).events), { numRuns: 60, seed: 1416 })
    let n = 0
    for (const events of samples) {
      for (const e of events) {
        const text = Either.getOrThrow(canonicalText(e))
        assert.deepStrictEqual(eventNames(text), { id: e.id, runId: e.runId }, text)
        n++
      }
    }
    assert.isAbove(n, 500)
  })
})

describe("isDigestForm is the digest's regular expression (docs/benchmarks.md)", () => {
  it("digests, near-digests and any string", () => {
    const DIGEST = /^sha256:[0-9a-f]{64}$/
    // 64 hex digits, often with one of them replaced by a character just outside the range, sometimes one more or less.
    const hex = fc.tuple(
      fc.array(fc.constantFrom(..."0123456789abcdef"), { minLength: 63, maxLength: 65 }),
      fc.nat(64),
      fc.constantFrom("", "", "A", "F", "g", "/", ":", "`", "@", " ")
    ).map(([cs, at, bad]) => cs.map((c, i) => i === at && bad !== "" ? bad : c).join(""))
    const near = fc.tuple(fc.constantFrom("sha256:", "sha256;", "SHA256:", "", "sha256:0"), hex, fc.constantFrom("", "\n", "0"))
      .map(([a, b, c]) => a + b + c)
    fc.assert(
      fc.property(fc.oneof(near, fc.string(), fc.fullUnicodeString()), (s) => {
        assert.strictEqual(isDigestForm(s), DIGEST.test(s), JSON.stringify(s))
      }),
      { numRuns: 5_000, seed: 1417 }
    )
    const positives = fc.sample(near, { numRuns: 2_000, seed: 1418 }).filter((s) => DIGEST.test(s)).length
    assert.isAbove(positives, 20, "the generator gives digests too")
    const digest = `sha256:${"0123456789abcdef".repeat(4)}`
    assert.isTrue(isDigestForm(digest))
    assert.isFalse(isDigestForm(`${digest}\n`))
  })
})

describe("provenBytes hands on a proven line's event bytes, run and id as JSON.parse reads them (docs/benchmarks.md)", () => {
  // The write pass takes a proven line's bytes without decoding it: the event's bytes (the bare line, or the span inside
  // the store-format wrapper) and the run and id read off the end of the text from its LAST `,"id":"`. A body may hold
  // `,"id":"` many times (args with an `id` key): the top-level one is the last.
  it("bare and store-format lines of events with awkward ids and args holding ids", () => {
    fc.assert(
      fc.property(awkwardId, awkwardId, awkwardId, fc.boolean(), fc.nat(), fc.nat({ max: 1_000_000 }), (id, runId, inv, hidden, ts, seq) => {
        const b = EventBuilder.make({ runId, invocationId: inv, sessionId: "s", turnId: "t" }, ts)
        const nested = { a: 0, id, runId, list: [{ b: 1, id: `${id}x`, z: 1 }], zz: { a: 1, id: "inner" } }
        const events = [b.opened(), b.user(`,"id":"${id}"`), b.call(id, runId, nested, hidden ? { hidden: true } : undefined)]
        for (const e of [...events, b.custom(events[1]!.body, { id, ...(hidden ? { hidden: true as const } : {}) })]) {
          const text = Either.getOrThrow(canonicalText(e))
          const parsed = JSON.parse(text) as { id: string; runId: string }
          if (e.body._tag === "FunctionCall") assert.isAbove(text.split(`,"id":"`).length, 3, text)
          const digest = `sha256:${"0123456789abcdef".repeat(4)}`
          const lines = [["events", text], ["rows", jsonlLine(seq + 1, seq + 1 + (ts % 3), digest, text).slice(0, -1)]] as const
          for (const [format, line] of lines) {
            const proven = provenBytes(Buffer.from(line, "utf8"), format)
            assert.isDefined(proven, line)
            assert.deepStrictEqual([proven!.id, proven!.runId], [parsed.id, parsed.runId], line)
            assert.isTrue(Buffer.from(text, "utf8").equals(proven!.bytes!), line)
            assert.strictEqual(proven!.text, text)
          }
        }
      }),
      { numRuns: 400, seed: 1419 }
    )
  })

  it("a store-format line not in the store's shape is not taken", () => {
    const b = EventBuilder.make("run-x", 1)
    const text = Either.getOrThrow(canonicalText(b.user("hi")))
    const digest = `sha256:${"ab".repeat(32)}`
    const good = jsonlLine(3, 4, digest, text).slice(0, -1)
    assert.isDefined(provenBytes(Buffer.from(good), "rows"))
    for (const bad of [good.replace(`"end":4`, `"end":`), good.replace(`"seq":3}`, `"seq":}`), good.replace("sha256:", "sha257:"), ` ${good}`, `${good} `, good.slice(0, -1)]) {
      assert.isUndefined(provenBytes(Buffer.from(bad), "rows"), bad)
    }
  })
})

describe("writtenSpan is the head and tail comparison it replaces (docs/benchmarks.md)", () => {
  // The check pass's test of a store-format line "as the store writes it", as it was: the line's start and end compared
  // with the head and tail built from the parsed members.
  const byStrings = (line: string, digest: string, end: number, seq: number): readonly [number, number] | undefined => {
    const head = `{"digest":"${digest}","end":${end},"event":`
    const tail = `,"seq":${seq}}`
    return line.length > head.length + tail.length && line.startsWith(head) && line.endsWith(tail)
      ? [head.length, line.length - tail.length]
      : undefined
  }
  const hex = fc.array(fc.constantFrom(..."0123456789abcdef"), { minLength: 64, maxLength: 64 }).map((cs) => `sha256:${cs.join("")}`)
  const count = fc.oneof(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }))
  const digits = (n: number) => fc.constantFrom(String(n), `0${n}`, String(n + 1), `${n}0`, "", `${n}`.slice(1), `-${n}`, `${n}.0`, `${n}e0`)
  it("on lines built from other members, with leading zeros, near digits, other digests and other bodies", () => {
    fc.assert(
      fc.property(hex, hex, count, count, digits(7), digits(7), fc.constantFrom(`{"a":1}`, `{}`, `{"seq":1}`, `{"x":"},\"seq\":"}`, `7`, ``, `{"a":1},"seq":2`),
        fc.boolean(), fc.boolean(), fc.boolean(), (d1, d2, end, seq, endText, seqText, event, sameDigest, sameEnd, sameSeq) => {
          const lineDigest = sameDigest ? d1 : d2
          const e = sameEnd ? String(end) : endText
          const q = sameSeq ? String(seq) : seqText
          const line = `{"digest":"${lineDigest}","end":${e},"event":${event},"seq":${q}}`
          assert.deepStrictEqual(writtenSpan(line, d1, end, seq), byStrings(line, d1, end, seq), line)
          if (!sameEnd || !sameSeq) {
            const n = 7
            assert.deepStrictEqual(writtenSpan(line, d1, n, n), byStrings(line, d1, n, n), line)
          }
        }),
      { numRuns: 5_000, seed: 1420 }
    )
  })
})
