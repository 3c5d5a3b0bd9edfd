// The canonical encoding, the digest chain, argsHash and OperationId against independently computed vectors (docs/spec/01-ledger.md).
// Vectors were computed with Python's hashlib and json, not with the code under test.
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import * as CanonicalJson from "../src/Domain/CanonicalJson.js"
import * as Digest from "../src/Domain/Digest.js"
import { deriveOperationId } from "../src/Domain/Ids.js"
import { canonicalText, decodeStoredText, RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"

const ok = (v: unknown) => {
  const r = CanonicalJson.encode(v)
  assert.strictEqual(r._tag, "Ok", r._tag === "Fail" ? r.failure.message : "")
  return (r as { text: string }).text
}
const fail = (v: unknown) => {
  const r = CanonicalJson.encode(v)
  assert.strictEqual(r._tag, "Fail")
  return (r as { failure: CanonicalJson.CanonicalFailure }).failure
}

describe("canonical JSON", () => {
  it("sorts keys by UTF-16 code units, not by JavaScript's integer-key order", () => {
    assert.strictEqual(ok({ b: 1, a: 2, "10": 3, "9": 4, "é": 5, Z: 6 }), '{"10":3,"9":4,"Z":6,"a":2,"b":1,"é":5}')
    assert.strictEqual(ok({ "\ud83d\ude00": 1, "\uffff": 2 }), '{"😀":1,"\uffff":2}')
  })
  it("escapes as ES2019 JSON.stringify: short escapes, lowercase \\u00xx, lone surrogates; the rest raw", () => {
    assert.strictEqual(ok("\"\\\b\f\n\r\t\u0001\u001f\u007f/é😀"), '"\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u007f/é😀"')
    assert.strictEqual(ok("\ud800x\udfff"), '"\\ud800x\\udfff"')
  })
  it("writes numbers as JSON.stringify does, with -0 as 0", () => {
    assert.strictEqual(ok([-0, 0, 1.5, 1e21, 1e-7, -3]), "[0,0,1.5,1e+21,1e-7,-3]")
  })
  it("refuses non-strict JSON: undefined, NaN, Infinity, bigint, functions, class instances, accessors, holes, symbols", () => {
    for (const v of [undefined, Number.NaN, Infinity, 1n, () => 1, new Date(0), new Map(), [1, , 2], { a: undefined }]) {
      assert.strictEqual(fail(v)._tag, "NotStrictJson")
    }
    assert.strictEqual(fail({ get x() { return 1 } })._tag, "NotStrictJson")
    assert.strictEqual(fail({ [Symbol("s")]: 1 })._tag, "NotStrictJson")
    assert.strictEqual(ok(Object.create(null)), "{}")
  })
  it("limits depth to 256 containers, and never overflows the stack", () => {
    const nest = (n: number) => JSON.parse("[".repeat(n) + "]".repeat(n))
    ok(nest(256))
    assert.strictEqual(fail(nest(257))._tag, "TooDeep")
    const deep = CanonicalJson.encodeParsed(JSON.parse("[".repeat(200_000) + "]".repeat(200_000)))
    assert.strictEqual(deep._tag, "Fail")
  })
  it("limits size to 16 MiB of UTF-8", () => {
    ok("x".repeat(16 * 1024 * 1024 - 2))
    assert.strictEqual(fail("x".repeat(16 * 1024 * 1024 - 1))._tag, "TooLarge")
    assert.strictEqual(fail("é".repeat(8 * 1024 * 1024))._tag, "TooLarge")
  })
  it("round-trips: canonical(JSON.parse(canonical(v))) === canonical(v)", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.jsonValue(), (v) => {
        const text = ok(v)
        return ok(JSON.parse(text)) === text
      }),
      { numRuns: 500 }
    )
  })
  it("strict UTF-8 decoding refuses invalid bytes instead of repairing them", () => {
    assert.isUndefined(CanonicalJson.decodeUtf8(new Uint8Array([0x7b, 0xff, 0x7d])))
    assert.isUndefined(CanonicalJson.decodeUtf8(new Uint8Array([0xed, 0xa0, 0x80])))
    assert.strictEqual(CanonicalJson.decodeUtf8(new TextEncoder().encode("é😀")), "é😀")
  })
})

describe("digest chain, argsHash and OperationId (normative vectors)", () => {
  it("derives OperationId from length-prefixed UTF-8 of invocationId and callId", () => {
    assert.strictEqual(deriveOperationId("inv-1", "call-1"), "op_7342491602045ebf693f08375df7d6bc")
    assert.strictEqual(deriveOperationId("inv-é", "c😀"), "op_ffe15c8329fd9a22dabae5c688f9e186")
  })
  it("computes d(0) and d(1) as 01 specifies", () => {
    const d0 = Digest.genesis("run-1")
    assert.strictEqual(d0, "sha256:858d3c97e08174e60dcedfc9b629e8c14f853a889171d16a2e8c95e7fb1cf6b3")
    const text =
      '{"body":{"_tag":"RunOpened","toolBoundary":"none"},"id":"e1","invocationId":"i","runId":"run-1","sessionId":"s","ts":0,"turnId":"t"}'
    const event = Either.getOrThrow(decodeStoredText(text))
    assert.strictEqual(Either.getOrThrow(canonicalText(event)), text)
    assert.strictEqual(Digest.next(d0, 1, text), "sha256:38b16741e8c30eeb65a586a628954fbc55d4091f1fd0208ccc039a5bb0ec8178")
  })
  it("computes argsHash over canonical {args, name}", () => {
    assert.strictEqual(
      Either.getOrThrow(LedgerRules.argsHash("Bash", { a: 1 })),
      "sha256:a92af104d36313bac91bfee67076bd41167175b18f44443b0ead6f75a0976bb5"
    )
  })
})

describe("strict event decoding of stored text", () => {
  const good =
    '{"body":{"_tag":"UserMessage","text":"hi"},"id":"e1","invocationId":"i","runId":"r","sessionId":"s","ts":5,"turnId":"t"}'
  it("accepts canonical, schema-valid text", () => {
    const e = Either.getOrThrow(decodeStoredText(good))
    assert.isTrue(e instanceof RuntimeEvent)
    assert.strictEqual(e.ts, 5)
  })
  it("classifies invalid JSON, non-canonical bytes, unknown keys and bad values", () => {
    const reason = (t: string) => Either.match(decodeStoredText(t), { onLeft: (f) => f.reason, onRight: () => "ok" })
    assert.strictEqual(reason(good.slice(0, -1)), "invalid_json")
    assert.strictEqual(reason(good.replace('"id":"e1",', '"id": "e1",')), "non_canonical")
    assert.strictEqual(reason(good.replace('{"body"', '{"zzz":1,"body"').replace('"turnId":"t"}', '"turnId":"t"}')), "non_canonical")
    assert.strictEqual(reason(good.replace('"turnId":"t"}', '"turnId":"t","zzz":1}')), "schema_invalid")
    assert.strictEqual(reason(good.replace('"ts":5', '"ts":-1')), "schema_invalid")
    assert.strictEqual(reason(good.replace('"ts":5', '"ts":1.5')), "schema_invalid")
    assert.strictEqual(reason(good.replace('"id":"e1",', '"hidden":false,"id":"e1",')), "schema_invalid")
    assert.strictEqual(reason(good.replace('"UserMessage"', '"FutureTag"')), "schema_invalid")
    assert.strictEqual(reason(good.replace('"ts":5', '"ts":9007199254740992')), "schema_invalid")
  })
})
