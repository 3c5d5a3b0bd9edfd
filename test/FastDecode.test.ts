// The read path's fast paths against the slow ones they stand in for: the hand-written event decoder against the strict
// Schema decode, the canonical-text check and the one-shot chain against the encoder, `unsafeMake` against `new`, trust.
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Equal, FastCheck as fc, Hash, Layer, Schema, Stream } from "effect"
import * as CanonicalJson from "../src/Domain/CanonicalJson.js"
import * as Digest from "../src/Domain/Digest.js"
import { describeParseError } from "../src/Domain/ParseIssues.js"
import { CallId, EventId, InvocationId, RunId, SessionId, TurnId } from "../src/Domain/Ids.js"
import { OperationDecision } from "../src/Domain/RecoveryDecision.js"
import { ReplayRef } from "../src/Domain/ResumePlan.js"
import * as RE from "../src/Domain/RuntimeEvent.js"
import { ToolOperation } from "../src/Domain/ToolOperation.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { importLedger } from "../src/Programs/ImportLedger.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import * as ResumePlanner from "../src/Domain/Rules/ResumePlanner.js"
import type { RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"

const RUNS = Number(process.env["RR_FAST_DECODE_RUNS"] ?? 1500)

// ---- generators: valid events in their JSON form, as JSON.parse gives them back -------------------------------

const LONE = ["\ud800", "a\udfff", "\udbff", "x\udc00y"]
// Strings the Schema's `String` accepts (lone surrogates included).
const anyString = fc.oneof(fc.string({ unit: "binary", maxLength: 12 }), fc.constantFrom("", ...LONE))
// Well-formed strings (names): no lone surrogate, possibly empty.
const wellFormed = fc.oneof(fc.string({ unit: "grapheme", maxLength: 8 }), fc.constantFrom("", "é", "😀", "\u0000"))
// Ids: well-formed and non-empty.
const id = fc.oneof(fc.string({ unit: "grapheme", minLength: 1, maxLength: 8 }), fc.constantFrom("run-1", "é", "😀", "a\u0000b"))
const operationId = fc.stringMatching(/^op_[0-9a-f]{32}$/)
const digest = fc.stringMatching(/^sha256:[0-9a-f]{64}$/)
const json = fc.jsonValue({ maxDepth: 3 })
const boundary = fc.constantFrom("none", "t1_after_preflight_v1")

const bodies: ReadonlyArray<fc.Arbitrary<Record<string, unknown>>> = [
  fc.record({ _tag: fc.constant("RunOpened"), toolBoundary: boundary }),
  fc.record({
    _tag: fc.constant("ContinuationStarted"),
    toolBoundary: boundary,
    source: fc.record({
      sessionId: id,
      invocationId: id,
      runId: id,
      turnId: id,
      highWater: fc.record({ seq: fc.maxSafeNat(), digest })
    }),
    claimId: anyString
  }),
  fc.record({ _tag: fc.constant("UserMessage"), text: anyString }),
  fc.record({ _tag: fc.constant("ModelText"), text: anyString }),
  fc.record({ _tag: fc.constant("FunctionCall"), callId: id, name: wellFormed, args: json }),
  fc.record({
    _tag: fc.constant("ToolDispatched"),
    callId: id,
    operationId,
    argsHash: digest,
    recoveryMode: fc.constantFrom("read_only", "idempotent", "reconcilable", "never_auto_retry"),
    idempotencyKey: anyString,
    evidence: json
  }, { requiredKeys: ["_tag", "callId", "operationId", "argsHash", "recoveryMode"] }),
  fc.record({
    _tag: fc.constant("FunctionResponse"),
    callId: id,
    name: wellFormed,
    result: json,
    isError: fc.boolean(),
    operationId,
    idempotencyKey: anyString
  }, { requiredKeys: ["_tag", "callId", "name", "result", "isError"] }),
  fc.record({ _tag: fc.constant("PermissionRequested"), requestId: anyString }),
  fc.record({ _tag: fc.constant("PermissionResolved"), requestId: anyString, decision: fc.constantFrom("allow", "deny", "timed_out") }),
  fc.record({
    _tag: fc.constant("RunTerminated"),
    status: fc.constantFrom("completed", "failed", "cancelled"),
    failureClass: anyString,
    abortSource: anyString
  }, { requiredKeys: ["_tag", "status"] }),
  fc.record({
    _tag: fc.constant("ReconcileObserved"),
    operationId,
    callId: id,
    observation: fc.constantFrom("matches_expected_state", "matches_prior_state", "diverged", "unreadable"),
    evidenceDigest: digest
  }),
  fc.record({
    _tag: fc.constant("RecoveryDecided"),
    operationId,
    callId: id,
    disposition: fc.constantFrom("completed", "parked"),
    reasonCode: anyString,
    evidenceEventIds: fc.array(anyString, { maxLength: 3 }),
    outcomeEventId: anyString,
    provenance: fc.record({ kind: fc.constantFrom("reconciler", "manual"), actor: anyString.filter((a) => a.length > 0) })
  }, { requiredKeys: ["_tag", "operationId", "callId", "disposition", "reasonCode", "evidenceEventIds", "provenance"] }),
  fc.record({ _tag: fc.constant("Diagnostic"), message: anyString, code: anyString }, { requiredKeys: ["_tag", "message"] })
]

const validEvent: fc.Arbitrary<Record<string, unknown>> = fc.record({
  id,
  sessionId: id,
  invocationId: id,
  runId: id,
  turnId: id,
  ts: fc.oneof(fc.maxSafeNat(), fc.constantFrom(0, Number.MAX_SAFE_INTEGER)),
  hidden: fc.constant(true),
  body: fc.oneof(...bodies)
}, { requiredKeys: ["id", "sessionId", "invocationId", "runId", "turnId", "ts", "body"] })

// What JSON.parse makes of a value (the decoder's only input).
const parsed = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

// Every object of a value, the event's payloads included, with the path to it.
const objectsOf = (value: unknown): Array<Record<string, unknown>> => {
  const out: Array<Record<string, unknown>> = []
  const walk = (v: unknown) => {
    if (typeof v !== "object" || v === null) return
    if (Array.isArray(v)) return v.forEach(walk)
    out.push(v as Record<string, unknown>)
    Object.values(v).forEach(walk)
  }
  walk(value)
  return out
}

const WRONG: ReadonlyArray<unknown> = [
  null, 0, -1, 1.5, -0.5, 2 ** 53, -(2 ** 53), "", "x", "1", true, false, [], {}, ["a"], ...LONE,
  "op_0123", "OP_0123456789abcdef0123456789abcdef", "sha256:ABCDEF", "completed", "none", "UserMessage"
]
const EXTRA_KEYS = ["extra", "_tag", "__proto__", "constructor", "toString", "0", "hidden", "id", "body", "text", "seq"]

/** A valid event with one mutation: a key added, a key removed, or a value replaced by a wrong one. */
const mutatedEvent = fc.tuple(validEvent, fc.nat(), fc.nat(), fc.integer({ min: 0, max: 2 }), fc.nat(), json).map(
  ([event, at, keyAt, kind, pick, extra]) => {
    const copy = parsed(event) as Record<string, unknown>
    const targets = objectsOf(copy)
    const target = targets[at % targets.length]!
    const keys = Object.keys(target)
    const key = keys.length === 0 ? "extra" : keys[keyAt % keys.length]!
    let mutation: string
    if (kind === 0 || keys.length === 0) {
      const name = EXTRA_KEYS[pick % EXTRA_KEYS.length]!
      Object.defineProperty(target, name, { value: extra, enumerable: true, writable: true, configurable: true })
      mutation = `added ${name}`
    } else if (kind === 1) {
      delete target[key]
      mutation = `removed ${key}`
    } else {
      target[key] = WRONG[pick % WRONG.length]
      mutation = `${key} = ${JSON.stringify(target[key])}`
    }
    return { value: parsed(copy), mutation }
  }
)

// ---- comparisons ---------------------------------------------------------------------------------------------

/** The same prototypes and own keys in the same order, recursively, and the same primitive values. */
const assertSameShape = (a: unknown, b: unknown, path = "$"): void => {
  if (typeof a !== "object" || a === null || typeof b !== "object" || b === null) {
    assert.isTrue(Object.is(a, b), `${path}: ${String(a)} vs ${String(b)}`)
    return
  }
  assert.strictEqual(Object.getPrototypeOf(a), Object.getPrototypeOf(b), `${path}: prototypes differ`)
  assert.deepStrictEqual(Reflect.ownKeys(a), Reflect.ownKeys(b), `${path}: own keys differ`)
  for (const key of Object.keys(a)) assertSameShape((a as never)[key], (b as never)[key], `${path}.${key}`)
}

const strictDecode = (u: unknown) => RE.decodeEvent(u)

// The reference pipeline the fast one replaced: canonical re-encode and comparison, then the strict Schema decode.
const referenceDecode = (text: string): Either.Either<RE.RuntimeEvent, RE.StoredEventFailure> => {
  const p = CanonicalJson.parseJson(text)
  if (p === undefined) return Either.left({ reason: "invalid_json", message: "the stored event is not valid JSON" })
  const canonical = CanonicalJson.encodeParsed(p.value)
  if (canonical._tag === "Fail") return Either.left({ reason: "schema_invalid", message: canonical.failure.message })
  if (canonical.text !== text) {
    return Either.left({ reason: "non_canonical", message: "the stored bytes differ from their canonical encoding" })
  }
  return Either.mapLeft(strictDecode(p.value), (e) => ({
    reason: "schema_invalid" as const,
    // Errors name fields and paths, never values from the event (docs/reliability.md, File hygiene): the message the store gives.
    message: `the event fails the strict decode: ${describeParseError(e)}`
  }))
}

// ---- tests ---------------------------------------------------------------------------------------------------

describe("the fast event decoder (decodeJsonEvent) against the strict Schema decode", () => {
  it("accepts every valid event of every body variant, building what the Schema builds", () => {
    const tags = new Set<string>()
    fc.assert(
      fc.property(validEvent, (event) => {
        const u = parsed(event)
        const fast = RE.decodeJsonEvent(u)
        const slow = strictDecode(u)
        assert.isTrue(Either.isRight(slow), "the generator made an event the Schema refuses")
        assert.isDefined(fast, `the fast decoder refused a valid ${JSON.stringify(u).slice(0, 300)}`)
        assertSameShape(fast, (slow as Either.Right<never, RE.RuntimeEvent>).right)
        tags.add(fast!.body._tag)
        if (fast!.body._tag !== "RecoveryDecided") {
          assert.isTrue(Equal.equals(fast, (slow as Either.Right<never, RE.RuntimeEvent>).right))
          assert.strictEqual(Hash.hash(fast!), Hash.hash((slow as Either.Right<never, RE.RuntimeEvent>).right))
        }
      }),
      { numRuns: RUNS }
    )
    assert.deepStrictEqual([...tags].sort(), RE.EventBody.members.map((m) => m.identifier).sort())
  })

  it("accepts a mutated event only when the Schema does, and then builds the same value", () => {
    let fastAccepted = 0
    let refused = 0
    fc.assert(
      fc.property(mutatedEvent, ({ mutation, value }) => {
        const fast = RE.decodeJsonEvent(value)
        const slow = strictDecode(value)
        if (fast === undefined) {
          refused++
          return
        }
        fastAccepted++
        assert.isTrue(Either.isRight(slow), `fast accepted what the Schema refuses (${mutation}): ${JSON.stringify(value).slice(0, 300)}`)
        assertSameShape(fast, (slow as Either.Right<never, RE.RuntimeEvent>).right)
      }),
      { numRuns: RUNS * 2 }
    )
    // Both sides of the implication were exercised.
    assert.isAbove(fastAccepted, RUNS / 10)
    assert.isAbove(refused, RUNS / 2)
  })

  it("leaves the edge cases to the Schema: a required payload absent, lone surrogates in ids, unsafe ts", () => {
    const base = { id: "e", sessionId: "s", invocationId: "i", runId: "r", turnId: "t", ts: 1 }
    const cases: ReadonlyArray<readonly [unknown, boolean]> = [
      [{ ...base, body: { _tag: "FunctionCall", callId: "c", name: "n" } }, true], // Schema: args = undefined
      [{ ...base, body: { _tag: "FunctionResponse", callId: "c", name: "n", isError: false } }, true],
      [{ ...base, id: "\ud800", body: { _tag: "UserMessage", text: "x" } }, false],
      [{ ...base, ts: 2 ** 53, body: { _tag: "UserMessage", text: "x" } }, false],
      [{ ...base, hidden: false, body: { _tag: "UserMessage", text: "x" } }, false],
      [{ ...base, body: { _tag: "UserMessage", text: "x", extra: 1 } }, false],
      [{ ...base, body: { _tag: "Unknown" } }, false],
      [[base], false]
    ]
    for (const [value, schemaAccepts] of cases) {
      assert.isUndefined(RE.decodeJsonEvent(value), JSON.stringify(value))
      assert.strictEqual(Either.isRight(strictDecode(value)), schemaAccepts, JSON.stringify(value))
    }
  })
})

describe("the decoder's well-formedness check (native isWellFormed) against the pattern it replaced", () => {
  it("answers as the lone-surrogate pattern on any string and refuses every non-string", () => {
    const cases = [...LONE, "", "a", "é", "😀", "\ud83d\ude00", "\ude00\ud83d", "a\ud800\udc00b\ud800", "\u0000", 1, null, undefined, {}]
    for (const u of cases) assert.strictEqual(RE.isWellFormedString(u), RE.isWellFormedByPattern(u), JSON.stringify(u))
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary", maxLength: 16 }), fc.string({ unit: "binary-ascii", maxLength: 16 })), (u) => {
        assert.strictEqual(RE.isWellFormedString(u), RE.isWellFormedByPattern(u))
      }),
      { numRuns: RUNS * 4 }
    )
    // Both answers occur in the generated strings.
    assert.isFalse(RE.isWellFormedString("x\udc00"))
    assert.isTrue(RE.isWellFormedString("x\ud83d\ude00"))
  })

  it("refuses an event whose ids or names hold a lone surrogate, as the Schema does", () => {
    const base = { id: "e", sessionId: "s", invocationId: "i", runId: "r", turnId: "t", ts: 1 }
    for (const lone of LONE) {
      for (const value of [
        { ...base, turnId: lone, body: { _tag: "UserMessage", text: "x" } },
        { ...base, body: { _tag: "FunctionCall", callId: lone, name: "n", args: null } },
        { ...base, body: { _tag: "FunctionCall", callId: "c", name: lone, args: null } },
        { ...base, body: { _tag: "FunctionResponse", callId: "c", name: lone, result: 1, isError: false } }
      ]) {
        assert.isUndefined(RE.decodeJsonEvent(value), JSON.stringify(value))
        assert.isTrue(Either.isLeft(strictDecode(value)), JSON.stringify(value))
      }
    }
  })
})

describe("canonicalText's fast encoder against the Schema encode it stands in for", () => {
  const BODY_CLASSES = new Map<string, { readonly prototype: object }>(RE.EventBody.members.map((m) => [m.identifier, m]))
  // The reference: the Schema encode, then the strict canonical encoder (what canonicalText did before the fast path).
  const reference = (event: RE.RuntimeEvent): Either.Either<string, string> => {
    // Effect's encode throws on a few values no valid event holds (a `_tag` `String` cannot convert): a failure.
    let encoded: Either.Either<unknown, unknown>
    try {
      encoded = Schema.encodeEither(RE.RuntimeEvent)(event)
    } catch {
      return Either.left("SchemaInvalid")
    }
    if (Either.isLeft(encoded)) return Either.left("SchemaInvalid")
    const text = CanonicalJson.encode(encoded.right)
    return text._tag === "Ok" ? Either.right(text.text) : Either.left(text.failure._tag)
  }
  const observed = (event: RE.RuntimeEvent): Either.Either<string, string> =>
    Either.mapLeft(RE.canonicalText(event), (failure) => failure._tag)
  // A generated `_tag` as a lookup key, as `String` gives it; `undefined` for one `String` throws on (an object whose
  // `toString` is not a function, which fast-check generates now and then).
  const tagKey = (tag: unknown): string | undefined => {
    try {
      return String(tag)
    } catch {
      return undefined
    }
  }
  // An instance built without validation from a (possibly invalid) JSON value: what `new X(props, true)` allows.
  const unchecked = (value: Record<string, unknown>): RE.RuntimeEvent => {
    const body = value.body as Record<string, unknown> | undefined
    const key = typeof body === "object" && body !== null ? tagKey(body._tag) : undefined
    const Class = key === undefined ? undefined : BODY_CLASSES.get(key)
    const built = Class === undefined ? body : RE.unsafeMake(Class as never, { ...body } as never)
    return RE.unsafeMake(RE.RuntimeEvent, { ...value, body: built } as never)
  }

  it("gives the reference text for every valid event (fresh instances, nothing cached)", () => {
    fc.assert(
      fc.property(validEvent, (event) => {
        const decoded = strictDecode(parsed(event))
        assert.isTrue(Either.isRight(decoded))
        const instance = (decoded as Either.Right<never, RE.RuntimeEvent>).right
        const expected = reference(instance)
        assert.isTrue(Either.isRight(expected))
        assert.deepStrictEqual(observed(instance), expected)
      }),
      { numRuns: RUNS }
    )
  })

  it("fails, never throws, on an unchecked instance whose _tag String cannot convert (Effect's encode throws there)", () => {
    const value = { id: " ", sessionId: "run-1", invocationId: " ", runId: " ", turnId: " ", ts: 0, body: { _tag: [{ toString: false }], text: "" } }
    const result = RE.canonicalText(RE.unsafeMake(RE.RuntimeEvent, value as never))
    assert.isTrue(Either.isLeft(result))
    if (Either.isLeft(result)) assert.strictEqual(result.left._tag, "SchemaInvalid")
  })

  it("agrees with the reference on unchecked instances of mutated events: the same text, or a failure", () => {
    let failures = 0
    fc.assert(
      fc.property(mutatedEvent, ({ mutation, value }) => {
        if (typeof value !== "object" || value === null || Array.isArray(value)) return
        const expected = reference(unchecked(value as Record<string, unknown>))
        const got = observed(unchecked(value as Record<string, unknown>))
        if (Either.isLeft(expected)) failures++
        assert.strictEqual(Either.isRight(got), Either.isRight(expected), mutation)
        if (Either.isRight(expected)) assert.deepStrictEqual(got, expected, mutation)
      }),
      { numRuns: RUNS * 2 }
    )
    assert.isAbove(failures, RUNS / 2)
  })

  const nested = (levels: number): unknown => {
    let value: unknown = 1
    for (let i = 0; i < levels; i++) value = [value]
    return value
  }

  it("defers to the Schema for plain objects, subclasses and non-JSON payloads, failing as it does", () => {
    const base = { id: "e", sessionId: "s", invocationId: "i", runId: "r", turnId: "t", ts: 1 }
    class Sub extends RE.UserMessage {}
    const cases: ReadonlyArray<RE.RuntimeEvent> = [
      unchecked({ ...base, body: { _tag: "UserMessage", text: "x" } }),
      RE.unsafeMake(RE.RuntimeEvent, { ...base, body: { _tag: "UserMessage", text: "x" } } as never),
      RE.unsafeMake(RE.RuntimeEvent, { ...base, body: new Sub({ text: "x" }, true) } as never),
      unchecked({ ...base, body: { _tag: "FunctionCall", callId: "c", name: "n", args: { d: new Date(0) } } }),
      unchecked({ ...base, body: { _tag: "FunctionCall", callId: "c", name: "n", args: [1, , 2] } }),
      unchecked({ ...base, hidden: undefined, body: { _tag: "UserMessage", text: "x" } }),
      // Payloads at the depth limit and one past it (containers at depth 256 are refused, counting from the event).
      unchecked({ ...base, body: { _tag: "FunctionCall", callId: "c", name: "n", args: nested(254) } }),
      unchecked({ ...base, body: { _tag: "FunctionCall", callId: "c", name: "n", args: nested(255) } })
    ]
    const verdicts = cases.map((event) => {
      const expected = reference(event)
      assert.deepStrictEqual(observed(event), expected)
      return Either.isRight(expected)
    })
    // The Schema encodes a plain body and a subclass alike (the fast path left them to it); the rest are not strict JSON.
    assert.deepStrictEqual(verdicts, [true, true, true, false, false, false, true, false])
    assert.deepStrictEqual(Either.mapLeft(RE.canonicalText(cases[7]!), (f): string => f._tag), Either.left("TooDeep") as Either.Either<string, string>)
  })
})

describe("decodeStoredText with its fast paths against the reference pipeline", () => {
  // Text-level changes that keep the JSON valid but may break canonical form.
  const perturb = (text: string, kind: number, at: number): string => {
    switch (kind) {
      case 0:
        return text
      case 1: {
        const i = text.indexOf(",", at % text.length)
        return i < 0 ? ` ${text}` : `${text.slice(0, i)}, ${text.slice(i + 1)}`
      }
      case 2:
        return text.replace(/"(\w)/, (_, c: string) => `"\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
      case 3:
        return text.replace(/:(\d+)([,}])/, ":$1.0$2")
      case 4:
        // Keys swapped: `"body"` and `"id"` of the envelope, so the order is wrong but the JSON the same.
        return JSON.stringify(Object.fromEntries(Object.entries(JSON.parse(text)).reverse()))
      default:
        return text.replace(/"args":\{/, '"args":{"10":1,"9":2,')
    }
  }

  it("gives exactly the reference result (value, or reason and message) for canonical, perturbed and mutated texts", () => {
    const outcomes = new Map<string, number>()
    fc.assert(
      fc.property(
        fc.oneof(validEvent.map((e) => ({ value: parsed(e), mutation: "none" })), mutatedEvent),
        fc.integer({ min: 0, max: 5 }),
        fc.nat(),
        ({ value }, kind, at) => {
          const canonical = CanonicalJson.encode(value)
          if (canonical._tag === "Fail") return
          const text = perturb(canonical.text, kind, at)
          const fast = RE.decodeStoredText(text)
          const reference = referenceDecode(text)
          const key = Either.isLeft(reference) ? reference.left.reason : "ok"
          outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
          if (Either.isLeft(reference)) {
            assert.deepStrictEqual(fast, reference)
          } else {
            assert.isTrue(Either.isRight(fast), `refused a text the reference accepts: ${text.slice(0, 300)}`)
            const event = (fast as Either.Right<never, RE.RuntimeEvent>).right
            assertSameShape(event, reference.right)
            assert.strictEqual(Either.getOrThrow(RE.canonicalText(event)), text)
          }
        }
      ),
      { numRuns: RUNS }
    )
    for (const outcome of ["ok", "non_canonical", "schema_invalid"]) assert.isAbove(outcomes.get(outcome) ?? 0, 0, outcome)
  })

  it("isCanonicalTextOf only ever confirms: true implies the encoder gives the same text", () => {
    let confirmed = 0
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.boolean(), (value, shuffle) => {
        const canonical = CanonicalJson.encode(value)
        if (canonical._tag === "Fail") return
        const text = shuffle ? JSON.stringify(value) : canonical.text
        const p = JSON.parse(text)
        if (CanonicalJson.isCanonicalTextOf(p, text)) {
          confirmed++
          const again = CanonicalJson.encodeParsed(p)
          assert.isTrue(again._tag === "Ok" && again.text === text, text)
        }
      }),
      { numRuns: RUNS }
    )
    assert.isAbove(confirmed, RUNS / 4)
    // Integer-like keys: canonical order differs from JavaScript's, so the fast check declines and the encoder decides.
    const text = '{"10":1,"9":2}'
    assert.isFalse(CanonicalJson.isCanonicalTextOf(JSON.parse(text), text))
    assert.strictEqual(Either.getOrUndefined(Either.map(RE.decodeStoredText(text), () => "ok")), undefined)
    // Beyond the depth limit: declined, and the encoder refuses.
    const deep = "[".repeat(300) + "]".repeat(300)
    assert.isFalse(CanonicalJson.isCanonicalTextOf(JSON.parse(deep), deep))
  })
})

describe("CanonicalJson.isCanonicalText (the scanner that stands in for re-encoding a stored event)", () => {
  // Edits that make a canonical text non-canonical (or keep it canonical), each spliced in anywhere: whitespace,
  // escapes JSON.stringify never writes, fractions and exponents, -0, unsafe integers, duplicate and unsorted keys,
  // escaped and raw surrogates, quotes and backslashes that may cut a string.
  const EDITS = [
    " ", "\n", "\\/", "\\u0041", "\\u001F", "\\u001f", "\\n", "\\u000a", "\\u0008", "\\b", "\\u0000", "\\t",
    "\\\\", "\\\"", "\"", "1.0", "1e2", "1E2", "-0", "0", "-1", "\\ud800", "\\udc00", "\\ud800\\udc00", "\ud800", "\u2028",
    ",\"a\":1", ",\"\":1", ",\"10\":1", ",\"9\":1", "9007199254740993", "123456789012345", "1234567890123456", "{}", "[]", ":"
  ]
  const edited = fc.tuple(fc.jsonValue({ maxDepth: 4 }), fc.boolean(), fc.array(fc.tuple(fc.nat(), fc.constantFrom(...EDITS)), { maxLength: 3 }))

  it("only ever confirms: true implies JSON.parse then the encoder gives the same text back", () => {
    let confirmed = 0
    let parsed = 0
    fc.assert(
      fc.property(edited, ([value, shuffle, edits]) => {
        const canonical = CanonicalJson.encode(value)
        if (canonical._tag === "Fail") return
        let text = shuffle ? JSON.stringify(value) : canonical.text
        for (let k = 0; k <= edits.length; k++) {
          if (k > 0) {
            const [at, edit] = edits[k - 1]!
            const p = at % (text.length + 1)
            text = text.slice(0, p) + edit + text.slice(p)
          }
          let p: unknown
          try {
            p = JSON.parse(text)
          } catch {
            continue
          }
          parsed++
          if (!CanonicalJson.isCanonicalText(text)) continue
          confirmed++
          const again = CanonicalJson.encodeParsed(p)
          assert.isTrue(again._tag === "Ok" && again.text === text, `confirmed a non-canonical text: ${JSON.stringify(text)}`)
        }
      }),
      { numRuns: RUNS * 4 }
    )
    assert.isAbove(confirmed, parsed / 5)
  })

  it("confirms canonical texts of strings, integers, literals and nested containers", () => {
    fc.assert(
      fc.property(
        fc.letrec((tie) => ({
          value: fc.oneof(
            { depthSize: "small" },
            fc.string({ unit: "binary" }).filter((s) => (s as { isWellFormed?: () => boolean }).isWellFormed?.() ?? true),
            fc.integer({ min: -1e15 + 1, max: 1e15 - 1 }),
            fc.constantFrom(true, false, null),
            fc.array(tie("value"), { maxLength: 4 }),
            // Keys with escapes are left to the encoder (compared as raw text, a key must have none).
            fc.dictionary(fc.string().filter((k) => !/["\\\u0000-\u001f]/.test(k)), tie("value"), { maxKeys: 4 })
          )
        })).value,
        (value) => {
          const canonical = CanonicalJson.encode(value)
          if (canonical._tag === "Fail") return
          assert.isTrue(CanonicalJson.isCanonicalText(canonical.text), canonical.text)
        }
      ),
      { numRuns: RUNS }
    )
  })

  it("decides the cases the old check declined, and declines what it cannot show", () => {
    // Integer-like keys: JavaScript orders them numerically, the canonical sort by code units; the text decides.
    assert.isTrue(CanonicalJson.isCanonicalText('{"10":1,"9":2}'))
    assert.isFalse(CanonicalJson.isCanonicalText('{"9":1,"10":2}'))
    assert.isFalse(CanonicalJson.isCanonicalText('{"a":1,"a":2}'))
    // One value and nothing after it, even when the text is a slice of one that parses (a JSONL row's event member).
    assert.isFalse(CanonicalJson.isCanonicalText('{"a":1},"event":{"b":2}'))
    assert.isFalse(CanonicalJson.isCanonicalText("1,2"))
    assert.isFalse(CanonicalJson.isCanonicalText('"x","y"'))
    assert.isFalse(CanonicalJson.isCanonicalText("[1]]"))
    assert.isTrue(CanonicalJson.isCanonicalText('{"a":[1,{"b":"c"}]}'))
    assert.isFalse(CanonicalJson.isCanonicalText('{"b":1,"a":2}'))
    assert.isTrue(CanonicalJson.isCanonicalText('{"a":{"z":1},"b":[{"y":2,"z":"\\u001f\\n"}]}'))
    assert.isFalse(CanonicalJson.isCanonicalText('{"a":1,"b":{"y":1,"x":2}}'))
    assert.isFalse(CanonicalJson.isCanonicalText('"\\u001F"'))
    assert.isFalse(CanonicalJson.isCanonicalText('"\\u000a"'))
    assert.isFalse(CanonicalJson.isCanonicalText("[-0]"))
    assert.isFalse(CanonicalJson.isCanonicalText("[1.5]"))
    assert.isFalse(CanonicalJson.isCanonicalText('{"a": 1}'))
    assert.isFalse(CanonicalJson.isCanonicalText('"\ud800"'))
    assert.isFalse(CanonicalJson.isCanonicalText("[".repeat(300) + "]".repeat(300)))
  })
})

describe("LedgerRules.nextDigest against Digest.next", () => {
  it("gives the same digest for any previous digest, seq and text (surrogates and long texts included)", () => {
    fc.assert(
      fc.property(
        fc.oneof(digest, fc.string({ maxLength: 80 }), fc.constantFrom(`sha256:${"g".repeat(64)}`, `sha256:${"A".repeat(64)}`)),
        fc.oneof(fc.maxSafeNat(), fc.constantFrom(0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, Number.MAX_SAFE_INTEGER)),
        fc.oneof(fc.string({ unit: "binary", maxLength: 200 }), fc.constantFrom(...LONE, "é".repeat(30_000), "x".repeat(70_000))),
        (previous, seq, text) => {
          assert.strictEqual(LedgerRules.nextDigest(previous, seq, text), Digest.next(previous, seq, text))
        }
      ),
      { numRuns: RUNS }
    )
  })
})

describe("unsafeMake against the constructors", () => {
  const ids = {
    sessionId: SessionId.make("s"),
    invocationId: InvocationId.make("i"),
    runId: RunId.make("r"),
    turnId: TurnId.make("t")
  }
  it("builds what `new Class(props, true)` builds: prototype, keys in order, Equal, Hash, JSON, toString", () => {
    const callId = CallId.make("c")
    // One payload object for both sides: Equal compares plain objects by reference.
    const args = { a: [1] }
    const pairs: ReadonlyArray<readonly [object, object]> = [
      [RE.unsafeMake(RE.UserMessage, { text: "hi", _tag: "UserMessage" }), new RE.UserMessage({ text: "hi" }, true)],
      [RE.unsafeMake(RE.ModelText, { text: "", _tag: "ModelText" }), new RE.ModelText({ text: "" }, true)],
      [
        RE.unsafeMake(RE.FunctionCall, { callId, name: "Bash", args, _tag: "FunctionCall" }),
        new RE.FunctionCall({ callId, name: "Bash", args }, true)
      ],
      [
        RE.unsafeMake(RE.FunctionResponse, { callId, name: "Bash", result: null, isError: true, _tag: "FunctionResponse" }),
        new RE.FunctionResponse({ callId, name: "Bash", result: null, isError: true }, true)
      ],
      [
        RE.unsafeMake(RE.RuntimeEvent, { id: EventId.make("e"), ...ids, ts: 5, hidden: true, body: new RE.ModelText({ text: "m" }) }),
        new RE.RuntimeEvent({ id: EventId.make("e"), ...ids, ts: 5, hidden: true, body: new RE.ModelText({ text: "m" }) }, true)
      ],
      [
        RE.unsafeMake(RE.CommittedRow, { digest: "sha256:x", end: 2, event: EventBuilder.make("r").user("u"), seq: 1 }),
        new RE.CommittedRow({ digest: "sha256:x", end: 2, event: EventBuilder.make("r").user("u"), seq: 1 }, true)
      ],
      [
        RE.makeCommittedRow("sha256:x", 2, EventBuilder.make("r").user("u"), 1),
        new RE.CommittedRow({ digest: "sha256:x", end: 2, event: EventBuilder.make("r").user("u"), seq: 1 }, true)
      ],
      [RE.unsafeMake(ReplayRef, { seq: 3, id: EventId.make("e") }), new ReplayRef({ seq: 3, id: EventId.make("e") }, true)],
      [ResumePlanner.replayRef(3, "e"), new ReplayRef({ seq: 3, id: EventId.make("e") }, true)],
      [
        RE.unsafeMake(OperationDecision, { callId, name: "Bash", callSeq: 2, decision: "indeterminate", reason: "legacy_dispatch_unknown" }),
        new OperationDecision({ callId, name: "Bash", callSeq: 2, decision: "indeterminate", reason: "legacy_dispatch_unknown" }, true)
      ],
      [
        RE.unsafeMake(ToolOperation, { callId, name: "Bash", status: "succeeded", callSeq: 2, responseSeq: 3 }),
        new ToolOperation({ callId, name: "Bash", status: "succeeded", callSeq: 2, responseSeq: 3 }, true)
      ]
    ]
    for (const [fast, slow] of pairs) {
      assertSameShape(fast, slow)
      assert.isTrue(Equal.equals(fast, slow))
      assert.strictEqual(Hash.hash(fast), Hash.hash(slow))
      assert.strictEqual(JSON.stringify(fast), JSON.stringify(slow))
      assert.strictEqual(String(fast), String(slow))
      assert.deepStrictEqual(fast, slow)
    }
  })
})

describe("planners take rows a store reader verified on trust, and only those", () => {
  const b = EventBuilder.make("run-t")
  const events = [
    b.opened("t1_after_preflight_v1"),
    b.user("hello"),
    b.call("c1", "Bash", { cmd: "ls" }),
    b.response("c1", "Bash", { out: "a" }),
    b.model("done"),
    b.call("c2", "Bash", { cmd: "rm" })
  ]
  // Unmarked copies of rows: a planner must verify them itself.
  const copies = (rows: ReadonlyArray<RE.CommittedRow>) =>
    rows.map((r) => new RE.CommittedRow({ digest: r.digest, end: r.end, event: r.event, seq: r.seq }, true))

  const readBack = <E, R>(store: Effect.Effect<RuntimeEventStoreShape, E, R>) =>
    Effect.gen(function*() {
      const s = yield* store
      yield* s.append(b.runId, events.slice(0, 3))
      yield* s.append(b.runId, events.slice(3))
      const rows = Chunk.toReadonlyArray(yield* Stream.runCollect(s.readRunPages(b.runId, 2)))
      const trusted = yield* planResume(s.readRunPages(b.runId, 2))
      return { rows, trusted }
    })

  const check = (rows: ReadonlyArray<RE.CommittedRow>, trusted: unknown) =>
    Effect.gen(function*() {
      const verified = yield* planResume(copies(rows))
      assert.isTrue(Equal.equals(trusted, verified), "a plan over trusted rows differs from one over verified copies")
      assert.isTrue(Equal.equals(yield* planResume(rows), verified))
      // A marked row after rows from elsewhere still continues the chain: taken; a marked row out of place is not.
      const mixed = yield* planResume([...copies(rows.slice(0, 3)), ...rows.slice(3)])
      assert.isTrue(Equal.equals(mixed, verified))
      const gap = yield* Effect.flip(planResume([...rows.slice(0, 2), ...rows.slice(3)]))
      assert.strictEqual(gap._tag === "LedgerCorruption" ? gap.reason : gap._tag, "seq_gap")
      // An unmarked row after marked ones is checked against their ids: a reused id is found, whether the planner
      // kept it in a replay ref (the model text) or the verifier set it aside (the opener).
      const last = rows[rows.length - 1]!
      for (const victim of [rows[0]!, rows[4]!]) {
        const reused = b.custom(new RE.Diagnostic({ message: "again" }), { id: victim.event.id })
        const next = new RE.CommittedRow({
          digest: Digest.next(last.digest, last.seq + 1, Either.getOrThrow(RE.canonicalText(reused))),
          end: last.seq + 1,
          event: reused,
          seq: last.seq + 1
        }, true)
        const duplicate = yield* Effect.flip(planResume([...rows, next]))
        assert.strictEqual(duplicate._tag === "LedgerCorruption" ? duplicate.reason : duplicate._tag, "duplicate_event_id")
      }
      // A mark is a private field: invisible (no key, no symbol, no descriptor a copy could take), so a row that
      // copies everything a marked row shows, but carries another event, is verified and refused.
      assert.deepStrictEqual(Reflect.ownKeys(rows[4]!), ["digest", "end", "event", "seq"])
      const forged = new RE.CommittedRow({ digest: rows[4]!.digest, end: rows[4]!.end, event: b.model("forged"), seq: rows[4]!.seq }, true)
      Object.defineProperties(forged, Object.getOwnPropertyDescriptors(rows[4]!))
      Object.defineProperty(forged, "event", { value: b.model("forged") })
      const refused = yield* Effect.flip(planResume([...rows.slice(0, 4), forged]))
      assert.strictEqual(refused._tag === "LedgerCorruption" ? refused.reason : refused._tag, "digest_mismatch")
    })

  it.effect("memory store", () =>
    Effect.gen(function*() {
      const { rows, trusted } = yield* readBack(MemoryRuntimeEventStore.make)
      yield* check(rows, trusted)
    }))

  it.scopedLive("SQLite store", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-fast-" })
      const { rows, trusted } = yield* readBack(SqliteRuntimeEventStore.make({ workspace }))
      yield* check(rows, trusted)
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})

// Found by the mutated-event property above (seed -1717934091): Effect's union parser reads `_tag` with `String(value)`,
// which throws for `{"toString":0}`. A value JSON can spell must be refused as malformed, never thrown.
describe("a body `_tag` with no string form is refused, never thrown", () => {
  const hostile = '{"body":{"_tag":{"toString":0}},"id":"e","invocationId":"i","runId":"r","sessionId":"s","ts":1,"turnId":"t"}'

  it("by the strict decoder and decodeStoredText (schema_invalid)", () => {
    const value = JSON.parse(hostile) as unknown
    assert.isUndefined(RE.decodeJsonEvent(value))
    assert.isTrue(Either.isLeft(RE.decodeEvent(value)))
    const stored = RE.decodeStoredText(hostile)
    assert.deepStrictEqual(Either.isLeft(stored) ? stored.left.reason : "decoded", "schema_invalid")
  })

  it.scopedLive("by the JSONL reader (LedgerCorruption naming the line) and by import (ImportInvalid)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-hostile-tag-" })
      const line = RE.jsonlLine(1, 1, `sha256:${"0".repeat(64)}`, hostile)
      yield* fs.writeFileString(`${workspace}/${JsonlRuntimeEventStore.FILE_NAME}`, line)
      const read = yield* Effect.flip(Effect.scoped(Effect.flatMap(
        JsonlRuntimeEventStore.make({ workspace, readOnly: true }),
        (store) => store.readRun(RunId.make("r"))
      )))
      assert.deepStrictEqual([read._tag, "reason" in read ? read.reason : undefined], ["LedgerCorruption", "schema_invalid"])
      const file = `${workspace}/import.jsonl`
      yield* fs.writeFileString(file, `${hostile}\n`)
      const refused = yield* Effect.flip(importLedger(file).pipe(Effect.provide(MemoryRuntimeEventStore.layer)))
      assert.strictEqual(refused._tag, "ImportInvalid")
    }).pipe(Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode))))
})
