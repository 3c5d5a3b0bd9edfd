// import's parser takes a store-format line written as the store writes it by parsing only its event's text
// (`writtenEntry` in Programs/internal/importParser.ts), where it parsed the whole line before. It must give what the
// whole line's parse gives: the same entry (event, text, row, bytes) for a line it takes, the same refusal (reason
// and message) for a line refused, on lines near the written form (other digits, digests, spacing, event texts).
// The reference is the same parser on the way that parses the whole line (a write pass's, given no proven line).
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as fc from "effect/FastCheck"
import { canonicalText } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import type { ImportEntry } from "../src/Programs/internal/importLine.js"
import { ProvenLines } from "../src/Programs/internal/importLine.js"
import { FileParser } from "../src/Programs/internal/importParser.js"
import { Refusal } from "../src/Programs/internal/importRefusal.js"

const MARKER = `{"format":"runtime-resume.export","version":2}`

// What a parser made of the file's second line: its entry, or the refusal it threw.
const outcome = (firstLine: string, line: string, wholeLine: boolean, keepBytes: boolean): unknown => {
  const entries: Array<ImportEntry> = []
  const parser = wholeLine ? new FileParser((e) => entries.push(e), new ProvenLines()) : new FileParser((e) => entries.push(e))
  parser.keepBytes = keepBytes
  try {
    parser.push(Buffer.from(`${firstLine}\n${line}\n`, "utf8"))
  } catch (error) {
    if (error instanceof Refusal) return { refused: error.reason, detail: error.detail, where: error.where }
    throw error
  }
  const entry = entries.find((e) => e.line === 2)
  if (entry === undefined) return { none: true }
  return {
    line: entry.line,
    text: entry.text,
    event: Either.getOrThrow(canonicalText(entry.event)),
    id: entry.event.id,
    row: entry.row === undefined ? undefined : { seq: entry.row.seq, end: entry.row.end, digest: entry.row.digest },
    bytes: entry.bytes === undefined ? undefined : Buffer.from(entry.bytes).toString("latin1")
  }
}

const b = EventBuilder.make({ runId: "run-1", invocationId: "inv", sessionId: "sess", turnId: "turn" }, 1_700_000_000_000)
const u = EventBuilder.make({ runId: "run-ü", invocationId: "inv-ü", sessionId: "sess", turnId: "turn" }, 1_700_000_000_000)
const texts = [
  b.opened(),
  b.user("hello"),
  b.user(`"quoted" \\ },"seq":1 ü 😀`),
  b.call("call_1", "tool", { a: [1, 2, { b: null }], "\\": `"` }),
  b.call("call_2", "tool", {}, { hidden: true }),
  b.response("call_1", "tool", { ok: true }),
  b.terminated("completed"),
  u.opened(),
  u.user("ü")
].map((e) => Either.getOrThrow(canonicalText(e)))

// Event texts: canonical, and near it (spaces, another key order, invalid JSON, two values, not an object).
const eventText = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...texts) },
  fc.constantFrom(...texts).map((t) => t.replace(`{"body":`, `{ "body":`)),
  fc.constantFrom(...texts).map((t) => t.replace(`"id":`, `"id" :`)),
  fc.constantFrom(...texts).map((t) => `{"id":"x",${t.slice(1)}`),
  fc.constantFrom(...texts).map((t) => t.slice(0, -1)),
  fc.constantFrom(...texts).map((t) => `${t},"seq":3`),
  fc.constantFrom(`{}`, `7`, `null`, `"x"`, `[]`, ``, `{"a":1},"seq":2`)
)
const hex = fc.array(fc.constantFrom(..."0123456789abcdef"), { minLength: 64, maxLength: 64 }).map((cs) => cs.join(""))
const digest = fc.oneof(
  { weight: 4, arbitrary: hex.map((h) => `sha256:${h}`) },
  hex.map((h) => `sha256:${h.toUpperCase()}`),
  hex.map((h) => `sha256:${h.slice(1)}`),
  hex.map((h) => `sha256:${h}0`),
  hex.map((h) => `sha256:${h.slice(0, 10)}\\u0030${h.slice(11)}`),
  hex.map((h) => `sha512:${h}`)
)
const count = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 100_000 }).map(String) },
  fc.constantFrom("0", "01", "-1", "1.0", "1e0", " 1", "9007199254740991", "9007199254740992", "9007199254740993",
    "99999999999999999", "12345678901234567", "")
)
const ending = fc.constantFrom("", "", "", " ", "\r", "\t")

describe("import's parser: a store-format line as the store writes it parses as the whole line does (docs/benchmarks.md)", () => {
  it("the same entry, or the same refusal, for lines near the written form, in version 1 and version 2 files", () => {
    fc.assert(
      fc.property(eventText, digest, count, count, ending, fc.boolean(), fc.boolean(), (event, d, end, seq, tail, v2, keepBytes) => {
        const line = `{"digest":"${d}","end":${end},"event":${event},"seq":${seq}}${tail}`
        const first = v2 ? MARKER : `{"digest":"sha256:${"0".repeat(64)}","end":1,"event":${texts[0]},"seq":1}`
        const fast = outcome(first, line, false, keepBytes)
        const whole = outcome(first, line, true, keepBytes)
        assert.deepStrictEqual(fast, whole, line)
      }),
      { numRuns: 4_000, seed: 2615 }
    )
  })

  it("a line as the store writes it is taken by the event's parse alone, its bytes a view of the line's", () => {
    const d = `sha256:${"ab".repeat(32)}`
    const line = `{"digest":"${d}","end":9,"event":${texts[3]},"seq":4}`
    const fast = outcome(MARKER, line, false, true) as { readonly row: unknown; readonly bytes: string; readonly text: string }
    assert.deepStrictEqual(fast.row, { seq: 4, end: 9, digest: d })
    assert.strictEqual(fast.text, texts[3])
    assert.strictEqual(fast.bytes, texts[3])
  })
})
