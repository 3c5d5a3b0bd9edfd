// The args hash read off a FunctionCall's canonical event text (CallArgsText) against the encoder it stands in for
// (`LedgerRules.argsHash(name, args)`), on generated calls full of quotes, backslashes, escapes and non-ASCII, and on
// texts that are not a FunctionCall's; and the verifier's call index with it against the one built from the value.
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import { CallId } from "../src/Domain/Ids.js"
import * as RE from "../src/Domain/RuntimeEvent.js"
import { argsHashOfEventText } from "../src/Domain/Rules/CallArgsText.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import * as RunVerifier from "../src/Domain/Rules/RunVerifier.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"

const RUNS = Number(process.env["RR_FAST_DECODE_RUNS"] ?? 1500)

// Strings that stress a string skipper: quotes, backslashes (runs of them before a quote), controls, `}`/`]`/`,`.
const tricky = fc.oneof(
  fc.string({ unit: "binary", maxLength: 10 }),
  fc.constantFrom("\"", "\\", "\\\"", "\\\\\"", "a\\", "\\\\", "}", "]", ",\"name\":\"x\"}", ",\"callId\":\"", "\u0000", "\n", "é", "😀", "\ud800")
)
const trickyWellFormed = tricky.filter((s) => RE.isWellFormedString(s))
const args = fc.oneof(
  fc.jsonValue({ maxDepth: 4, stringUnit: "binary" }),
  fc.dictionary(tricky, fc.oneof(tricky, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constant(null))),
  fc.array(tricky),
  tricky
)
const callEvent = fc.record({
  callId: trickyWellFormed.filter((s) => s.length > 0),
  name: trickyWellFormed,
  args,
  hidden: fc.boolean(),
  id: trickyWellFormed.filter((s) => s.length > 0)
})

const textOf = (event: RE.RuntimeEvent): string => Either.getOrThrow(RE.canonicalText(event))

const build = (c: { callId: string; name: string; args: unknown; hidden: boolean; id: string }) =>
  EventBuilder.make("r").custom(new RE.FunctionCall({ callId: CallId.make(c.callId), name: c.name, args: c.args }), {
    id: c.id,
    ...(c.hidden ? { hidden: true as const } : {})
  })

describe("argsHashOfEventText against LedgerRules.argsHash", () => {
  it("gives the encoder's args hash for every generated FunctionCall's canonical text", () => {
    fc.assert(
      fc.property(callEvent, (c) => {
        const event = build(c)
        const text = textOf(event)
        const expected = Either.getOrThrow(LedgerRules.argsHash(c.name, event.body._tag === "FunctionCall" ? event.body.args : null))
        assert.strictEqual(argsHashOfEventText(text), expected, text)
      }),
      { numRuns: RUNS * 2 }
    )
  })

  it("fixed cases: escaped quotes and backslash runs before quotes, in args, callId and name", () => {
    const cases: ReadonlyArray<readonly [string, string, unknown]> = [
      ["c", "n", "\\"],
      ["c\"", "n\\", { "\"": "\\\"", "a\\": ["\\\\", "\""] }],
      ["\\", "\"", [[[{ "}": "]" }]]]],
      ["c", ",\"name\":\"x\"}", ",\"callId\":\"y\""],
      ["c", "n", -0],
      ["c", "n", 1e21],
      ["c", "n", "\ud800"]
    ]
    for (const [callId, name, a] of cases) {
      const text = textOf(EventBuilder.make("r").call(callId, name, a))
      assert.strictEqual(argsHashOfEventText(text), Either.getOrThrow(LedgerRules.argsHash(name, a)), text)
    }
  })

  it("answers undefined for texts that are not a FunctionCall event's canonical text", () => {
    const b = EventBuilder.make("r")
    const others = [b.opened(), b.user("{\"body\":{\"_tag\":\"FunctionCall\",\"args\":"), b.response("c", "n", 1), b.model("x")]
    for (const event of others) assert.isUndefined(argsHashOfEventText(textOf(event)))
    const call = textOf(b.call("c", "n", { a: "\"}" }))
    for (let cut = 0; cut < call.length; cut++) {
      const got = argsHashOfEventText(call.slice(0, cut))
      // A cut text either is refused or still holds the whole args and name (only the envelope's tail is cut).
      if (got !== undefined) assert.strictEqual(got, Either.getOrThrow(LedgerRules.argsHash("n", { a: "\"}" })))
    }
  })
})

describe("the verifier's call index with the text's args hash", () => {
  it("holds the same argsHash as the encoder gives, for calls read from their canonical texts", () => {
    fc.assert(
      fc.property(fc.array(callEvent, { minLength: 1, maxLength: 6 }), (calls) => {
        const b = EventBuilder.make("r")
        // One call per callId (a second FunctionCall for one is a violation), each with an id of its own.
        const unique = [...new Map(calls.map((c) => [c.callId, c] as const)).values()]
        const events = [b.opened(), ...unique.map((c, i) => build({ ...c, id: `e${i}` }))]
        const verifier = RunVerifier.make("r")
        let digest = LedgerRules.emptyTail("r").digest
        events.forEach((event, i) => {
          // Read back from the text, as a store's reader does (the event carries its verified text).
          const text = textOf(event)
          const decoded = RE.decodeStoredText(text)
          assert.isTrue(Either.isRight(decoded), text)
          digest = LedgerRules.nextDigest(digest, i + 1, text)
          const failure = RunVerifier.step(verifier, RE.makeCommittedRow(digest, i + 1, Either.getOrThrow(decoded), i + 1))
          assert.isUndefined(failure, failure?.message)
        })
        for (const event of events) {
          if (event.body._tag !== "FunctionCall") continue
          const entry = verifier.calls.get(event.body.callId)!
          assert.strictEqual(entry.argsHash, Either.getOrThrow(LedgerRules.argsHash(event.body.name, event.body.args)))
        }
      }),
      { numRuns: RUNS / 3 }
    )
  })

  it("a dispatch is accepted exactly when its argsHash is its call's, read from stored texts", () => {
    // What a reader that hashes every call (the JSONL open, import) decides for a T1 dispatch: accepted with the
    // call's own hash, args_hash_mismatch with the hash of other args, of the same args under another name, or of
    // args that differ only inside a string holding quotes and backslashes.
    const args = { path: "a\"b\\", list: [1, "}", { "\"": null }] }
    const cases: ReadonlyArray<readonly [string, unknown, string | undefined]> = [
      ["Bash", args, undefined],
      ["Bash", { ...args, path: "a\"b\\\\" }, "args_hash_mismatch"],
      ["Bas", args, "args_hash_mismatch"],
      ["Bash", [args], "args_hash_mismatch"]
    ]
    for (const [name, dispatchedArgs, expected] of cases) {
      const b = EventBuilder.make("r")
      const events = [b.opened("t1_after_preflight_v1"), b.call("c", "Bash", args), b.dispatched("c", name, dispatchedArgs)]
      const verifier = RunVerifier.make("r")
      let digest = LedgerRules.emptyTail("r").digest
      let failure: string | undefined
      events.forEach((event, i) => {
        if (failure !== undefined) return
        const text = textOf(event)
        digest = LedgerRules.nextDigest(digest, i + 1, text)
        const row = RE.makeCommittedRow(digest, i + 1, Either.getOrThrow(RE.decodeStoredText(text)), i + 1)
        failure = RunVerifier.step(verifier, row)?.reason
      })
      assert.strictEqual(failure, expected, `${name} ${JSON.stringify(dispatchedArgs)}`)
    }
  })
})
