// import's write pass reads a proven line's run and id off its canonical text's end (`eventNames`) instead of parsing
// the line: for every canonical RuntimeEvent text it must read what JSON.parse reads, whatever the ids hold (quotes,
// backslashes, colons, commas, braces, non-ASCII), or the store's id checks would check the wrong ids.
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as fc from "effect/FastCheck"
import { canonicalText } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Programs/EventBuilder.js"
import { isDigestText as isDigestForm } from "../src/Domain/Digest.js"
import { eventNames } from "../src/Programs/ImportLedger.js"
import * as Gen from "./support/fuzzGenerators.js"

// Ids of one or more characters, biased to the characters JSON escapes or a backward scan could trip on.
const awkwardId = fc.array(
  fc.oneof(
    fc.constantFrom(`"`, `\\`, `:`, `,`, `}`, `{`, `"id":"x"`, `\\"`, `\n`, `\u0001`, `é`, `😀`, `"runId":`, ` `),
    fc.fullUnicode().filter((c) => c.length > 0)
  ),
  { minLength: 1, maxLength: 12 }
).map((parts) => parts.join(""))

describe("eventNames reads what JSON.parse reads (issue 14)", () => {
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

describe("isDigestForm is the digest's regular expression (issue 14)", () => {
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
